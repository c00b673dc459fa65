"""Shared bench helpers: a temp home, a daemon subprocess, percentiles."""

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def temp_home() -> tuple[Path, dict]:
    d = Path(tempfile.mkdtemp(prefix="ahb-", dir="/tmp"))
    (d / "claude" / "projects").mkdir(parents=True)
    (d / "h").mkdir(mode=0o700)
    env = dict(os.environ, AUTOHARNESS_HOME=str(d / "h"), CLAUDE_CONFIG_DIR=str(d / "claude"),
               # the largest reflect_every the config allows: these benches never reflect
               AUTOHARNESS_AUTOSTART="0", AUTOHARNESS_REFLECT_EVERY="1000000")
    env.pop("AUTOHARNESS_SOCKET", None)
    return d, env


def start_daemon(env: dict) -> tuple[subprocess.Popen, str]:
    sock = os.path.join(env["AUTOHARNESS_HOME"], "run", "autoharness.sock")
    p = subprocess.Popen([str(BIN / "autoharnessd")], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    end = time.monotonic() + 20
    while time.monotonic() < end:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(sock)
            return p, sock
        except OSError:
            time.sleep(0.05)
        finally:
            s.close()
    p.kill()
    raise SystemExit("daemon did not start")


def stop(p: subprocess.Popen | None, d: Path) -> None:
    if p is not None:
        p.terminate()
        p.wait(20)
    shutil.rmtree(d, ignore_errors=True)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def summary(xs: list[float]) -> str:
    return (f"median {statistics.median(xs) * 1e3:.2f} ms, p95 {pct(xs, 0.95) * 1e3:.2f} ms, "
            f"spread (p5–p95) {pct(xs, 0.05) * 1e3:.2f}–{pct(xs, 0.95) * 1e3:.2f} ms, n={len(xs)}")


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        c = s.recv(n - len(buf))
        if not c:
            raise ConnectionError("closed")
        buf += c
    return buf


def timed(cmd: list[str], env: dict, data: bytes) -> float:
    """Wall time of one run of `cmd` with `data` on stdin (its output discarded)."""
    t = time.perf_counter()
    subprocess.run(cmd, input=data, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t
