"""The claude backend against a fake `claude` on PATH; backend choice for `auto`."""

import os
import signal
import stat
import threading
import time

import pytest

from claude_autoharness.daemon.reflect.backends import (
    PermanentError,
    TransientError,
    available,
    choose_backend,
)
from claude_autoharness.daemon.reflect.backends import claude as backend
from claude_autoharness.daemon.reflect.prompt import build_request
from claude_autoharness.protocol import paths
from claude_autoharness.protocol.config import ReflectorConfig
from fake_claude import install, result

WINDOW = '{"type":"user","message":{"content":"WINDOW-MARKER-7f3 always squash merges"}}\n'
PROPOSAL = {"action": "archive", "skill": "old-habit", "layer": "user", "reason": "r",
            "evidence": "always squash merges", "description": None, "body": None, "old": None,
            "new": None, "path": None, "content": None}
PARENT = {"CLAUDE_CODE_SESSION_ID": "parent-session", "CLAUDECODE": "1",
          "CLAUDE_CODE_ENTRYPOINT": "cli"}


def prompt():
    return build_request(WINDOW, "digest", [], guidance=None, max_intents=3)


def fake(home, scenarios):
    return install(home["tmp"] / "bin", home["tmp"] / "fake-state", scenarios)


def env_for(f, **extra):
    env = f.path_env()
    env.update(PARENT)  # as if the daemon had been started from inside a Claude Code session
    env.update(extra)
    return env


def cfg(**over):
    args = dict(backend="claude", timeout_s=60.0)  # generous: only the hang tests wait it out
    args.update(over)
    return ReflectorConfig(**args)


def group_alive(pgid: int) -> list[int]:
    """Pids in process group `pgid` that are still running (zombies count as gone)."""
    alive = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state not in ("Z", "X"):
            alive.append(int(d))
    return alive


