"""`autoharnessctl learnings report|save|rule`: markers, compatible with `atl learning-capture`.

`report` works offline on the transcript files; `save` goes through the daemon when it runs
(the daemon owns marker state, so a save is never followed by a re-report) and works on the
files directly when it does not.
"""

import json
import os
import sys

import msgspec

from ...protocol import messages as m
from ...protocol import paths
from ...protocol import replies as r
from ...protocol.words import plural
from .. import settings
from ..conn import DaemonNotRunning, ask
from ..errors import CtlError

TERMINAL_NOTE = ("no hook input on stdin (a terminal): reporting this project's transcripts, as "
                 "--previous-transcripts does; --transcript-path FILE lists one transcript")


def _print_report(markers, args, *, listing: bool) -> None:
    from ...daemon import offline

    offline.print_report(markers, as_json=args.json, listing=listing,
                         silent_if_empty=args.silent_if_empty, plugin=_plugin_only(args))


def _plugin_only(args) -> bool:
    """Whether the commands in effect are the plugin's (`/autoharness:save-learnings`): it is
    enabled and no settings install put `/save-learnings` in a commands dir."""
    from ...protocol import paths

    project = os.path.abspath(getattr(args, "project", None) or os.getcwd())
    sources = settings.settings_sources(project)
    if not any(s.data is not None and settings.enabled_plugin(s.data) for s in sources):
        return False
    dirs = (paths.user_commands_dir(), paths.project_commands_dir(project))
    return not any(os.path.isfile(os.path.join(d, "save-learnings.md")) for d in dirs)


def _report(args) -> int:
    from ...daemon import offline

    hook_mode = not args.previous_transcripts and not args.transcript_path
    if hook_mode and _stdin_is_terminal():
        # A person typed it: the hook JSON will never come, so never wait for it.
        print(f"autoharnessctl learnings report: {TERMINAL_NOTE}", file=sys.stderr)
        hook_mode = False
    if args.transcript_path and not os.path.isfile(args.transcript_path):
        under = os.path.join(paths.claude_projects_dir(), "<project>")
        raise CtlError(f"no such transcript: {args.transcript_path} (pass a session's .jsonl "
                       f"file, as found under {under})", verb="learnings report")
    try:
        if args.transcript_path:
            # The processed ids are the transcript's project's: its directory under projects/
            # is the Claude Code slug, whatever directory this runs from.
            _print_report(offline.markers_of_transcript(args.transcript_path), args,
                          listing=True)
            return 0
        if hook_mode:
            payload = json.loads(sys.stdin.buffer.read() or b"{}")
            if not isinstance(payload, dict):
                raise ValueError("hook input must be a JSON object")
            tp = payload.get("transcript_path")
            slug = offline.slug_of_transcript(tp) if isinstance(tp, str) and tp else None
            cwd = payload["cwd"] if isinstance(payload.get("cwd"), str) else os.getcwd()
            slug = slug or offline.slug_of_project(cwd)
        else:
            slug = offline.slug_of_project(args.project or os.getcwd())
        markers = offline.project_markers(slug)
        _print_report(markers, args, listing=False)
    except (OSError, ValueError) as e:
        # as a hook it must never fail the session: said on stderr, exit 0
        raise CtlError(str(e), code=0 if hook_mode else 1, verb="learnings report") from None
    return 0


def _stdin_is_terminal() -> bool:
    try:
        return os.isatty(sys.stdin.fileno())
    except (AttributeError, ValueError, OSError):
        return False


def _save_offline(project: str, transcripts: list[str], dry_run: bool) -> r.LearningsSaved:
    """The save on the files themselves (no daemon)."""
    from ...daemon import offline

    try:
        return offline.save_learnings(project, transcripts, dry_run=dry_run)
    except (offline.OfflineError, OSError, ValueError) as e:
        raise CtlError(str(e), verb="learnings save") from None


def _save(args) -> int:
    project = os.path.abspath(args.project or os.getcwd())
    transcripts = [t for t in (args.transcripts or "").split(",") if t]
    try:
        res = ask(m.Learnings(op="save", project=project, transcripts=transcripts,
                              dry_run=args.dry_run), r.LearningsSaved, timeout=120)
    except DaemonNotRunning:
        # Only when nothing listens: a daemon that took the request but did not answer may
        # still be saving, and an offline save beside it would race it (the error surfaces).
        res = _save_offline(project, transcripts, args.dry_run)
    if args.json:
        print(json.dumps(msgspec.to_builtins(res), indent=2))
        return 0
    verb = "would save" if res.dry_run else "saved"
    print(f"{verb} {plural(len(res.saved), 'marker')} ({len(res.skipped)} already saved)")
    for items, label in ((res.journal, "journal"), (res.wiki, "wiki"), (res.drafts, "doc drafts")):
        if items:
            print(f"  {label}: " + ", ".join(items))
    if res.intents:
        print(f"  skill lessons queued for the promoter: {len(res.intents)} "
              "(see `autoharnessctl queue list`)")
    return 0


def _rule(args) -> int:
    from ...daemon import offline

    print(offline.rule_text())
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("learnings", help="report and save <!-- learning --> markers")
    lsub = p.add_subparsers(dest="learnings_verb", metavar="VERB", required=True)
    rep = lsub.add_parser("report", help="unprocessed markers (no mode: hook JSON on stdin; "
                          "on a terminal: this project's transcripts)")
    mode = rep.add_mutually_exclusive_group()
    mode.add_argument("--previous-transcripts", action="store_true",
                      help="scan this project's transcripts since the last save")
    mode.add_argument("--transcript-path", metavar="P", help="list the markers in one transcript")
    rep.add_argument("--project", metavar="DIR", help="project directory (default: cwd)")
    rep.add_argument("--silent-if-empty", action="store_true",
                     help="print nothing when there are no markers")
    rep.add_argument("--json", action="store_true", help="print JSON instead of text")
    s = lsub.add_parser("save", help="write journal, wiki, doc drafts and skill intents")
    s.add_argument("--project", metavar="DIR", help="project directory (default: cwd)")
    s.add_argument("--transcripts", metavar="A,B", help="only markers from these transcripts")
    s.add_argument("--dry-run", action="store_true", help="say what would be written")
    s.add_argument("--json", action="store_true", help="print JSON instead of text")
    lsub.add_parser("rule", help="print the marker rule injected at session start")
    p.set_defaults(func=do_learnings)


def do_learnings(args) -> int:
    return OPS[args.learnings_verb](args)


OPS = {"report": _report, "save": _save, "rule": _rule}
