"""`autoharnessctl`: the operator CLI. One `do_<verb>` per command; most talk RPC to the daemon."""

import argparse
import json
import os
import sys
import time

import msgspec

from claude_autoharness.client import (
    conn,
    doctor,
    install,
    learnings_cli,
    report,
    service,
    start,
    sync_cli,
)
from claude_autoharness.client.conn import DaemonError, DaemonUnreachable, ask, call, typed
from claude_autoharness.client.words import finding_text, findings_text, plural, when
from claude_autoharness.protocol import PROTOCOL, VERSION
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol import replies as r
from claude_autoharness.protocol.config import ConfigError


class CtlError(Exception):
    """A problem the operator can fix; printed without a traceback, exit 1."""


def _ago(ts: float | None, now: float) -> str:
    if not ts:
        return "never"
    d = max(0.0, now - ts)
    if d < 60:
        return f"{d:.0f}s ago"
    if d < 3600:
        return f"{d / 60:.0f}m ago"
    return f"{d / 3600:.1f}h ago"


def _print_json(obj) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True, default=str))


def waiting_reason(st: r.Status) -> str:
    """Why reflection jobs cannot start ("" when they can): no backend, or the token budget."""
    if st.jobs.waiting:
        return st.jobs.waiting
    if st.reflector.backend == "none":
        return st.reflector.reason or "no reflector backend"
    return ""


def waiting_note(st: r.Status) -> str:
    """The line every verb that queues or waits for jobs prints when they cannot run."""
    why = waiting_reason(st)
    if not why:
        return ""
    return (f"jobs wait and nothing is reflected: {why}. Then restart the daemon so it sees "
            "the change (`autoharnessctl restart`); "
            "`autoharnessctl doctor` checks it")


def _warn_if_waiting() -> None:
    try:
        note = waiting_note(ask(m.Status(), r.Status, timeout=5))
    except (DaemonUnreachable, DaemonError):
        return
    if note:
        print(f"warning: {note}", file=sys.stderr)


