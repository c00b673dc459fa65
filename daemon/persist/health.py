"""Whether the state dir takes the daemon's writes, said where a user looks.

A snapshot or journal write that fails (a read-only or full disk, a directory where a file
belongs, lost permissions) is retried by the loops that make it; until one succeeds the
failure is in `status --json` as `persistence.failing` (reason, since), in the log once per
episode, and a failed `doctor` check. `describe` turns such an error into one line naming the
file and the fix, for those and for start-up errors.
"""

import errno
import os
import time
from collections.abc import Callable

import structlog

from ...protocol import replies as r

log = structlog.get_logger("autoharness")


def describe(e: BaseException) -> str:
    """One line: what failed, on which file, and what to do about it."""
    if not isinstance(e, OSError):
        return f"{type(e).__name__}: {e}"
    target = e.filename2 or e.filename  # a rename names its destination second
    where = str(target) if target else "the state dir"
    d = os.path.dirname(where) if target else "the state dir"
    if isinstance(e, IsADirectoryError):
        return f"{where} is a directory where the daemon keeps a file: move it away"
    if e.errno == errno.EROFS:
        return f"{d} is on a read-only file system: remount it writable or set AUTOHARNESS_HOME"
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"no space left for {where}: free space on that file system"
    if e.errno in (errno.EACCES, errno.EPERM):
        return f"{where}: permission denied: make {d} yours and writable (chmod 700)"
    return f"{where}: {e.strerror or e}"


class PersistenceHealth:
    """The current failure episode: `since` the first failed write, `reason` the latest one."""

    def __init__(self, clock: Callable[[], float] = time.time):
        self.clock = clock
        self.since: float | None = None
        self.reason = ""

    def failed(self, e: BaseException) -> None:
        reason = describe(e)
        if self.since is None or reason != self.reason:
            log.error("persistence failing", reason=reason)
        if self.since is None:
            self.since = self.clock()
        self.reason = reason

    def ok(self) -> None:
        if self.since is not None:
            log.info("persistence recovered", failing_for_s=round(self.clock() - self.since, 1))
        self.since, self.reason = None, ""

    def failing(self) -> r.Failing | None:
        """Why and since when while failing, else None."""
        return None if self.since is None else r.Failing(reason=self.reason, since=self.since)
