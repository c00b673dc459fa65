"""`autoharnessctl replay`: play a recorded transcript through the pipeline as if it happened.

One PreToolUse per tool use, a Stop after each assistant turn (when the next user prompt
starts), SessionEnd at the end — through the real daemon. `--dry-run` instead runs the same
parts in this process (state machine, capture, reflector, intake into a throwaway queue) and
prints the intents; nothing is queued for the promoter. `--batch` and `--cancel` hand many
transcripts to the daemon's Message Batches instead (client/batch.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time

import msgspec

from ...protocol import messages as m
from ...protocol import replies as r
from ...protocol.words import findings_text, plural
from ..batch import batch_replay
from ..conn import ask, call
from ..errors import CtlError
from .common import JSON_HELP, waiting_note


def add_parser(sub) -> None:
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
                   help="reflect in this process, with the reflector backend of this shell's "
                   "environment (not the daemon's), and print the intents; nothing is queued "
                   "or landed")
    s.add_argument("--project", metavar="DIR",
                   help="project directory the replayed session runs in (default: cwd)")
    s.add_argument("--wait", type=float, default=None, metavar="S",
                   help="how long to wait for the reflection jobs (default 300; with --batch "
                        "0: the daemon keeps polling after this command returns)")
    s.add_argument("--json", action="store_true", help=JSON_HELP)
    s.set_defaults(func=do_replay)


def do_replay(args) -> int:
    """Jobs still waiting when `--wait` runs out (or unable to run) are the error, after the
    intents so far are printed."""
    from ...daemon import offline

    if args.cancel or args.batch:
        return batch_replay(args)
    path, sid = _one_transcript(args)
    cwd = os.path.abspath(args.project or os.getcwd())
    if not args.dry_run:
        try:
            path = offline.stage_transcript(path, sid)
        except OSError as e:
            raise CtlError(f"cannot copy {path} for the daemon: {e}", verb="replay") from None
    events = events_from_transcript(path, sid, cwd)
    tools = sum(1 for e in events if e["hook_event_name"] == "PreToolUse")
    turns = sum(1 for e in events if e["hook_event_name"] == "Stop")
    print(f"replaying {os.path.basename(args.transcripts[0])} as session {sid}: "
          f"{plural(tools, 'tool call')}, {plural(turns, 'turn')}", file=sys.stderr)
    waiting = ""
    if args.dry_run:
        try:
            intents = offline.replay_dry_run(events, path)
        except offline.OfflineError as e:
            raise CtlError(str(e), verb="replay") from None
    else:
        intents, waiting = through_daemon(events, sid, 300.0 if args.wait is None else args.wait)
    print_intents(intents, waiting, args.json)
    if waiting:
        raise CtlError(waiting, verb="replay")
    return 0


def _one_transcript(args) -> tuple[str, str]:
    """The one transcript a replay (not `--batch`) names, and the session id to replay it as."""
    if args.all or args.since:
        raise CtlError("--all and --since go with --batch", code=2, verb="replay")
    if len(args.transcripts) != 1:
        raise CtlError("name one TRANSCRIPT (or use --batch for many)", code=2, verb="replay")
    path = args.transcripts[0]
    if not os.path.isfile(path):
        raise CtlError(f"no such transcript: {path}", verb="replay")
    try:
        return path, session_id_for(path, args.session)
    except ValueError as e:
        raise CtlError(str(e), verb="replay") from None


def print_intents(intents: list[r.Intent], waiting: str, as_json: bool) -> None:
    if as_json:
        print(json.dumps(msgspec.to_builtins(intents), indent=2))
        return
    if not intents:
        print("no intents yet: the jobs have not run" if waiting
              else "no intents (the reflector proposed nothing)")
    for i in intents:
        p = i.proposal
        why = findings_text(i.findings)
        what = f"{p.action} {p.skill} [{p.layer}]" if p else "? ? [?]"
        print(f"{i.status:<9} {what}" + (f": {why}" if why else ""))
        if p and p.reason:
            print(f"          why: {p.reason}")


def session_id_for(path: str, given: str | None) -> str:
    from ...daemon import offline

    if given:
        if not offline.valid_session_id(given):
            raise ValueError(f"invalid session id {given!r}")
        return given
    # never the file's own id: that is a real session the daemon may know
    return "replay-" + hashlib.sha256(os.path.abspath(path).encode()).hexdigest()[:12]


def _is_prompt(rec: dict) -> bool:
    """A user record a person typed (not a tool result, not injected meta)."""
    if rec.get("type") != "user" or rec.get("isMeta") or rec.get("isCompactSummary"):
        return False
    content = (rec.get("message") or {}).get("content")
    if isinstance(content, str):
        return True
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "text" for b in content)


def events_from_transcript(path: str, session_id: str, cwd: str) -> list[dict]:
    base: dict[str, object] = {"session_id": session_id, "transcript_path": os.path.abspath(path), "cwd": cwd}
    events = [dict(base, hook_event_name="SessionStart", source="startup")]
    in_turn = False
    with open(path, "rb") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if not isinstance(rec, dict) or rec.get("isSidechain"):
                continue
            if _is_prompt(rec):
                if in_turn:
                    events.append(dict(base, hook_event_name="Stop", stop_hook_active=False))
                in_turn = False
                events.append(dict(base, hook_event_name="UserPromptSubmit"))
                continue
            content = (rec.get("message") or {}).get("content")
            if rec.get("type") == "assistant" and isinstance(content, list):
                in_turn = True
                for b in content:
                    if isinstance(b, dict) and b.get("type") == "tool_use":
                        events.append(dict(base, hook_event_name="PreToolUse",
                                           tool_name=b.get("name"), tool_input=b.get("input"),
                                           tool_use_id=b.get("id")))
    if in_turn:
        events.append(dict(base, hook_event_name="Stop", stop_hook_active=False))
    events.append(dict(base, hook_event_name="SessionEnd", reason="other"))
    return events


def through_daemon(events: list[dict], sid: str, wait: float) -> tuple[list[r.Intent], str]:
    """Send the events, wait for the jobs; (this session's intents, why jobs wait or "")."""
    for ev in events:
        call(m.Hook(payload=msgspec.Raw(json.dumps(ev).encode()), ts=time.time(), replayed=True))
    end = time.monotonic() + wait
    note = ""
    while time.monotonic() < end:
        st = ask(m.Status(), r.Status)
        note = waiting_note(st) if st.jobs.pending else ""
        if st.jobs.pending + st.jobs.running == 0 or note:
            break
        time.sleep(0.2)
    return [i for i in ask(m.Queue(op="list"), list[r.Intent]) if i.session_id == sid], note