def running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def wait_until(cond, timeout=60.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def test_child_is_isolated_and_answers(home):
    """The child runs with print mode, JSON output, the schema, hooks disabled, no session
    persistence, no tools; AUTOHARNESS_CHILD_SESSION=1 and none of the parent's session
    variables; its own process group; a 0700 working dir under the state dir; the packet on
    stdin (never argv) and the static prefix as its system prompt file, removed afterwards."""
    f = fake(home, [{"result": result({"proposals": [PROPOSAL]})}])
    p = prompt()
    r = backend.reflect(p, cfg(), env=env_for(f))
    [seen] = f.seen()
    assert seen["problems"] == []
    assert seen["env"]["AUTOHARNESS_CHILD_SESSION"] == "1"
    assert all(seen["env"][k] is None for k in PARENT)
    assert seen["pgid"] == seen["pid"] == seen["sid"]  # own session and process group
    workdir = backend.workdir()
    assert seen["cwd"] == workdir and workdir.startswith(paths.state_dir())
    assert stat.S_IMODE(os.stat(workdir).st_mode) == 0o700
    assert seen["stdin"] == p.user_text
    assert not any("WINDOW-MARKER-7f3" in a for a in seen["argv"])
    assert seen["system"] == p.system_text
    assert not [n for n in os.listdir(workdir) if n.startswith("system-")]
    assert seen["argv"][seen["argv"].index("--model") + 1] == "claude-haiku-4-5"
    assert r.proposals == [PROPOSAL]
    assert r.usage == {"input_tokens": 10, "output_tokens": 50, "cache_creation": 300,
                       "cache_read": 2000}
    assert r.model == "claude-haiku-4-5"


@pytest.mark.parametrize("ignore_term", [False, True])
def test_hang_is_killed_at_timeout_with_no_orphan(home, ignore_term):
    """A child that hangs (with a grandchild in its group) is killed when the timeout passes —
    SIGTERM, then SIGKILL if it ignores that — and nothing of its process group keeps running."""
    f = fake(home, [{"hang": True, "ignore_term": ignore_term}])
    t0 = time.monotonic()
    with pytest.raises(TransientError, match="timed out"):
        backend.reflect(prompt(), cfg(timeout_s=1.0), env=env_for(f))
    elapsed = time.monotonic() - t0
    # the child and its grandchild would sleep 600 s: only the kill ends them this soon (the
    # bound is generous, so a loaded machine's slow start is no failure)
    assert 1.0 <= elapsed < 1.0 + 2 * backend.TERM_GRACE_S + 60
    [seen] = f.seen()
    assert wait_until(lambda: not group_alive(seen["pgid"]))
    assert not running(seen["pid"]) and not running(seen["grandchild"])
    with pytest.raises(ChildProcessError):
        os.waitpid(seen["pid"], os.WNOHANG)  # already reaped: no zombie of ours


def test_crash_is_transient(home):
    """A child that exits non-zero without a result, or dies of a signal, is a TransientError."""
    f = fake(home, [{"stderr": "Segmentation fault\n", "rc": 139}, {"signal": signal.SIGSEGV}])
    with pytest.raises(TransientError, match="code 139"):
        backend.reflect(prompt(), cfg(), env=env_for(f))
    with pytest.raises(TransientError, match="signal"):
        backend.reflect(prompt(), cfg(), env=env_for(f))


def test_session_error_is_transient_but_auth_is_permanent(home):
    """An `is_error` result is transient (overload, API hiccup) unless it says the login or key
    is bad, which retrying cannot fix; an unknown flag (old Claude Code) is permanent too."""
    f = fake(home, [
        {"result": result(None, result_text="API Error: 529 overloaded", is_error=True,
                          subtype="error_during_execution")},
        {"result": result(None, result_text="Invalid API key · Please run /login", is_error=True)},
        {"stderr": "error: unknown option '--no-session-persistence'\n", "rc": 1},
    ])
    with pytest.raises(TransientError):
        backend.reflect(prompt(), cfg(), env=env_for(f))
    with pytest.raises(PermanentError, match="login"):
        backend.reflect(prompt(), cfg(), env=env_for(f))
    with pytest.raises(PermanentError, match="unknown option"):
        backend.reflect(prompt(), cfg(), env=env_for(f))


def test_result_text_json_is_accepted(home):
    """Without `structured_output`, JSON in `result` (even fenced) is used."""
    f = fake(home, [{"result": result(None, result_text='```json\n{"proposals": []}\n```')}])
    assert backend.reflect(prompt(), cfg(), env=env_for(f)).proposals == []


def test_unusable_reply_gets_one_repair_then_permanent(home):
    """An unusable answer is retried once with the problem appended to the packet; a second
    unusable answer is a PermanentError, with exactly two runs."""
    f = fake(home, [{"result": result(None, result_text="Nothing to add.")},
                    {"result": result({"changes": []})}])
    with pytest.raises(PermanentError, match="after one repair"):
        backend.reflect(prompt(), cfg(), env=env_for(f))
    first, second = f.seen()
    assert second["stdin"].startswith(first["stdin"]) and "unusable" in second["stdin"]
    assert f.runs() == 2


def test_repair_success(home):
    """A repaired answer is used."""
    f = fake(home, [{"result": result({"proposals": "x"})},
                    {"result": result({"proposals": [PROPOSAL]})}])
    assert backend.reflect(prompt(), cfg(), env=env_for(f)).proposals == [PROPOSAL]


def test_cancel_kills_the_child(home):
    """Setting the cancel event (daemon shutdown) kills the child's group promptly."""
    f = fake(home, [{"hang": True}])
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    t0 = time.monotonic()
    with pytest.raises(TransientError, match="cancelled"):
        backend.reflect(prompt(), cfg(timeout_s=30), env=env_for(f), cancel=cancel)
    assert time.monotonic() - t0 < 25  # well before the 30 s timeout: the cancel ended it
    [seen] = f.seen()
    assert wait_until(lambda: not group_alive(seen["pgid"]))


def test_terminate_all_kills_running_children(home):
    """terminate_all() (daemon shutdown) kills every live child; the waiting call fails
    transiently so the job is retried later."""
    f = fake(home, [{"hang": True}])
    errors = []

    def run():
        try:
            backend.reflect(prompt(), cfg(timeout_s=30), env=env_for(f))
        except Exception as e:
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    assert wait_until(lambda: f.seen())
    backend.terminate_all()
    t.join(10)
    assert not t.is_alive() and isinstance(errors[0], TransientError)
    assert wait_until(lambda: not group_alive(f.seen()[0]["pgid"]))


def test_missing_claude_is_permanent(home):
    """Without `claude` on PATH the backend refuses permanently (auto would not pick it)."""
    with pytest.raises(PermanentError, match="not found"):
        backend.reflect(prompt(), cfg(claude_path="claude-does-not-exist"), env={"PATH": "/nonexistent"})


def test_auto_backend_choice(home):
    """auto: anthropic when a key is configured, else claude when on PATH, else none with a
    reason; an explicit backend that cannot work is none too (jobs wait, nothing is lost)."""
    f = fake(home, [{"result": result({"proposals": []})}])
    with_claude = f.path_env({"PATH": "/nonexistent"})
    bare = {"PATH": "/nonexistent"}
    auto = ReflectorConfig()
    assert choose_backend(auto, {**with_claude, "ANTHROPIC_API_KEY": "k"}) == "anthropic"
    assert choose_backend(ReflectorConfig(api_key="k"), bare) == "anthropic"
    assert choose_backend(auto, with_claude) == "claude"
    assert choose_backend(auto, bare) == "none"
    assert choose_backend(ReflectorConfig(backend="anthropic"), with_claude) == "none"
    assert choose_backend(ReflectorConfig(backend="claude"), {**bare, "ANTHROPIC_API_KEY": "k"}) == "none"
    keyed = {**with_claude, "ANTHROPIC_API_KEY": "k"}
    assert choose_backend(ReflectorConfig(backend="none"), keyed) == "none"
    info = available(auto, bare)
    assert info["backend"] == "none" and info["reason"].startswith("no reflector backend")
    info = available(ReflectorConfig(api_key="sk-secret-value",
                                     base_url="https://u:pw@gw.example.com/v1"), with_claude)
    assert info["backend"] == "anthropic" and info["anthropic"]["api_key"] is True
    assert info["claude"]["path"] == str(f.exe)
    assert "sk-secret-value" not in repr(info) and "pw@" not in repr(info)


def test_feedback_is_read_from_the_structured_output(home):
    """The `claude -p` backend returns the reply's `feedback` verdicts beside the proposals
    (absent: none, and the proposals still count)."""
    fb = [{"skill": "run-tests", "layer": "project", "verdict": "helped", "evidence": "ok"}]
    f = fake(home, [{"result": result({"proposals": [PROPOSAL], "feedback": fb})},
                    {"result": result({"proposals": []})}])
    r = backend.reflect(prompt(), cfg(), env=env_for(f))
    assert r.proposals == [PROPOSAL] and r.feedback == fb
    assert backend.reflect(prompt(), cfg(), env=env_for(f)).feedback == []
