"""Which files may be read as transcripts, and the one way they are opened.

A transcript path comes from outside: a hook event, a session, a CLI argument, a file the
watcher found. It is read only through `open_transcript`, which holds these invariants:

- its real path lies inside an allowed root (`$CLAUDE_CONFIG_DIR/projects`, the replay copies,
  the configured `capture.transcript_roots`), else it is refused with the reason;
- every component beneath the root is opened relative to its parent's descriptor with
  `O_NOFOLLOW` (directories also `O_DIRECTORY`): a directory swapped for a symlink between the
  check and the open fails the open instead of leading outside, whatever the timing;
- the opened file is re-checked with `fstat`: a regular file (never a FIFO, which would wedge
  the reading thread, a socket or a device; the open is `O_NONBLOCK`), owned by this user,
  with exactly one link (a hard link under the root can name any file of ours outside it).

Directories are listed only through `list_transcripts`, by the same walk: a `../` in a path
from a hook never makes the daemon list, or log the names of, a directory outside the roots.
`open_regular` is for the few files that are not transcripts (a project's own config).
"""

import errno
import os
import stat
from collections.abc import Iterable, Sequence

from ...protocol import paths

SUFFIX = ".jsonl"
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC


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


def _beneath(path: str | os.PathLike, roots: Sequence[str] | None) -> tuple[str, str, list[str]]:
    """(real path, its root, the components below the root). `roots` None: the file's own
    directory is its root, so only the file itself is checked (a path the user named)."""
    path = os.fspath(path)
    if not path or "\0" in path:
        raise TranscriptRefused(path, "empty or invalid path")
    try:
        real = os.path.realpath(path)
    except OSError as e:  # a link swapped while it was resolved (readlink: EINVAL), a loop
        raise TranscriptRefused(path, f"its path changed while it was resolved ({e.strerror})"
                                ) from None
    if roots is None:
        return real, os.path.dirname(real), [os.path.basename(real)]
    for r in roots:
        if paths.within(real, r):
            rel = real[len(r.rstrip(os.sep)):].strip(os.sep)
            return real, r, rel.split(os.sep) if rel else []
    raise TranscriptRefused(path, f"{real} is outside the transcript roots "
                                  f"({', '.join(roots)}); add its directory to "
                                  "`capture.transcript_roots` to allow it")


def open_dir_beneath(base: str, names: Sequence[str], *, make: int | None = None) -> int:
    """A descriptor of `base`/`names`..., each directory opened beneath the one before with
    `O_NOFOLLOW | O_DIRECTORY` (the one such walk: transcripts and the skill tree take it), so
    a directory swapped for a link fails the open instead of leading elsewhere. With `make`, a
    missing directory is created with that mode (its parent fsynced). The caller closes it."""
    fd = os.open(base, _DIR_FLAGS)
    try:
        for name in names:
            if make is not None:
                try:
                    os.mkdir(name, make, dir_fd=fd)
                    os.fsync(fd)
                except FileExistsError:
                    pass
            nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def _walk(path: str, root: str, dirs: list[str]) -> int:
    try:
        return open_dir_beneath(root, dirs)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise TranscriptRefused(path, f"{e.filename!r} on the way is a link or not a "
                                          "directory (not followed)") from None
        raise


def _check(path: str, st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise TranscriptRefused(path, f"{_kind(st.st_mode)}, not a regular file")
    if st.st_uid != os.getuid():
        raise TranscriptRefused(path, f"owned by uid {st.st_uid}, not you ({os.getuid()})")
    if st.st_nlink != 1:
        raise TranscriptRefused(path, f"has {st.st_nlink} hard links (a hard link can bring "
                                      "in a file from outside the roots)")


def open_transcript(path: str | os.PathLike, roots: Sequence[str] | None) -> int:
    """The one way a transcript is opened: read-only, never blocking, every component beneath
    its root without following a link, and only a regular file of ours with one link (see the
    module's invariants). The caller closes the descriptor. Raises TranscriptRefused with the
    reason, FileNotFoundError when it is gone."""
    shown = os.fspath(path)
    real, root, parts = _beneath(path, roots)
    if not parts:
        raise TranscriptRefused(shown, "a directory, not a regular file")
    dfd = _walk(shown, root, parts[:-1])
    try:
        name = parts[-1]
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)  # names what it is, first
        if stat.S_ISLNK(st.st_mode):
            raise TranscriptRefused(shown, "a symlink (not followed)")
        if not stat.S_ISREG(st.st_mode):
            raise TranscriptRefused(shown, f"{_kind(st.st_mode)}, not a regular file")
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=dfd)
        except OSError as e:  # swapped since the stat
            if e.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
                raise TranscriptRefused(shown, "changed while it was opened") from None
            raise
    finally:
        os.close(dfd)
    try:
        _check(shown, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    return fd


def stat_transcript(path: str | os.PathLike, roots: Sequence[str] | None) -> os.stat_result:
    """`fstat` of the transcript as `open_transcript` opens it."""
    fd = open_transcript(path, roots)
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)


def resolve(path: str | os.PathLike, roots: Sequence[str]) -> str:
    """The real path of `path` if `open_transcript` would open it under `roots` (real paths,
    see `transcript_roots`); raise TranscriptRefused otherwise. Reads no byte of it."""
    stat_transcript(path, roots)
    return os.path.realpath(path)


def list_transcripts(directory: str | os.PathLike, roots: Sequence[str]) -> list[str]:
    """The `*.jsonl` files directly in `directory` (named below it as given), listed
    through a descriptor reached by the same walk: a directory outside the roots, or reached
    through a link, raises TranscriptRefused before anything in it is listed."""
    shown = os.fspath(directory)
    real, root, parts = _beneath(directory, roots)
    fd = _walk(shown, root, parts)
    try:
        names = os.listdir(fd)
    finally:
        os.close(fd)
    return [os.path.join(shown, n) for n in sorted(names) if n.endswith(SUFFIX)]


def walk_transcripts(directory: str | os.PathLike, roots: Sequence[str]) -> list[str]:
    """Every `*.jsonl` under `directory` (named below it as given), recursively, by `os.fwalk`
    from a descriptor reached by the same walk (fwalk opens each subdirectory beneath its
    parent and follows no link): nothing outside the roots is listed. A directory that is
    not under them lists nothing."""
    shown = os.fspath(directory)
    try:
        real, root, parts = _beneath(directory, roots)
    except TranscriptRefused:
        return []
    top = parts[-1] if parts else real
    try:
        fd = _walk(shown, root, parts[:-1]) if parts else None
    except OSError:
        return []
    found = []
    try:
        for here, _dirs, files, _fd in os.fwalk(top, dir_fd=fd):
            base = shown + here[len(top):]  # named as the caller named the directory
            found += [os.path.join(base, f) for f in files if f.endswith(SUFFIX)]
    finally:
        if fd is not None:
            os.close(fd)
    return found


def open_regular(path: str | os.PathLike) -> int:
    """Open a file that is not a transcript (a project's config, a git pointer) read-only,
    without following a final symlink and without blocking; the descriptor is returned only
    if it is a regular file (the caller closes it). Transcripts go through `open_transcript`."""
    try:
        fd = os.open(path, _FILE_FLAGS)
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
