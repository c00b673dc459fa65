"""The state dir is ours: created 0700, refused when open to others, and pinned at start so
no write goes into a directory swapped since (for another user's, or for a link)."""

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

from ...protocol import paths
from ...protocol.private import private_problem
from .files import write_atomic


def ensure_private_dir(path: str) -> None:
    """Create `path` (and parents) 0700; refuse one that is not ours or is open to others."""
    paths.make_private_dirs(path)
    check_private_dir(path)


class UnsafeDir(Exception):
    pass


def check_private_dir(path: str) -> None:
    """Raise UnsafeDir, with the exact fix, unless `path` is our own 0700 directory."""
    problem = private_problem(path, fixes={"not_dir": "remove it and restart"})
    if problem is not None:
        raise UnsafeDir(str(problem))


class StateDirMoved(OSError):
    """The state directory is no longer the one the daemon started with: not written."""


_pinned: dict[str, tuple[int, int]] = {}  # directory -> (st_dev, st_ino) when it was checked


def pin_dir(path: str) -> None:
    """Remember `path` (checked private at start): `recheck_dir` compares against it."""
    st = os.lstat(path)
    _pinned[os.path.abspath(path)] = (st.st_dev, st.st_ino)


def recheck_dir(path: str) -> None:
    """Before state is written into a pinned directory (or one inside it): raise
    StateDirMoved (an OSError, so persistence reports and retries it) unless the pinned one is
    still that same private directory of ours. A directory swapped for another user's, or for
    a link, is never written into."""
    d = os.path.abspath(path)
    while d not in _pinned:
        up = os.path.dirname(d)
        if up == d:
            return  # not in a pinned directory (an offline command, a test)
        d = up
    want = _pinned[d]
    try:
        st = os.lstat(d)
        problem = private_problem(d)
    except OSError:
        st, problem = None, None
    if st is None or (st.st_dev, st.st_ino) != want or problem is not None:
        why = str(problem) if problem else "it was moved or replaced since the daemon started"
        raise StateDirMoved(0, f"not writing into {d}: {why}; stop the daemon, find out who "
                               "changed it, and start again")


def write_private(path: str, data: bytes, *, previous: str | None = None) -> None:
    """Atomically replace a state file (0600), the replaced one kept as `previous` if named;
    never into a state dir swapped since start."""
    recheck_dir(os.path.dirname(path))
    write_atomic(path, data, 0o600, previous=previous)


@contextmanager
def flocked(path: str, *, busy: Exception | None = None) -> Iterator[None]:
    """Hold an exclusive flock on `path` (created 0600, its dirs 0700) for the block: one
    writer across processes (the daemon, an offline CLI). Given `busy`, never waits: raises
    it when another holds the lock."""
    paths.make_private_dirs(os.path.dirname(path))
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (fcntl.LOCK_NB if busy else 0))
        except BlockingIOError:
            if busy is None:
                raise
            raise busy from None
        yield
    finally:
        os.close(fd)