def format_status(st: r.Status, now: float | None = None) -> str:
    now = time.time() if now is None else now
    lines = [
        f"autoharnessd {st.version} (protocol {st.protocol}), pid {st.pid}, "
        f"up {st.uptime_s:.0f}s, socket {st.socket}"
    ]
    if st.protocol != PROTOCOL or st.version != VERSION:
        lines.append(f"WARNING: daemon {st.version}/protocol {st.protocol} differs from this "
                     f"client {VERSION}/protocol {PROTOCOL}: restart the daemon")
    if st.paused:
        lines.append("PAUSED: hooks count nothing (`autoharnessctl resume`)")
    ev = st.events
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(ev.by_kind.items())) or "none"
    copies = f", {ev.duplicates} repeated copies dropped" if ev.duplicates else ""
    lines.append(f"events: {ev.received} received, {ev.rejected} rejected{copies} ({kinds})")
    j = st.jobs
    lines.append(f"jobs: {j.pending} pending, {j.running} running, {j.done} done, "
                 f"{j.failed} failed")
    for f in j.recent_failures:
        where = f", session {f.session_id}" if f.session_id else ""
        lines.append(f"  failed {f.kind or 'job'} job {f.job}{where} "
                     f"({_ago(f.finished_at, now)}): {f.error or 'no reason recorded'}")
    if j.failed > len(j.recent_failures) and j.recent_failures:
        lines.append(f"  ({plural(j.failed - len(j.recent_failures), 'earlier failure')} not "
                     "shown)")
    if j.pending:
        note = waiting_note(st)
        if note:
            lines.append(f"WAITING: {note}")
    elif waiting_reason(st):  # nothing queued yet: say what will happen to the first job
        lines.append(f"reflector: {waiting_reason(st)}; jobs will wait until there is one")
    b = st.batches
    items = b.items
    if b.in_flight or items.get("waiting"):
        lines.append(f"batches: {len(b.in_flight)} in flight, "
                     f"{plural(items.get('waiting', 0), 'item')} waiting, "
                     f"{items.get('done', 0)} done, {items.get('failed', 0)} failed; "
                     f"{plural(b.tokens, 'token')} (at the batch price: {b.tokens_at_batch_price} "
                     "standard-token equivalents)" + (f" — {b.waiting}" if b.waiting else ""))
    sp = st.spool
    lines.append(f"spool: {sp.pending} pending, {sp.replayed} replayed")
    p = st.persistence
    q = ", ".join(p.quarantined) or "none"
    lines.append(f"persistence: last snapshot {_ago(p.last_snapshot_at, now)}; quarantined: {q}")
    if p.failing:
        lines.append(f"PERSISTENCE FAILING since {_ago(p.failing.since, now)}: "
                     f"{p.failing.reason}")
    lib = st.library
    by = ", ".join(f"{k} {v}" for k, v in sorted(lib.archived_by_reason.items()))
    lines.append(f"library: {lib.probation} on probation, {lib.graduated} graduated, "
                 f"{lib.hand_written} hand-written, {lib.archived} archived"
                 + (f" ({by})" if by else "") + f"; {plural(lib.turns.user, 'turn')}")
    if st.sync.configured:
        lines.append(sync_cli.format_info(st.sync))
    fb = lib.feedback
    lines.append(f"evidence: {fb.helped} helped, {fb.ignored} ignored, {fb.harmful} harmful, "
                 f"{fb.missed} missed; {lib.verdicts_refused} verdicts refused; "
                 f"{lib.stale} stale")
    if st.sessions:
        shown = len(st.sessions)
        total = max(st.sessions_total, st.sessions_offset + shown)
        more = "" if shown == total else (
            f" ({shown} of {total} shown, newest first from {st.sessions_offset + 1}; "
            "`autoharnessctl status --all` lists every one)")
        lines.append(f"sessions:{more}")
        # CALLS: tool calls counted from hook events / from the transcript (none reported);
        # SUBAGENT: its subagents' calls, which are not activity
        lines.append(f"  {'SESSION':<38} {'ACTIVITY':>8} {'WATERMARK':>10} "
                     f"{'CALLS HOOK/TRANSCRIPT':>21} {'SUBAGENT':>8}  LAST EVENT")
        for s in sorted(st.sessions, key=lambda s: -s.last_event_at):
            calls = f"{s.calls.hook}/{s.calls.transcript}"
            lines.append(f"  {s.session_id:<38} {s.activity:>8} {s.watermark:>10} {calls:>21} "
                         f"{s.subagent_calls:>8}  {_ago(s.last_event_at, now)}")
    else:
        lines.append("sessions: none active")
    return "\n".join(lines)


def do_status(args) -> int:
    limit = m.STATUS_MAX_SESSIONS if args.all else args.limit
    req = m.Status(sessions_limit=limit, sessions_offset=args.offset)
    data = call(req)
    if args.all:  # every live session, a page at a time: each reply stays small
        pages = [data]
        while (got := sum(len(p["sessions"]) for p in pages)) < pages[0].get("sessions_total", 0) \
                and pages[-1]["sessions"]:
            pages.append(call(m.Status(sessions_limit=m.STATUS_MAX_SESSIONS,
                                       sessions_offset=args.offset + got)))
        data = dict(pages[-1], sessions=[s for p in pages for s in p["sessions"]],
                    sessions_offset=args.offset)
    if args.json:
        _print_json(data)  # as the daemon sent it (the pages joined with --all)
    else:
        print(format_status(typed(data, r.Status, req)))
    return 0


def do_flush(args) -> int:
    if not args.all and not args.session_ids:
        raise CtlError("name one or more SESSION_IDs, or pass --all")
    req = m.Flush(session_ids=args.session_ids, all=args.all)
    data = call(req)
    if args.json:
        _print_json(data)
        return 0
    out = typed(data, r.Flushed, req)
    for job in out.jobs:
        print(f"queued {job.kind} job {job.id} for session {job.session_id}")
    if not out.jobs:
        print("nothing to flush (no named session has unreflected activity)")
    for sid in out.unknown:
        print(f"unknown session: {sid} (`autoharnessctl status` lists the active ones)",
              file=sys.stderr)
    if out.jobs:
        _warn_if_waiting()
    return 1 if out.unknown else 0


