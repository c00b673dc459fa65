"""`autoharnessctl skills list|show|history|revert|restore|forget|publish|export`: the skill
library.
`publish` and `export` work on files (client/publish.py, client/export.py); the rest ask the
daemon."""

from __future__ import annotations

import os
import time

from ...protocol import messages as m
from ...protocol import replies as r
from ...protocol.words import adherence_line, findings_text, learned_words, plural, when
from ..conn import call, typed
from ..errors import CtlError
from ..listing import do_listing
from .common import JSON_HELP, ago, print_json

OPS = ("list", "show", "history", "revert", "restore", "forget", "check", "publish", "export",
       "listing")
CHECK_OPS = ("approve",)


def add_parser(sub) -> None:
    s = sub.add_parser("skills", help="the skill library: list (uses, turns, stage), show, "
                       "history, revert, restore, forget; publish (git mode's review branch), "
                       "export "
                       "(a Claude Code plugin)")
    s.add_argument("op", choices=OPS, metavar="OP",
                   help="list: every skill; show NAME: its SKILL.md and files; history NAME: its "
                   "landings; revert NAME: back to an earlier version; restore NAME: bring an "
                   "archived one back; forget NAME: take an autoharness skill out of the "
                   "library (any version) and never learn it again until it is restored; "
                   "check approve NAME: confirm the lesson's check, so its ask or deny "
                   "applies; publish: git mode's review branch and how to share it; "
                   "export --plugin DIR: the live skills as a Claude Code plugin; listing: the "
                   "skill listing Claude Code will send (its budget, who is listed by name only)")
    s.add_argument("name", nargs="?", metavar="NAME", help="a skill name from `skills list`")
    s.add_argument("check_skill", nargs="?", metavar="SKILL",
                   help="check approve SKILL: the skill whose check is approved")
    s.add_argument("--to", metavar="VERSION", help="revert to this version (default: previous)")
    s.add_argument("--layer", choices=("project", "user"),
                   help="only this layer (default: both; a NAME in both layers must name one)")
    s.add_argument("--project", metavar="DIR", help="project directory (default: cwd)")
    s.add_argument("--plugin", metavar="DIR", help="export: write the plugin here")
    s.add_argument("--marketplace", action="store_true",
                   help="export: add a marketplace manifest, so DIR can be added as one")
    s.add_argument("--plugin-name", default="autoharness-skills", metavar="NAME",
                   help="export: the plugin's name (default: %(default)s)")
    s.add_argument("--owner", default="autoharness", metavar="NAME",
                   help="export: the author/owner to name (default: %(default)s)")
    s.add_argument("--license", metavar="SPDX", default="LicenseRef-Proprietary",
                   help="export: the plugin's licence, an SPDX id such as MIT (default: "
                   "%(default)s: no rights granted)")
    s.add_argument("--json", action="store_true", help=JSON_HELP)
    s.set_defaults(func=do_skills)


def do_skills(args) -> int:
    if args.op in FILE_OPS:
        return FILE_OPS[args.op](args)
    if args.op != "list" and not args.name:
        raise CtlError(f"skills {args.op} needs a skill NAME (see `autoharnessctl skills list`)",
                       code=2)
    if args.to is not None and not args.to.isdigit():
        raise CtlError(f"--to wants a version number, not {args.to!r} (`autoharnessctl skills "
                       f"history {args.name}` lists them)", code=2, verb=f"skills {args.op}")
    project = os.path.abspath(args.project) if args.project else os.getcwd()
    req = m.Skills(op=args.op, name=args.name, to=args.to, layer=args.layer, project=project)
    data = call(req)
    if args.json:
        print_json(data)
        return 0
    if args.op == "show":
        print(format_skill_view(typed(data, r.SkillView, req)))
        return 0
    if args.op == "history":
        entries = data if isinstance(data, list) else []
        print("\n".join(landing_line(e) for e in entries if isinstance(e, dict))
              or f"no history for {args.name}")
        return 0
    if args.op == "list":
        skills = typed(data, list[r.SkillInfo], req)
        if not skills:
            print("no skills")
        for s in skills:
            print(format_skill_line(s))
        return 0
    out = typed(data, r.Outcome, req)  # revert, restore, forget: a refusal is a negative answer
    if args.op == "forget" and out.status == "landed":
        print(f"forgot {args.name}: it is out of the live library (archived as forgotten, "
              "version kept) and is not learned again; `autoharnessctl skills restore "
              f"{args.name}` brings it back")
        return 0
    why = findings_text(out.findings)
    print(f"{args.op} {args.name}: {out.status}" + (f": {why}" if why else ""))
    return 0 if out.status == "landed" else 1


def _check(args) -> int:
    if args.name not in CHECK_OPS or not args.check_skill:
        raise CtlError("say what: skills check approve NAME (NAME from `skills list`)",
                       verb="skills check")
    project = os.path.abspath(args.project) if args.project else os.getcwd()
    req = m.Skills(op="approve_check", name=args.check_skill, layer=args.layer, project=project)
    data = call(req)
    if args.json:
        print_json(data)
        return 0
    c = typed(data, r.SkillCheck, req)
    print(f"approved the check of {args.check_skill}: {check_line(c)}")
    return 0


