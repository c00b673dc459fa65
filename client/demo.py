"""`autoharnessctl demo`: the whole loop once, on this machine, with no model backend and
nothing left behind.

It makes a throw-away home in a temp dir (its own state dir, Claude config dir, socket and
project: nothing of the user's is read or written), writes a short recorded session there (a
user correcting the agent), starts a real daemon on it whose reflector is a scripted stand-in
for `claude -p` (it always proposes the same lesson, quoting the session), and drives the real
hook client through the session. The real pipeline does the rest: the window is cut and
redacted, the scripted reflector answers, the promoter checks the proposal against the window
and lands a skill; a second session's start then gets the context a real one would. Then it
stops the daemon and deletes the home. Every line it prints says it is a demonstration.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from ..protocol import messages as m
from ..protocol import paths
from ..protocol import replies as r
from .conn import DaemonError, DaemonUnreachable, ask, call
from .errors import CtlError
from .files import find_script

SKILL = "migrate-before-integration-tests"
LESSON = "Always run make migrate before the integration tests: they need the new schema."
DESCRIPTION = ("Use when running the integration tests: migrate the database schema first "
               "(make migrate), or they fail on missing columns.")
BODY = ("1. Run `make migrate` before `make integration-test`.\n"
        "2. If a test fails on a missing column, the schema is old: migrate, then rerun.\n")
WAIT_S = 60.0
LABEL = "[demo]"


def _records(cwd: str, sid: str) -> list[dict]:
    """A recorded session as Claude Code writes it: the tests fail, the user says why, the
    agent migrates and the tests pass."""
    def rec(kind: str, content, n: int) -> dict:
        role = "user" if kind == "user" else "assistant"
        return {"type": kind, "uuid": f"00000000-0000-4000-8000-{n:012d}", "sessionId": sid,
                "cwd": cwd, "timestamp": f"2026-01-01T10:00:{n:02d}.000Z",
                "message": {"role": role, "content": content}}

    def tool(n: int, command: str) -> dict:
        return rec("assistant", [{"type": "tool_use", "id": f"toolu_demo{n}", "name": "Bash",
                                  "input": {"command": command}}], n)

    def result(n: int, text: str) -> dict:
        return rec("user", [{"type": "tool_result", "tool_use_id": f"toolu_demo{n - 1}",
                             "content": text}], n)

    return [rec("user", "Please run the integration tests.", 1),
            tool(2, "make integration-test"),
            result(3, "FAILED test_signup: column users.email does not exist"),
            rec("assistant", [{"type": "text", "text": "The tests fail on a missing column."}], 4),
            rec("user", LESSON, 5),
            tool(6, "make migrate"), result(7, "migrated to version 12"),
            tool(8, "make integration-test"), result(9, "12 passed"),
            rec("assistant", [{"type": "text", "text": "Migrated, then all 12 tests passed."}],
                10)]


def _reflector(path: str) -> None:
    """The scripted stand-in for `claude -p`: whatever it is asked, it proposes the lesson the
    recorded session teaches, as a `claude -p --output-format json` result."""
    proposal = {"action": "create", "skill": SKILL, "layer": "project",
                "reason": "the user corrected the agent: the integration tests need the "
                          "schema migrated first", "evidence": LESSON,
                "description": DESCRIPTION, "body": BODY, "old": None, "new": None,
                "path": None, "content": None}
    answer = {"type": "result", "subtype": "success", "is_error": False, "num_turns": 1,
              "result": "(scripted demo reflector)",
              "structured_output": {"proposals": [proposal], "feedback": []},
              "usage": {"input_tokens": 0, "output_tokens": 0}}
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"#!{sys.executable}\nimport sys\nsys.stdin.read()\n"
                f"print({json.dumps(json.dumps(answer))})\n")
    os.chmod(path, 0o700)


def _env(base: str, reflector: str) -> dict[str, str]:
    """The daemon's and the hooks' environment: every path in the throw-away home, the
    scripted reflector the only backend (no API key: nothing can reach a model)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AUTOHARNESS_", "ANTHROPIC_", "CLAUDE_", "XDG_"))}
    env.update(AUTOHARNESS_HOME=os.path.join(base, "h"),
               AUTOHARNESS_CONFIG=os.path.join(base, "h", "config.toml"),
               AUTOHARNESS_SOCKET=os.path.join(base, "s"),
               CLAUDE_CONFIG_DIR=os.path.join(base, "claude"),
               AUTOHARNESS_AUTOSTART="0", AUTOHARNESS_REFLECT_EVERY="2",
               AUTOHARNESS_REFLECTOR_BACKEND="claude",
               AUTOHARNESS_REFLECTOR_CLAUDE_PATH=reflector)
    return env