def do_stop(args) -> int:
    """Nothing running is what `stop` is for: it says so and succeeds, so `stop; start` and
    scripts that stop before an upgrade work whether or not a daemon ran."""
    out = start.stop_daemon()
    print(f"stopping autoharnessd (pid {out.pid})" if out else start.NOT_RUNNING)
    return 0


def do_pause(args) -> int:
    ask(m.Pause(paused=True), r.Paused)
    print("paused: hooks count nothing until `autoharnessctl resume`")
    return 0


def do_resume(args) -> int:
    ask(m.Pause(paused=False), r.Paused)
    print("resumed: hooks count again")
    return 0


def do_capture(args) -> int:
    """Print exactly the packet a model would receive, so a user can audit what leaves."""
    if bool(args.session) == bool(args.transcript):
        raise CtlError("name exactly one of --session ID or --transcript PATH")
    try:
        packet = ask(m.Capture(session_id=args.session, start=args.start,
                               transcript_path=args.transcript), r.Packet)
    except DaemonUnreachable:
        if args.session:
            raise
        packet = _offline_packet(args.transcript, args.start or 0)
    if args.json:
        _print_json(msgspec.to_builtins(packet))
    else:
        from claude_autoharness.daemon import offline

        print(offline.format_packet(packet))
    return 0


def _offline_packet(path: str, start: int) -> r.Packet:
    from claude_autoharness.daemon import offline

    try:
        return offline.capture_packet(path, start)
    except offline.OfflineError as e:
        raise CtlError(str(e)) from None


def do_learn(args) -> int:
    # `-` reads the lesson from stdin: /learn passes it through a quoted heredoc, the one
    # spelling that keeps quotes, backticks, `$` and newlines verbatim and that Claude Code's
    # Bash permission checker lets through (it refuses any `$VAR` or `$(...)` expansion)
    if args.text == ["-"] and sys.stdin.isatty():
        print("type the lesson, then Ctrl-D on a line of its own:", file=sys.stderr)
    text = sys.stdin.read() if args.text == ["-"] else " ".join(args.text)
    text = text.strip()
    if not text:
        raise CtlError("say what to learn: autoharnessctl learn \"always run make check before committing\"")
    out = ask(m.Learn(text=text, session_id=args.session or None, layer=args.layer), r.LearnQueued)
    where = f"session {out.session_id}" + ("" if out.transcript_path else
                                            ", whose transcript the daemon has not seen")
    print(f"queued learn job {out.job} ({where}); "
          "see `autoharnessctl queue list` once it has run")
    _warn_if_waiting()
    return 0


def _intent_line(i: r.Intent) -> str:
    p = i.proposal
    what = f"{p.action} {p.skill} [{p.layer}]" if p else "(malformed)"
    why = findings_text(i.findings, limit=1)
    return f"{i.id:<20} {i.status:<9} {i.source:<9} {what}" + (f"  {why}" if why else "")


def _verdict_line(v: r.VerdictRecord) -> str:
    what = f"{v.verdict.verdict} {v.verdict.skill} [{v.verdict.layer}]" if v.verdict else "(malformed)"
    why = findings_text(v.findings, limit=1)
    return f"{v.id:<20} {v.status:<9} {v.source:<9} {what}" + (f"  {why}" if why else "")


def do_queue(args) -> int:
    if args.op == "feedback":
        req = m.Queue(op="feedback")
        data = call(req)
        verdicts = typed(data, list[r.VerdictRecord], req)
        if args.json:
            _print_json(data)
        elif not verdicts:
            print("no verdicts")
        for v in verdicts if not args.json else ():
            print(_verdict_line(v))
        return 0
    if args.op == "list":
        req = m.Queue(op="list")
        data = call(req)
        items = typed(data, list[r.Intent], req)
        if args.status:
            data = [d for d, i in zip(data, items, strict=True) if i.status == args.status]
            items = [i for i in items if i.status == args.status]
        if args.json:
            _print_json(data)
        elif not items:
            print("no intents")
        else:
            for i in items:
                print(_intent_line(i))
        return 0
    if not args.id:
        raise CtlError(f"queue {args.op} needs an intent ID (see `autoharnessctl queue list`)")
    req = m.Queue(op=args.op, intent_id=args.id, why=args.why)
    data = call(req)
    if args.op == "show":
        if args.json:
            _print_json(data)
        else:
            print(format_intent(typed(data, r.Intent, req)))
        return 0
    out = typed(data, r.Outcome, req)
    if args.json:
        _print_json(data)
    else:
        why = findings_text(out.findings)
        print(f"{args.id}: {out.status}" + (f": {why}" if why else ""))
    if args.op == "approve" and out.status != "landed":
        return 1  # re-validation against today's tree said no
    return 0


