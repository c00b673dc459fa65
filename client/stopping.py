"""Stopping the daemon, and knowing when it is gone.

A daemon asked to stop closes its socket first, then persists its state, then releases the
single-instance lock as its process exits. So "gone" is the lock released, not the socket
gone quiet: a new daemon started in between finds the lock held and refuses to run, and under
socket activation systemd keeps the socket and may answer on it at once.
"""

from __future__ import annotations

import fcntl
import os
import time

from ..protocol import messages as m
from ..protocol import paths
from ..protocol import replies as r
from .conn import DaemonNotRunning, ask

# a daemon exits within its own stop deadline (8 s) however it is stuck; past this it is frozen
STOP_WAIT_S = 15.0


def stop_daemon(timeout: float | None = None) -> r.Stopping | None:
    """Ask the daemon to stop; None when none listens (nothing to stop is no error). Returns
    once it has agreed: `wait_gone` waits for its exit."""
    try:
        return ask(m.Stop(), r.Stopping, timeout=timeout)
    except DaemonNotRunning:
        return None


def daemon_gone(pid: int) -> bool:
    """True once daemon `pid` no longer holds the single-instance lock (released when its
    process exits). A lock held by another pid means it is gone too: the lock is exclusive,
    and under socket activation the next hook event may already have started a new daemon."""
    try:
        fd = os.open(paths.lock_file(), os.O_RDONLY)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
        return holder not in ("", str(pid))  # empty: a new holder has yet to write its pid
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    finally:
        os.close(fd)


def wait_gone(pid: int, timeout: float = STOP_WAIT_S) -> bool:
    """Wait, at most `timeout` seconds, until daemon `pid` is gone; False if it still runs."""
    end = time.monotonic() + timeout
    while not daemon_gone(pid):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True
