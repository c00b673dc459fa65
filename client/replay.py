"""`autoharnessctl replay`: play a recorded transcript through the pipeline as if it happened.

One PreToolUse per tool use, a Stop after each assistant turn (when the next user prompt
starts), SessionEnd at the end — through the real daemon. `--dry-run` instead runs the same
parts in this process (state machine, capture, reflector, intake into a throwaway queue) and
prints the intents; nothing is queued for the promoter.
"""

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time

import msgspec

from claude_autoharness.client.conn import call
from claude_autoharness.client.words import findings_text, plural
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol import paths


def session_id_for(path: str, given: str | None) -> str:
    from claude_autoharness.daemon.sessions import valid_session_id

    if given:
        if not valid_session_id(given):
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
    path = args.transcript
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
            path = stage_transcript(path, sid)
        except OSError as e:
            print(f"autoharnessctl replay: cannot copy {path} for the daemon: {e}", file=sys.stderr)
            return 1
    events = events_from_transcript(path, sid, cwd)
    tools = sum(1 for e in events if e["hook_event_name"] == "PreToolUse")
    turns = sum(1 for e in events if e['hook_event_name'] == 'Stop')
    print(f"replaying {os.path.basename(args.transcript)} as session {sid}: "
          f"{plural(tools, 'tool call')}, {plural(turns, 'turn')}", file=sys.stderr)
    waiting = ""
    if args.dry_run:
        intents = dry_run(events, path)
    else:
        intents, waiting = through_daemon(events, sid, args.wait)
    if waiting:
        print(f"autoharnessctl replay: {waiting}", file=sys.stderr)
    if args.json:
        print(json.dumps(intents, indent=2))
    elif not intents:
        print("no intents yet: the jobs have not run" if waiting
              else "no intents (the reflector proposed nothing)")
    else:
        for i in intents:
            p = i.get("proposal") or {}
            why = findings_text(i.get("findings"))
            print(f"{i['status']:<9} {p.get('action', '?')} {p.get('skill', '?')} "
                  f"[{p.get('layer', '?')}]" + (f": {why}" if why else ""))
            if p.get("reason"):
                print(f"          why: {p['reason']}")
    return 1 if waiting else 0


def stage_transcript(path: str, sid: str) -> str:
    """A private copy of the named transcript where the daemon may read it: the daemon reads
    transcripts only under its roots, and the file named here may live anywhere."""
    from claude_autoharness.daemon import store
    from claude_autoharness.daemon.capture.source import open_regular

    store.ensure_private_dir(paths.state_dir())
    store.ensure_private_dir(paths.replays_dir())
    dst = os.path.join(paths.replays_dir(), f"{sid}.jsonl")
    tmp = dst + ".tmp"
    with open(open_regular(path), "rb") as src, \
            open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
        shutil.copyfileobj(src, out)
    os.replace(tmp, dst)
    return dst


def through_daemon(events: list[dict], sid: str, wait: float) -> tuple[list[dict], str]:
    """Send the events, wait for the jobs; (this session's intents, why jobs wait or "")."""
    from claude_autoharness.client.ctl import waiting_note

    for ev in events:
        call(m.Hook(payload=msgspec.Raw(json.dumps(ev).encode()), ts=time.time(), replayed=True))
    end = time.monotonic() + wait
    note = ""
    while time.monotonic() < end:
        st = call(m.Status())
        note = waiting_note(st) if st["jobs"]["pending"] else ""
        if st["jobs"]["pending"] + st["jobs"]["running"] == 0 or note:
            break
        time.sleep(0.2)
    return [i for i in call(m.Queue(op="list")) if i.get("session_id") == sid], note


def dry_run(events: list[dict], path: str) -> list[dict]:
    """The pipeline's own parts, in-process: nothing reaches the daemon or the skill tree."""
    from claude_autoharness.daemon import sessions as sm
    from claude_autoharness.daemon.capture.packet import build_packet
    from claude_autoharness.daemon.intents import IntentQueue
    from claude_autoharness.daemon.live import make_redactor, new_id
    from claude_autoharness.daemon.reflect import backends
    from claude_autoharness.daemon.reflect.prompt import build_request
    from claude_autoharness.protocol.config import load as load_config

    cfg = load_config()
    redactor = make_redactor(cfg)
    backend = backends.choose_backend(cfg.reflector)
    if backend == "none":
        raise SystemExit(f"autoharnessctl replay: {backends.available(cfg.reflector)['reason']}")
    decoder = msgspec.json.Decoder(sm.HookEvent)
    sessions: dict[str, sm.Session] = {}
    jobs: list[sm.Job] = []
    for ev in events:
        jobs += sm.apply_event(sessions, decoder.decode(json.dumps(ev)), now=time.time(),
                               reflect_every=cfg.reflect_every, make_id=new_id)
    out: list[dict] = []
    start = 0
    with tempfile.TemporaryDirectory(prefix="ah-replay-") as tmp:
        queue = IntentQueue(os.path.join(tmp, "intents.jsonl"))
        queue.load()
        for job in jobs:
            packet = build_packet(path, start, cfg.capture, redactor)
            start = packet.watermark_to
            if not packet.window.strip():
                continue
            prompt = build_request(packet.window, packet.digest, [], guidance=None,
                                   max_intents=cfg.reflector.max_intents_per_job)
            result = backends.reflect(backend, prompt, cfg.reflector)
            intents = queue.intake(job.id, job.session_id, "reflector", result.proposals,
                                   packet.window, events[0]["cwd"],
                                   cfg.reflector.max_intents_per_job, redactor)
            out += [msgspec.to_builtins(i) for i in intents]
    return out