def do_skills(args) -> int:
    if args.op == "export":
        from claude_autoharness.client.export import do_export
        return do_export(args)
    if args.op == "publish":
        from claude_autoharness.client.publish import publish
        code, text = publish(os.path.abspath(args.project or os.getcwd()))
        print(text, file=sys.stdout if code == 0 else sys.stderr)
        return code
    if args.op != "list" and not args.name:
        raise CtlError(f"skills {args.op} needs a skill NAME (see `autoharnessctl skills list`)")
    project = os.path.abspath(args.project) if args.project else os.getcwd()
    req = m.Skills(op=args.op, name=args.name, to=args.to, layer=args.layer, project=project)
    data = call(req)
    if args.op == "show" and not args.json:
        print(format_skill_view(typed(data, r.SkillView, req)))
        return 0
    if args.op == "history" and not args.json:
        entries = data if isinstance(data, list) else []
        print("\n".join(landing_line(e) for e in entries if isinstance(e, dict))
              or f"no history for {args.name}")
        return 0
    if args.json:
        _print_json(data)
        return 0
    if args.op == "list":
        skills = typed(data, list[r.SkillInfo], req)
        if not skills:
            print("no skills")
        for s in skills:
            print(format_skill_line(s))
        return 0
    out = typed(data, r.Outcome, req)
    why = findings_text(out.findings)
    print(f"{args.op} {args.name}: {out.status}" + (f": {why}" if why else ""))
    return 0 if out.status == "landed" else 1


def format_skill_line(s: r.SkillInfo) -> str:
    """One `skills list` row: name, layer, owner, stage (archived: why), uses over turns,
    grounded verdicts (helped/ignored/harmful/missed), and stale paths."""
    stage = s.stage or s.status
    if s.status == "archived":
        stage = f"archived ({s.reason})" if s.reason else "archived"
    turns = plural(s.turns, "turn") if s.owner == "autoharness" else "-"
    fb = s.feedback
    line = (f"{s.name:<32} {s.layer:<8} {s.owner:<11} {stage:<22} "
            f"uses {s.uses:<5} {turns:<11} "
            f"verdicts {fb.helped}/{fb.ignored}/{fb.harmful}/{fb.missed} "
            f"changed {_ago(s.last_changed, time.time())}")
    if s.stale:
        line += "\n    stale: names missing " + ", ".join(s.stale)
    return line


def format_intent(i: r.Intent) -> str:
    """`queue show ID` for people: what was proposed, from where, what became of it, when."""
    lines = [f"intent {i.id}: {i.status} (from {i.source}, {when(i.created_at)}"
             + (f"; updated {when(i.updated_at)}" if i.updated_at else "") + ")"]
    for label, value in (("session", i.session_id), ("job", i.job_id),
                         ("project", i.project_root)):
        if value:
            lines.append(f"{label}: {value}")
    for f in i.findings:
        lines.append(f"finding: {finding_text(f)}")
    p = i.proposal
    if p is None:
        lines.append("proposal: malformed" + (f":\n{_indent(i.raw)}" if i.raw else ""))
        return "\n".join(lines)
    lines.append(f"proposal: {p.action} {p.skill} [{p.layer} layer]")
    for label, value in (("reason", p.reason), ("evidence", p.evidence),
                         ("description", p.description), ("path", p.path)):
        if value:
            lines.append(f"{label}: {value}")
    for label, value in (("body", p.body), ("old", p.old), ("new", p.new),
                         ("content", p.content)):
        if value:
            lines.append(f"{label}:\n{_indent(value)}")
    return "\n".join(lines)


