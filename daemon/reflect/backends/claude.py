"""The `claude` backend: a child `claude -p` session that answers with structured output.

The child is isolated from the user's work: hooks disabled (it must not count itself or trigger
reflection), no tools and no MCP servers, no saved transcript (the watcher must not see it), its
own 0700 working directory, `AUTOHARNESS_CHILD_SESSION=1` so the hook client knows it is ours,
and none of the parent session's identity variables. The packet goes on stdin, never on the
command line (argv is world-readable in the process table).

Blocking by design: the pool calls `reflect` from a worker thread. The child runs in its own
process group; on timeout, cancellation or daemon shutdown the whole group is killed (SIGTERM,
then SIGKILL) and reaped, so no zombie or orphan outlives a job.
"""

import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping

from ....protocol import paths, private
from ..prompt import Prompt
from .base import (
    PermanentError,
    ReflectResult,
    TransientError,
    add_usage,
    check_reply,
    empty_usage,
    feedback_of,
    find_claude,
)

# The parent's identity must not leak into the child: Claude Code would otherwise treat it as
# part of the user's session (and the hook client would count it).
DROP_ENV = ("CLAUDE_CODE_SESSION_ID", "CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT")
CHILD_MARK = "AUTOHARNESS_CHILD_SESSION"
SETTINGS = {"disableAllHooks": True}
EMPTY_MCP: dict[str, dict] = {"mcpServers": {}}
TERM_GRACE_S = 2.0  # between SIGTERM and SIGKILL
POLL_S = 0.25  # how often a waiting call checks its cancel event

# Reasons that retrying cannot fix (matched case-insensitively in the child's error text).
PERMANENT_HINTS = (
    "invalid api key", "/login", "not logged in", "authentication", "unauthorized",
    "forbidden", "unknown option", "error: option", "credit balance", "prompt is too long",
    "invalid model", "model not found",
)

_live: set[subprocess.Popen] = set()
_live_lock = threading.Lock()


def workdir() -> str:
    """The child's working directory under the state dir, created 0700 and checked."""
    d = paths.reflector_dir()
    os.makedirs(d, mode=0o700, exist_ok=True)
    bad = private.private_problem(d)
    if bad and bad.kind != "open":
        raise PermanentError(f"claude: the reflector working directory is not ours: {bad}")
    if bad:
        os.chmod(d, 0o700)  # ours, but open to others: the dir must not be shared
    return d


def child_env(env: Mapping[str, str] | None = None, cfg=None) -> dict[str, str]:
    """The child's environment: the daemon's, without the parent session's identity, marked
    as a child; the reflector's endpoint and key from the config (`reflector.base_url`,
    `reflector.api_key`) when set, which beat the environment's as in the SDK backend."""
    out = dict(os.environ if env is None else env)
    for k in DROP_ENV:
        out.pop(k, None)
    if cfg is not None and cfg.base_url:
        out["ANTHROPIC_BASE_URL"] = cfg.base_url
    if cfg is not None and cfg.api_key:
        out["ANTHROPIC_API_KEY"] = cfg.api_key
    out[CHILD_MARK] = "1"
    return out


