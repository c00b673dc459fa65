"""`autoharnessctl skills listing`, and the listing line of status, doctor and report: the
skill listing Claude Code will send to the model in a session of this project: its budget,
each entry's cost, which are listed by name only and why, with the fix. Works on files alone
(no daemon): Claude Code's settings, skills, commands and its usage ranking, read, never
written."""

from __future__ import annotations

import os

from .verbs.common import print_json


def do_listing(args) -> int:
    from ..daemon.offline import listing_summary
    from ..protocol.config import load

    project = os.path.abspath(args.project) if args.project else os.getcwd()
    s = listing_summary(load(), project)
    if args.json:
        import msgspec

        print_json(msgspec.to_builtins(s))
        return 0
    print(format_listing(s))
    return 0


def format_listing(s) -> str:
    out = [s.text]
    for ln in s.lines:
        how = f"{ln.desc_chars} chars" if ln.full else "name only"
        used = f", score {ln.score:g}" if ln.score else ""
        out.append(f"  {ln.name:<32} {ln.layer:<8} {ln.owner:<12} {how}{used}")
    if s.fix:
        out.append(f"fix: {s.fix}")
    return "\n".join(out)


def listing_or_none(project: str | None, cfg=None):
    """The listing summary for `project` (None when it cannot be worked out: an unreadable
    config, a broken file), for the verbs that add it to what they print."""
    try:
        from ..daemon.offline import listing_summary
        from ..protocol.config import Config, ConfigError, load

        try:
            cfg = cfg or load()
        except ConfigError:
            cfg = Config()
        return listing_summary(cfg, project)
    except Exception:  # what it adds is a note: the verb's own answer goes on
        return None


def check_listing(project: str | None, cfg=None):
    """doctor's `listing` check: a warning, with the fix, when Claude Code will list learned
    skills by name only."""
    from .checks import Check

    s = listing_or_none(project, cfg)
    if s is None:
        return Check("listing", True, "could not work out Claude Code's skill listing", "",
                     warning=True)
    return Check("listing", True, s.text, s.fix, warning=bool(s.autoharness_name_only))