def format_skill_view(v: r.SkillView) -> str:
    """`skills show NAME` for people: the row of `skills list`, where it lives, its files,
    who landed each version and why, then its SKILL.md."""
    i = v.info
    lines = [format_skill_line(i).rstrip(), f"path: {i.path}"]
    if i.version is not None:
        lines.append(f"version: {i.version}" + (f", created {when(i.created)}" if i.created
                                                 else ""))
    if v.files:
        lines.append("files: " + ", ".join(v.files))
    lines += [landing_line(land) for land in v.landings]
    lines.append("")
    lines.append(v.skill_md.rstrip("\n"))
    return "\n".join(lines)


def landing_line(land: dict) -> str:
    """One landing of a skill (provenance or history) as a line: version, action, when, from
    where, why."""
    extra = ", ".join(f"{k} {land[k]}" for k in ("source", "session", "intent") if land.get(k))
    return (f"v{land.get('version', '?')} {land.get('action', '?')} {when(land.get('at'))}"
            + (f", {extra}" if extra else "")
            + (f": {land['reason']}" if land.get("reason") else ""))


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.rstrip("\n").splitlines())


def do_curate(args) -> int:
    project = os.path.abspath(args.project) if args.project else os.getcwd()
    req = m.Curate(layer=args.layer, project=project, dry_run=args.dry_run)
    data = call(req)
    if args.json:
        _print_json(data)
        return 0
    if args.dry_run:
        plan = typed(data, r.CuratePlan, req)
        for a in plan.archives:
            print(f"would archive {a.name} [{a.layer}] ({a.why})")
        if plan.held_back:
            print(f"{plan.held_back} more archives are due but over one pass's share of a layer "
                  "(library.max_archive_share): later passes take them")
        for name in plan.repairs:
            print(f"would ask the curator to repair the description of {name} (missed)")
        for name, missing in sorted(plan.stale.items()):
            print(f"would send stale {name} to the curator: names missing {', '.join(missing)}")
        shown = ", ".join(f"{k} {v}" for k, v in sorted(plan.curator_skills.items()))
        print(f"a curator run would be shown: {shown or 'no skills'}; nothing was done")
        return 0
    out = typed(data, r.CuratorQueued, req)
    for job in out.jobs:
        where = f" for {job.project}" if job.project else ""
        print(f"queued curator job {job.id} ({job.layer} layer{where}); "
              "see `autoharnessctl queue list` once it has run")
    if not out.jobs:
        print("a curator job for these layers is already waiting")
    return 0


def do_replay(args) -> int:
    from claude_autoharness.client.replay import replay

    return replay(args)


JSON_HELP = "print JSON instead of text"

