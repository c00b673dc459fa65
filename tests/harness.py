"""Real processes for end-to-end tests: the installed daemon, hook client and CLI."""

import errno
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
HOOK = str(BIN / "autoharness-hook")
DAEMON = str(BIN / "autoharnessd")
CTL = str(BIN / "autoharnessctl")


def sock_path(home: Path) -> str:
    return os.environ.get("AUTOHARNESS_SOCKET") or str(home / "run" / "autoharness.sock")


def wait_for(pred, timeout: float = 90.0, what: str = "condition"):
    """Poll `pred` until it returns a truthy value (processes are real; they take a moment).
    The bound is generous: a passing test returns as soon as the condition holds, and a loaded
    machine (CI on two shared cores) must not turn a slow start into a failure."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def connectable(path: str) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


class Daemon:
    """`autoharnessd` as a subprocess; started in __init__, waited for until it listens."""

    def __init__(self, home: Path, env: dict | None = None, wait: bool = True,
                 limit_fds: int | tuple[int, int] | None = None,
                 limit_file_bytes: int | None = None, argv: list[str] | None = None):
        self.home = home
        self.env = dict(os.environ, **(env or {}))
        self.log = open(home / "daemon-test.log", "ab")
        # `ulimit -n N` for the daemon alone: N soft and hard (so it cannot raise it back), or
        # a (soft, hard) pair
        # a full disk for the daemon alone: `ulimit -f`, a write past it fails with EFBIG
        # (Python ignores SIGXFSZ), as a full disk fails one with ENOSPC, even for root
        # (the hard limit stays open: a test gives the space back with `resource.prlimit`)
        pair = (limit_fds, limit_fds) if isinstance(limit_fds, int) else limit_fds
        limits = ([(resource.RLIMIT_NOFILE, pair)] if pair is not None else []) + (
            [(resource.RLIMIT_FSIZE, (limit_file_bytes, resource.RLIM_INFINITY))]
            if limit_file_bytes is not None else [])

        def limit():
            for which, value in limits:
                resource.setrlimit(which, value)

        self.proc = subprocess.Popen(argv or [DAEMON], env=self.env, stdout=self.log,
                                     stderr=self.log, preexec_fn=limit if limits else None)
        self.sock = self.env.get("AUTOHARNESS_SOCKET") or str(home / "run" / "autoharness.sock")
        if wait:
            self.wait_ready()

    def wait_ready(self):
        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited {self.proc.returncode}: {self.output()}")
            return connectable(self.sock) and self.status_or_none()
        wait_for(ready, what="daemon readiness")

    def output(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return (self.home / "daemon-test.log").read_text(errors="replace")

    def status_or_none(self):
        r = ctl("status", "--json", env=self.env)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def status(self) -> dict:
        r = ctl("status", "--json", env=self.env)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def stop(self, sig=signal.SIGTERM, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.log.close()


def hook(payload, env: dict | None = None, timeout: float = 20.0) -> subprocess.CompletedProcess:
    """Run the real hook client with `payload` (dict → JSON, or raw bytes) on stdin."""
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return subprocess.run([HOOK], input=data, capture_output=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))


def ctl(*args, env: dict | None = None, input: bytes | None = None,
        timeout: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run([CTL, *args], capture_output=True, text=input is None, input=input,
                          timeout=timeout, env=env if env is not None else dict(os.environ))


def event(name: str, sid: str = "sess-1", **fields) -> dict:
    ev = {"session_id": sid, "hook_event_name": name, "cwd": "/tmp/project",
          "transcript_path": f"/tmp/project/{sid}.jsonl"}
    ev.update(fields)
    return ev


def pre_tool(sid: str = "sess-1", tool: str = "Bash", **fields) -> dict:
    return event("PreToolUse", sid, tool_name=tool, tool_input={"command": "ls"}, **fields)


def send_raw(path: str, data: bytes, read: bool = True, timeout: float = 5.0) -> bytes:
    """Send raw bytes on a fresh connection and return whatever comes back."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    try:
        s.sendall(data)
        if not read:
            return b""
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not chunk:
                break
            out += chunk
        return out
    finally:
        s.close()


def frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


def fill_disk_midway(monkeypatch, append, *, cut_back: bool) -> None:
    """Run `append` (one durable append) while the disk fills up: half of what it writes
    lands, then ENOSPC; unless `cut_back`, cutting the half off fails too. It must raise."""
    import pytest

    real_write, real_truncate = os.write, os.ftruncate

    def half_then_full(fd, data):
        monkeypatch.setattr(os, "write", full)
        return real_write(fd, bytes(data[: len(data) // 2]))

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)
    if not cut_back:
        monkeypatch.setattr(os, "ftruncate", full)
    try:
        with pytest.raises(OSError):
            append()
    finally:
        monkeypatch.setattr(os, "write", real_write)
        monkeypatch.setattr(os, "ftruncate", real_truncate)


def open_fifo_writer_when_read(fifo) -> int:
    """Wait until a reader has the FIFO open (a non-blocking writer open succeeds only then);
    keep the writer open and silent so the reader sits in read()."""
    def attempt():
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno == errno.ENXIO:
                return None
            raise
    return wait_for(attempt, timeout=90, what="the worker to start reading the FIFO")
