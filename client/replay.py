"""`autoharnessctl replay`: play a recorded transcript through the pipeline as if it happened.

One PreToolUse per tool use, a Stop after each assistant turn (when the next user prompt
starts), SessionEnd at the end — through the real daemon. `--dry-run` instead runs the same
parts in this process (state machine, capture, reflector, intake into a throwaway queue) and
prints the intents; nothing is queued for the promoter.
"""

import hashlib
import json
import os
import sys
import time

import msgspec

from claude_autoharness.client.conn import ask, call
from claude_autoharness.client.words import findings_text, plural
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol import replies as r


def session_id_for(path: str, given: str | None) -> str:
    from claude_autoharness.daemon import offline

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


def replay(args) -> int:
    from claude_autoharness.daemon import offline

    if args.cancel or args.batch:
        from claude_autoharness.client.batch import batch_replay
        return batch_replay(args)
    if args.all or args.since:
        print("autoharnessctl replay: --all and --since go with --batch", file=sys.stderr)
        return 1
    if len(args.transcripts) != 1:
        print("autoharnessctl replay: name one TRANSCRIPT (or use --batch for many)",
              file=sys.stderr)
        return 1
    path = args.transcripts[0]
    args.wait = 300.0 if args.wait is None else args.wait
    if not os.path.isfile(path):
        print(f"autoharnessctl replay: no such transcript: {path}", file=sys.stderr)
        return 1
    try:
        sid = session_id_for(path, args.session)
    except ValueError as e:
        print(f"autoharnessctl replay: {e}", file=sys.stderr)
        return 1
    cwd = os.path.abspath(args.project or os.getcwd())
    if not args.dry_run:
        try:
            path = offline.stage_transcript(path, sid)
        except OSError as e:
            print(f"autoharnessctl replay: cannot copy {path} for the daemon: {e}", file=sys.stderr)
            return 1
    events = events_from_transcript(path, sid, cwd)
    tools = sum(1 for e in events if e["hook_event_name"] == "PreToolUse")
    turns = sum(1 for e in events if e['hook_event_name'] == 'Stop')
    print(f"replaying {os.path.basename(args.transcripts[0])} as session {sid}: "
          f"{plural(tools, 'tool call')}, {plural(turns, 'turn')}", file=sys.stderr)
    waiting = ""
    if args.dry_run:
        try:
            intents = offline.replay_dry_run(events, path)
        except offline.OfflineError as e:
            print(f"autoharnessctl replay: {e}", file=sys.stderr)
            return 1
    else:
        intents, waiting = through_daemon(events, sid, args.wait)
    if waiting:
        print(f"autoharnessctl replay: {waiting}", file=sys.stderr)
    if args.json:
        print(json.dumps(msgspec.to_builtins(intents), indent=2))
    elif not intents:
        print("no intents yet: the jobs have not run" if waiting
              else "no intents (the reflector proposed nothing)")
    else:
        for i in intents:
            p = i.proposal
            why = findings_text(i.findings)
            what = f"{p.action} {p.skill} [{p.layer}]" if p else "? ? [?]"
            print(f"{i.status:<9} {what}" + (f": {why}" if why else ""))
            if p and p.reason:
                print(f"          why: {p.reason}")
    return 1 if waiting else 0


def through_daemon(events: list[dict], sid: str, wait: float) -> tuple[list[r.Intent], str]:
    """Send the events, wait for the jobs; (this session's intents, why jobs wait or "")."""
    from claude_autoharness.client.ctl import waiting_note

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