FIRST_STEPS = """first steps:
  autoharnessctl start      start the daemon in the background
  autoharnessctl install    wire the hooks into Claude Code
  autoharnessctl doctor     check everything; each failure says its fix
  autoharnessctl status     see sessions being counted

`autoharnessctl COMMAND --help` shows a command's options."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="autoharnessctl",
        description="Operate the autoharness daemon: see what it counted, flush sessions, "
        "inspect what it learned.",
        epilog=FIRST_STEPS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"autoharnessctl {VERSION}")
    p.add_argument("--timeout", type=_seconds, default=conn.DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help="how long to wait for the daemon's answer (default "
                   f"{conn.DEFAULT_TIMEOUT_S:g})")
    sub = p.add_subparsers(dest="verb", metavar="COMMAND")

    s = sub.add_parser("status", help="show sessions, events, jobs, spool and persistence")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.add_argument("--all", action="store_true",
                   help="list every live session (default: the newest --limit, and a count)")
    s.add_argument("--limit", type=_count, default=50, metavar="N",
                   help="live sessions to list, newest first (default 50)")
    s.add_argument("--offset", type=_count, default=0, metavar="N",
                   help="skip the N newest sessions (page with --limit)")
    s.set_defaults(func=do_status)

    s = sub.add_parser("flush", help="queue a reflection job now for sessions with activity")
    s.add_argument("session_ids", nargs="*", metavar="SESSION_ID",
                   help="a session to reflect on (`autoharnessctl status` lists them)")
    s.add_argument("--all", action="store_true", help="every session with activity")
    s.add_argument("--json", action="store_true", help=JSON_HELP)
    s.set_defaults(func=do_flush)

    start.add_parser(sub)  # start: the daemon in the background
    s = sub.add_parser("stop", help="stop the daemon cleanly (state is persisted); "
                       "succeeds when none runs")
    s.set_defaults(func=do_stop)
    start.add_restart_parser(sub)  # restart: stop (if running), wait, start
    s = sub.add_parser("pause", help="make hooks count nothing until resume")
    s.set_defaults(func=do_pause)
    s = sub.add_parser("resume", help="undo pause")
    s.set_defaults(func=do_resume)

    s = sub.add_parser("capture", help="print exactly what would be sent to the model")
    s.add_argument("--session", metavar="ID", help="a session the daemon knows")
    s.add_argument("--transcript", metavar="PATH", help="a transcript file (works offline)")
    s.add_argument("--from", dest="start", type=int, metavar="OFFSET",
                   help="byte offset to start from (default: the session's watermark, or 0)")
    s.add_argument("--json", action="store_true", help=JSON_HELP)
    s.set_defaults(func=do_capture)

    s = sub.add_parser("learn", help="/learn: reflect now on this session with your guidance")
    s.add_argument("text", nargs="+", metavar="TEXT", help="the lesson; `-` reads it from stdin")
    s.add_argument("--session", metavar="ID", help="default: the most recently active session")
    s.add_argument("--layer", choices=("project", "user"),
                   help="the skill layer the lesson is for (default: the reflector chooses)")
    s.set_defaults(func=do_learn)

    s = sub.add_parser("queue", help="list, show, approve or reject proposed skill changes",
                       description="Proposed skill changes (intents) and what the promoter "
                       "made of them.")
    s.add_argument("op", choices=("list", "show", "approve", "reject", "feedback"), metavar="OP",
                   help="list: every intent; show ID: one in full; approve ID: land a held one "
                   "(validated again first); reject ID: drop a held one; feedback: the "
                   "reflector's verdicts on skills, accepted or refused (and why)")
    s.add_argument("id", nargs="?", metavar="ID", help="an intent id from `queue list`")
    s.add_argument("--status", choices=("queued", "landed", "rejected", "held"),
                   help="list: only intents in this state (default: all)")
    s.add_argument("--why", metavar="TEXT", help="reject: the reason, kept with the intent")
    s.add_argument("--json", action="store_true", help=JSON_HELP)
    s.set_defaults(func=do_queue)

    s = sub.add_parser("skills", help="the skill library: list (uses, turns, stage), show, "
                       "history, revert, restore; publish (git mode's review branch), export "
                       "(a Claude Code plugin)")
    s.add_argument("op", choices=("list", "show", "history", "revert", "restore", "publish",
                                  "export"), metavar="OP",
                   help="list: every skill; show NAME: its SKILL.md and files; history NAME: its "
                   "landings; revert NAME: back to an earlier version; restore NAME: bring an "
                   "archived one back; publish: git mode's review branch and how to share it; "
                   "export --plugin DIR: the live skills as a Claude Code plugin")
    s.add_argument("name", nargs="?", metavar="NAME", help="a skill name from `skills list`")
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

    s = sub.add_parser("curate", help="run the curator now: merge near-duplicate skills and "
                       "archive obsolete ones (as proposals the promoter checks)")
    s.add_argument("--layer", choices=("project", "user"), help="default: both")
    s.add_argument("--project", metavar="DIR", help="project directory (default: cwd)")
    s.add_argument("--dry-run", action="store_true",
                   help="say what a lifecycle pass (archives and why) and a curator run "
                   "(repairs, stale skills) would do now; change nothing")
    s.add_argument("--json", action="store_true", help=JSON_HELP)
    s.set_defaults(func=do_curate)

    s = sub.add_parser("replay", help="play a recorded transcript through the pipeline; "
                       "--batch: reflect on many through the Message Batches API")
    s.add_argument("transcripts", nargs="*", metavar="TRANSCRIPT",
                   help="a transcript (with --batch: files and directories of them)")
    s.add_argument("--batch", action="store_true",
                   help="send the reflections as Message Batches (half the price, results "
                        "within 24 h); the daemon polls and lands them")
    s.add_argument("--all", action="store_true",
                   help="with --batch: every transcript under $CLAUDE_CONFIG_DIR/projects")
    s.add_argument("--since", metavar="YYYY-MM-DD",
                   help="with --all: only transcripts modified on or after this date")
    s.add_argument("--cancel", action="store_true",
                   help="cancel the batches in flight and drop items not yet sent")
    s.add_argument("--session", metavar="ID", help="session id to use (default: replay-<hash>)")
    s.add_argument("--dry-run", action="store_true",
                   help="reflect offline and print the intents; nothing is queued or landed")
    s.add_argument("--project", metavar="DIR",
                   help="project directory the replayed session runs in (default: cwd)")
    s.add_argument("--wait", type=float, default=None, metavar="S",
                   help="how long to wait for the reflection jobs (default 300; with --batch "
                        "0: the daemon keeps polling after this command returns)")
    s.add_argument("--json", action="store_true", help=JSON_HELP)
    s.set_defaults(func=do_replay)

    report.add_parser(sub)  # report [--json] [--html FILE] [--days N]
    learnings_cli.add_parser(sub)  # learnings report|save|rule
    sync_cli.add_parser(sub)  # sync [init REMOTE | status]: the user layer across machines
    install.add_parser(sub)  # install: hooks + slash commands
    service.add_parser(sub)  # service install|uninstall|start|stop|status
    doctor.add_parser(sub)  # doctor [--json]
    return p


def _quiet_broken_pipe() -> int:
    """The reader went away (`autoharnessctl status | head -2`): stop without a traceback.
    stdout is pointed at /dev/null so the interpreter's final flush cannot raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141  # what a shell reports for a command ended by SIGPIPE


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"wants a whole number >= 0, not {text!r}")
    return int(text)


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = 0.0
    if not v > 0:
        raise argparse.ArgumentTypeError(f"--timeout wants a number of seconds > 0, not {text!r}")
    return v