def check_line(c: r.SkillCheck) -> str:
    """A check in a line: its rule, what it does now, and what it will do once confirmed."""
    now = c.action if c.confirmed else f"{c.action} (until confirmed; then {c.proposed})"
    return f"{c.rule} -> {now}" + (f", confirmed by {c.confirmed}" if c.confirmed else "")


def _export(args) -> int:
    from .. import export

    if not args.plugin:
        raise CtlError("say where: --plugin DIR", code=2, verb="skills export")
    layers = [args.layer] if args.layer else ["project", "user"]
    project = os.path.abspath(args.project or os.getcwd())
    try:
        skills = export.export(args.plugin, layers=layers, project=project,
                               name=args.plugin_name, owner=args.owner,
                               marketplace=args.marketplace,
                               license=args.license or export.DEFAULT_LICENSE)
    except (export.ExportError, OSError) as e:
        raise CtlError(str(e), verb="skills export") from None
    where = os.path.abspath(args.plugin)
    print(f"exported {len(skills)} skill(s) to {where}")
    for s in skills:
        print(f"  {s.name} [{s.layer}] version {s.version}")
    if args.marketplace:
        print(f"add it with: /plugin marketplace add {where}  then  /plugin install "
              f"{args.plugin_name}@{args.plugin_name}")
    else:
        print(f"check it with: claude plugin validate {where}")
    return 0


def _publish(args) -> int:
    from ..publish import publish

    code, text = publish(os.path.abspath(args.project or os.getcwd()))
    if code:
        raise CtlError(text, code=code, verb="skills publish")
    print(text)
    return 0


def format_skill_line(s: r.SkillInfo) -> str:
    """One `skills list` row: name, layer, owner, stage (archived: why), uses over turns,
    the grounded verdicts on its current version in words, and stale paths."""
    stage = s.stage or s.status
    if s.status == "archived":
        stage = f"archived ({s.reason})" if s.reason else "archived"
    turns = plural(s.turns, "turn") if s.owner == "autoharness" else "-"
    line = (f"{s.name:<32} {s.layer:<8} {s.owner:<11} {stage:<22} "
            f"uses {s.uses:<5} {turns:<11} {verdict_counts(s.feedback):<26} "
            f"changed {ago(s.last_changed, time.time())}")
    if s.stale:
        line += "\n    stale: names missing " + ", ".join(s.stale)
    if s.check is not None:
        line += "\n    check: " + check_line(s.check)
        for a in s.check.adherence:
            line += f"\n      {a.project or '(no project)'}: {adherence_line(a)}"
    return line


def verdict_counts(fb: r.FeedbackCounts) -> str:
    """The verdicts on a skill's current version in words: `verdicts: 1 helped, 2 missed`."""
    said = [f"{n} {k}" for k in ("helped", "ignored", "harmful", "missed")
            if (n := getattr(fb, k))]
    return "verdicts: " + ", ".join(said) if said else "no verdicts"


def verdict_line(v: dict) -> str:
    """One verdict of `skills show`: what, on which version, when, and its quote."""
    version = f"v{v.get('version', '?')}" + ("" if v.get("current") else ", an earlier text")
    return (f"  {v.get('verdict', '?')} ({version}) {when(v.get('at'))}: "
            f"\"{v.get('quote') or ''}\"")


def format_skill_view(v: r.SkillView) -> str:
    """`skills show NAME` for people: the row of `skills list`, where it lives, its files,
    who landed each version and why, every verdict with its quote, then its SKILL.md."""
    i = v.info
    lines = [format_skill_line(i).rstrip(), f"path: {i.path}"]
    if i.learned is not None:
        lines.append(learned_words(i.learned))
    if i.version is not None:
        lines.append(f"version: {i.version}" + (f", created {when(i.created)}" if i.created
                                                 else ""))
    if v.files:
        lines.append("files: " + ", ".join(v.files))
    lines += [landing_line(land) for land in v.landings]
    if v.verdicts:
        lines.append("verdicts (grounded in the windows they quote):")
        lines += [verdict_line(x) for x in v.verdicts]
    lines.append("")
    lines.append(v.skill_md.rstrip("\n"))
    return "\n".join(lines)


def landing_line(land: dict) -> str:
    """One landing of a skill (provenance or history) as a line: version, action, when, from
    where, why."""
    extra = ", ".join(f"{k} {land[k]}" for k in ("source", "session", "machine", "intent")
                      if land.get(k))
    return (f"v{land.get('version', '?')} {land.get('action', '?')} {when(land.get('at'))}"
            + (f", {extra}" if extra else "")
            + (f": {land['reason']}" if land.get("reason") else ""))


# The operations with a way of their own (on files, or `check`'s own request), not a `Skills` ask.
FILE_OPS = {"export": _export, "publish": _publish, "check": _check, "listing": do_listing}
