"""Stopping never waits forever: once a stop is requested the process is gone within
`STOP_DEADLINE_S`, even if a worker thread is stuck in a read that nothing can interrupt.

A clean stop cancels every task and waits for their threads; a thread blocked in a read (a
FIFO, a hung mount, a peer that never answers) would hold that wait, and with it the
single-instance lock, forever. The watchdog gives the clean path its chance, then removes the
daemon's own socket and exits. Everything acknowledged is already journaled, so a forced exit
loses nothing that was promised.
"""

import os
import sys
import threading
import time
from collections.abc import Callable

import structlog

log = structlog.get_logger("autoharness")

STOP_DEADLINE_S = 8.0  # under the 10 s a service manager (or a user) waits before SIGKILL


def exit_by_deadline(cleanup: Callable[[], None], deadline_s: float = STOP_DEADLINE_S) -> None:
    """Start the watchdog: if the process still runs `deadline_s` from now, run `cleanup`
    (best effort) and exit with status 1."""

    def watch() -> None:
        time.sleep(deadline_s)
        try:
            stuck = [t.name for t in threading.enumerate()
                     if t is not threading.current_thread() and t is not threading.main_thread()]
            log.error("stop did not finish in time: exiting now", deadline_s=deadline_s,
                      threads=len(stuck))
            cleanup()
            sys.stdout.flush()
        except BaseException:
            pass
        os._exit(1)

    threading.Thread(target=watch, name="stop-deadline", daemon=True).start()