def _timeout_everywhere(parser: argparse.ArgumentParser) -> None:
    """`--timeout` is accepted after any verb too (`autoharnessctl status --timeout 30`)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sp in set(action.choices.values()):
                if "--timeout" not in sp._option_string_actions:
                    sp.add_argument("--timeout", type=_seconds, default=argparse.SUPPRESS,
                                    metavar="SECONDS", help="how long to wait for the daemon")
                _timeout_everywhere(sp)


def _help_when_bare(parser: argparse.ArgumentParser) -> None:
    """A verb that takes a subcommand (`queue`, `skills`, `learnings`, `service`...) given none
    prints its own help, as bare `autoharnessctl` does, instead of an argparse error."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sp in set(action.choices.values()):
                for a in sp._actions:
                    if a.choices and not a.option_strings:  # the subcommand positional
                        a.required = False
                        if not isinstance(a, argparse._SubParsersAction):
                            a.nargs = "?"
                        sp.set_defaults(bare_help=(sp, a.dest))


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    _timeout_everywhere(parser)
    _help_when_bare(parser)
    args = parser.parse_args(argv)
    bare = getattr(args, "bare_help", None)
    if bare and getattr(args, bare[1], None) is None:  # `autoharnessctl queue`: its help
        bare[0].print_help()
        sys.exit(0)
    if not getattr(args, "func", None):  # bare `autoharnessctl`: say what it can do
        parser.print_help()
        sys.exit(0)
    conn.set_timeout(args.timeout)
    try:
        code = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        code = _quiet_broken_pipe()
    except DaemonUnreachable as e:
        print(f"autoharnessctl: {e}", file=sys.stderr)
        code = 1
    except (DaemonError, CtlError, ConfigError) as e:  # a verb that reads the config itself
        print(f"autoharnessctl: {e}", file=sys.stderr)
        code = 1
    except OSError as e:  # a file in the way, a full or read-only disk: one line, no traceback
        where = f"{e.filename}: " if e.filename else ""
        print(f"autoharnessctl: {where}{e.strerror or e}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)