def command(exe: str, prompt: Prompt, cfg, system_file: str) -> list[str]:
    return [
        exe, "-p",
        "--output-format", "json",
        "--json-schema", json.dumps(prompt.schema, separators=(",", ":")),
        "--settings", json.dumps(SETTINGS, separators=(",", ":")),
        "--no-session-persistence",
        "--tools", "",  # no built-in tools; the structured-output tool still exists
        "--strict-mcp-config", "--mcp-config", json.dumps(EMPTY_MCP, separators=(",", ":")),
        "--disable-slash-commands",
        "--model", cfg.model,
        "--system-prompt-file", system_file,
    ]


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_and_reap(proc: subprocess.Popen) -> None:
    """SIGTERM the group, give it a moment, SIGKILL what is left, and reap the leader."""
    pgid = proc.pid  # start_new_session: the child leads its own group
    _signal_group(pgid, signal.SIGTERM)
    try:
        proc.communicate(timeout=TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    _signal_group(pgid, signal.SIGKILL)
    try:
        proc.communicate(timeout=TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        # Something outside the group still holds our pipes; stop reading and just reap.
        for f in (proc.stdout, proc.stderr):
            if f:
                f.close()
        proc.wait()


def terminate_all() -> None:
    """Kill every running child's process group (daemon shutdown). Their callers then fail
    with TransientError and the jobs are retried after restart."""
    with _live_lock:
        procs = list(_live)
    for p in procs:
        _signal_group(p.pid, signal.SIGKILL)


def _run(argv, stdin: bytes, cwd, env, timeout_s: float, cancel) -> tuple[int, bytes, bytes]:
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        cwd=cwd, env=env, start_new_session=True, close_fds=True,
    )
    with _live_lock:
        _live.add(proc)
    try:
        deadline = time.monotonic() + timeout_s
        data: bytes | None = stdin
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                _kill_and_reap(proc)
                raise TransientError(
                    f"claude: timed out after {timeout_s:g}s; process group killed")
            if cancel is not None and cancel.is_set():
                _kill_and_reap(proc)
                raise TransientError("claude: cancelled; process group killed")
            try:
                out, err = proc.communicate(data, timeout=min(left, POLL_S) if cancel else left)
                break
            except subprocess.TimeoutExpired:
                data = None  # stdin was handed over on the first call
            except BaseException:
                _kill_and_reap(proc)
                raise
        # The leader is gone; anything it left running in its group is an orphan-to-be.
        _signal_group(proc.pid, signal.SIGKILL)
        return proc.returncode, out, err
    finally:
        with _live_lock:
            _live.discard(proc)


def _tail(b: bytes, n: int = 300) -> str:
    return " ".join(b.decode("utf-8", "replace").split())[-n:]


def _failure(text: str, default: str) -> Exception:
    low = text.lower()
    if any(h in low for h in PERMANENT_HINTS):
        return PermanentError(f"claude: {text[:300]}")
    return TransientError(f"claude: {default}")


def _result_object(stdout: bytes):
    try:
        obj = json.loads(stdout.decode("utf-8", "replace"))
    except ValueError:
        return None
    if isinstance(obj, list):  # stream-like output: the last `result` record counts
        results = [o for o in obj if isinstance(o, dict) and o.get("type") == "result"]
        obj = results[-1] if results else None
    return obj if isinstance(obj, dict) else None


def _usage(obj: dict) -> dict[str, int]:
    u = obj["usage"] if isinstance(obj.get("usage"), dict) else {}
    return {
        "input_tokens": int(u.get("input_tokens") or 0),
        "output_tokens": int(u.get("output_tokens") or 0),
        "cache_read": int(u.get("cache_read_input_tokens") or 0),
        "cache_creation": int(u.get("cache_creation_input_tokens") or 0),
    }


def _structured(obj: dict):
    """The schema-shaped answer: `structured_output`, else JSON in `result` (maybe fenced)."""
    so = obj.get("structured_output")
    if so is not None:
        return so
    text = obj.get("result")
    if not isinstance(text, str):
        return None
    t = text.strip()
    if t.startswith("```"):
        t = t.split("\n", 1)[1] if "\n" in t else ""
        t = t.rsplit("```", 1)[0]
    try:
        return json.loads(t)
    except ValueError:
        return None


def _model(obj: dict, default: str) -> str:
    mu = obj.get("modelUsage")
    if isinstance(mu, dict) and mu:
        return next(iter(mu))
    return default


def _interpret(rc: int, out: bytes, err: bytes):
    """(result object, problem) for a usable run; raises for failed runs."""
    obj = _result_object(out)
    if obj is None:
        if rc < 0:
            raise TransientError(f"claude: killed by signal {-rc}")
        if rc != 0:
            raise _failure(_tail(err) or _tail(out), f"exited with code {rc}: {_tail(err, 200)}")
        return None, "the output was not the JSON result object"
    subtype = str(obj.get("subtype") or "")
    if subtype.startswith("error_max"):  # turn/structured-output retries exhausted: repairable
        return obj, f"the session ended with {subtype}"
    if obj.get("is_error") or (subtype and subtype != "success"):
        text = str(obj.get("result") or subtype or "error")
        raise _failure(text, f"the session failed ({subtype or 'is_error'})")
    return obj, None


REPAIR = ("\n\nYour previous answer was unusable: {problem}. Answer again with a JSON object "
          "that matches the schema: {{\"proposals\": [...], \"feedback\": [...]}} "
          "(empty lists are fine).")


def reflect(prompt: Prompt, cfg, *, env: Mapping[str, str] | None = None,
            cancel: threading.Event | None = None) -> ReflectResult:
    """One reflection through a child `claude -p`, with at most one repair round.

    Raises TransientError (timeout, crash, signal, rate limit) or PermanentError (not
    installed, not logged in, unknown flag, unusable after the repair).
    """
    exe = find_claude(cfg, env)
    if exe is None:
        raise PermanentError(f"claude: `{cfg.claude_path}` not found on PATH")
    cwd = workdir()
    environ = child_env(env, cfg)
    usage = empty_usage()
    stdin_text = prompt.user_text
    problem: str | None = ""
    fd, system_file = tempfile.mkstemp(prefix="system-", suffix=".md", dir=cwd)  # 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(prompt.system_text)
        argv = command(exe, prompt, cfg, system_file)
        for attempt in range(2):
            rc, out, err = _run(argv, stdin_text.encode("utf-8"), cwd, environ,
                                float(cfg.timeout_s), cancel)
            obj, problem = _interpret(rc, out, err)
            if obj is not None:
                add_usage(usage, _usage(obj))
            if problem is None:
                so = _structured(obj)
                proposals, problem = check_reply(so)
                if problem is None:
                    return ReflectResult(proposals=proposals, feedback=feedback_of(so),
                                         usage=usage,
                                         model=_model(obj, cfg.model),
                                         raw_text=json.dumps(so, ensure_ascii=False))
            if attempt == 0:
                stdin_text = prompt.user_text + REPAIR.format(problem=problem)
    finally:
        try:
            os.unlink(system_file)
        except FileNotFoundError:
            pass
    e = PermanentError(f"claude: unusable reply after one repair attempt: {problem}")
    e.usage = usage
    raise e
