"""Which files may be read as transcripts, and the one way they are opened.

A transcript path comes from outside: a hook event, a session, a CLI argument, a file the
watcher found. It is used only when its real path is a regular file inside an allowed root
(`$CLAUDE_CONFIG_DIR/projects` plus the configured `capture.transcript_roots`); anything else
(a symlink leaving the roots, a FIFO, a socket, a device, a directory) is refused with a reason
before a byte is read. Every transcript read opens its file with `open_regular`: no final symlink
is followed and the open never blocks (`O_NOFOLLOW | O_NONBLOCK`), then `fstat` must say regular
file. A FIFO would otherwise wedge the reading thread forever, and a file swapped for a symlink
between the check and the open fails the open instead of being read.
"""

import errno
import os
import stat
from collections.abc import Iterable

from claude_autoharness.protocol import paths

_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
               | getattr(os, "O_CLOEXEC", 0))


class TranscriptRefused(OSError):
    """The path is not a transcript this process may read; `reason` says why."""

    def __init__(self, path: str, reason: str):
        super().__init__(errno.EACCES, f"refused: {reason}", path)
        self.path = path
        self.reason = reason


def transcript_roots(extra: Iterable[str] = ()) -> list[str]:
    """The allowed roots, as real paths: the Claude Code projects dir first, then the private
    copies `autoharnessctl replay` makes of the transcripts it was named, then `extra`."""
    roots = [paths.claude_projects_dir(), paths.replays_dir(),
             *(os.path.expanduser(r) for r in extra if r)]
    return list(dict.fromkeys(os.path.realpath(r) for r in roots))


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name
    return "not a regular file"


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def resolve(path: str | os.PathLike, roots: Iterable[str]) -> str:
    """The real path of `path` if it is a regular file inside one of `roots` (real paths, see
    `transcript_roots`); raise TranscriptRefused otherwise. Never opens the file."""
    path = os.fspath(path)
    if not path or "\0" in path:
        raise TranscriptRefused(path, "empty or invalid path")
    real = os.path.realpath(path)
    if not any(_within(real, r) for r in roots):
        raise TranscriptRefused(path, f"{real} is outside the transcript roots "
                                      f"({', '.join(roots)}); add its directory to "
                                      "`capture.transcript_roots` to allow it")
    try:
        st = os.lstat(real)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise TranscriptRefused(path, f"cannot stat: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise TranscriptRefused(path, f"{_kind(st.st_mode)}, not a regular file")
    return real


def open_regular(path: str | os.PathLike) -> int:
    """Open `path` read-only without following a final symlink and without blocking; the
    descriptor is returned only if it is a regular file (the caller closes it)."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise TranscriptRefused(os.fspath(path), "a symlink (not followed)") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise TranscriptRefused(os.fspath(path), f"{_kind(mode)}, not a regular file")
    return fd