def run(say: Callable[[str], None] = print) -> int:
    base = tempfile.mkdtemp(prefix="ah-demo-")  # short: the socket path must fit
    proc: subprocess.Popen | None = None
    try:
        say(f"{LABEL} a DEMONSTRATION in a throw-away home ({base}): nothing of yours is "
            "read or changed, and it is deleted at the end")
        reflector = os.path.join(base, "scripted-reflector")
        _reflector(reflector)
        env = _env(base, reflector)
        project = os.path.join(base, "project")
        os.makedirs(project)
        slug = paths.project_slug(project)
        tdir = os.path.join(env["CLAUDE_CONFIG_DIR"], "projects", slug)
        os.makedirs(tdir)
        proc = _start(env, base)
        sock = env["AUTOHARNESS_SOCKET"]
        say(f"{LABEL} started a daemon for it (pid {proc.pid}); its reflector is a script that "
            "stands in for a model and always proposes the same lesson")
        transcript = os.path.join(tdir, "demo-session.jsonl")
        _session(env, project, "demo-session", transcript)
        say(f"{LABEL} session 1: the integration tests fail, the user says: \"{LESSON}\"; "
            "the agent migrates and they pass (3 tool calls, then the turn ends)")
        landed = _wait_landed(sock)
        say(f"{LABEL} reflected: the window was cut and redacted, the reflector proposed "
            f"`{SKILL}`, the promoter checked its quote against the session and landed it:")
        skill_md = os.path.join(project, ".claude", "skills", SKILL, "SKILL.md")
        with open(skill_md, encoding="utf-8") as f:
            say("\n".join(f"    {line}" for line in f.read().rstrip("\n").splitlines()))
        say(f"{LABEL} intent {landed.id}: {landed.status}")
        context = _next_start(env, project, os.path.join(tdir, "demo-next.jsonl"))
        say(f"{LABEL} session 2 starts: Claude Code lists the skill to the model "
            f"(`- {SKILL}: {DESCRIPTION}`), and autoharness adds this context:")
        say("\n".join(f"    {line}" for line in (context or "(none)").splitlines()))
        say(f"{LABEL} that is the loop: a session, a lesson, a landing, the next session's "
            "context. For real: `autoharnessctl install`, a reflector (ANTHROPIC_API_KEY or "
            "Claude Code), then `autoharnessctl doctor`")
        return 0
    finally:
        if proc is not None:
            _stop(proc, env["AUTOHARNESS_SOCKET"])
        shutil.rmtree(base, ignore_errors=True)
        say(f"{LABEL} stopped its daemon and deleted {base}")


def _start(env: dict[str, str], base: str) -> subprocess.Popen:
    from .verbs.start import daemon_command

    log = open(os.path.join(base, "daemon.log"), "ab")
    with log:
        proc = subprocess.Popen(daemon_command(), env=env, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, start_new_session=True)
    end = time.monotonic() + WAIT_S
    while time.monotonic() < end:
        try:
            ask(m.Status(), r.Identity, timeout=2, sock_path=env["AUTOHARNESS_SOCKET"])
            return proc
        except (DaemonUnreachable, DaemonError):
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    _stop(proc, env["AUTOHARNESS_SOCKET"])
    with open(os.path.join(base, "daemon.log"), encoding="utf-8", errors="replace") as f:
        tail = f.read()[-500:]
    raise CtlError(f"the demonstration's daemon did not start: {tail.strip()}", verb="demo")


def _stop(proc: subprocess.Popen, sock: str) -> None:
    try:
        call(m.Stop(), timeout=5, sock_path=sock)
        proc.wait(timeout=30)
    except (DaemonUnreachable, DaemonError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()


def _hook(env: dict[str, str], payload: dict) -> str:
    exe = find_script("autoharness-hook")
    if exe is None:
        raise CtlError("cannot find the `autoharness-hook` script of this installation: "
                       "reinstall autoharness", verb="demo")
    out = subprocess.run([exe], input=json.dumps(payload).encode(), env=env,
                         capture_output=True, timeout=WAIT_S)
    return out.stdout.decode("utf-8", "replace")


def _session(env: dict[str, str], project: str, sid: str, transcript: str) -> None:
    """The recorded session, written as Claude Code writes it, with its hook events."""
    base = {"session_id": sid, "transcript_path": transcript, "cwd": project}
    records = _records(project, sid)
    with open(transcript, "w", encoding="utf-8") as f:
        f.write("".join(json.dumps(x) + "\n" for x in records))
    _hook(env, {**base, "hook_event_name": "SessionStart", "source": "startup"})
    for rec in records:
        content = rec["message"]["content"]
        if rec["type"] == "user" and isinstance(content, str):
            _hook(env, {**base, "hook_event_name": "UserPromptSubmit", "prompt": content})
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_use":
                _hook(env, {**base, "hook_event_name": "PreToolUse", "tool_name": "Bash",
                            "tool_input": block["input"], "tool_use_id": block["id"]})
    _hook(env, {**base, "hook_event_name": "Stop", "stop_hook_active": False,
                "last_assistant_message": "Migrated, then all 12 tests passed."})


def _wait_landed(sock: str) -> r.Intent:
    end = time.monotonic() + WAIT_S
    while time.monotonic() < end:
        intents = ask(m.Queue(op="list"), list[r.Intent], sock_path=sock)
        done = [i for i in intents if i.status != "queued"]
        if done:
            if done[0].status != "landed":
                raise CtlError(f"the demonstration's proposal was not landed: {done[0].status} "
                               f"{[f.message for f in done[0].findings]}", verb="demo")
            return done[0]
        time.sleep(0.2)
    raise CtlError(f"the demonstration's reflection did not finish within {WAIT_S:.0f}s",
                   verb="demo")


def _next_start(env: dict[str, str], project: str, transcript: str) -> str:
    open(transcript, "w").close()
    out = _hook(env, {"session_id": "demo-next", "transcript_path": transcript, "cwd": project,
                      "hook_event_name": "SessionStart", "source": "startup"})
    try:
        return json.loads(out)["hookSpecificOutput"]["additionalContext"]
    except (ValueError, KeyError, TypeError):
        return ""
