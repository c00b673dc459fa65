"""What a test run leaves behind: processes started under its temp dirs, and the dirs.

A process belongs to the run when its environment, working directory or command line names
one of the run's temp dirs (a daemon autostarted by a hook carries the test's AUTOHARNESS_HOME,
a Claude Code CLI its CLAUDE_CONFIG_DIR). Read from /proc (Linux); elsewhere nothing is found.
"""

import os
import re
import signal
import time


def _ancestors() -> set[int]:
    out, pid = set(), os.getpid()
    while pid > 1:
        out.add(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                pid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def _root_pattern(roots: list[str]) -> re.Pattern[bytes]:
    """Any of `roots` as a whole path: /tmp/pytest-5 must not match inside /tmp/pytest-52."""
    alts = b"|".join(re.escape(os.fsencode(r.rstrip("/"))) for r in roots)
    return re.compile(b"(?:" + alts + rb")(?![A-Za-z0-9_.-])")


def processes_under(roots: list[str]) -> list[tuple[int, str]]:
    """(pid, command line) of live processes of this user that name one of `roots`."""
    if not roots or not os.path.isdir("/proc"):
        return []
    names_a_root = _root_pattern(roots).search
    skip = _ancestors()
    uid = os.getuid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in skip:
            continue
        pid = int(name)
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue  # exited, only not reaped yet
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
            try:
                cwd = os.fsencode(os.readlink(f"/proc/{pid}/cwd"))
            except OSError:
                cwd = b""
        except (OSError, IndexError):
            continue  # gone meanwhile, or not ours to read
        if names_a_root(env + b"\0" + cmd + b"\0" + cwd):
            found.append((pid, cmd.replace(b"\0", b" ").decode("utf-8", "replace").strip()))
    return found


def wait_gone(roots: list[str], timeout: float) -> list[tuple[int, str]]:
    """Give processes still stopping (a daemon saving its state) up to `timeout` seconds;
    return those still there."""
    end = time.monotonic() + timeout
    while True:
        left = processes_under(roots)
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.1)


def kill(found: list[tuple[int, str]]) -> None:
    for pid, _ in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def end_processes_under(roots: list[str], timeout: float = 10.0) -> list[tuple[int, str]]:
    """Stop what still runs under `roots`: SIGTERM, a bounded wait, then SIGKILL. Returns what
    was running when it was asked to stop."""
    found = processes_under(roots)
    for pid, _ in found:
        try:
            os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    kill(wait_gone(roots, timeout))
    return found
