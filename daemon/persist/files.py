"""Durable file writes, in one place: a crash leaves the old file or the new one, never half;
an append is whole or absent, and a partial line never swallows the next one."""

import os
import stat
import tempfile


def fsync_dir(path: str) -> None:
    """Make a directory's entries (a new or renamed file) survive a crash."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_atomic(path: str, data: bytes, mode: int = 0o600, *, previous: str | None = None) -> None:
    """Replace `path` with `data`: temp file in the same directory, fsync, rename, fsync dir.
    With `previous`, the file being replaced (if it is a regular file) is kept under that name:
    a crash between the two renames leaves `previous`, never nothing."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        write_all(fd, data)
        os.fchmod(fd, mode)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        if previous is not None and _is_regular(path):
            os.replace(path, previous)
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(d)


def _is_regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


class AppendFile:
    """An append-only file of lines (0600) in which every append is whole or absent.

    Invariant: a write cut short (a full disk: ENOSPC, or EFBIG past a file size limit) is cut
    back to where the append began; if even that fails, the file is marked torn and the next
    append starts with a newline, so the partial line stays a line of its own (a reader skips
    it) and never swallows the next record. A file found ending mid-line at `open` is torn too.
    `size` counts every byte in the file, a partial line included. Not thread-safe: callers
    serialise appends.

    With `unit`, a file of fixed-size binary records instead: a partial record at the end (a
    crash mid-append, a failed cut back) is cut off before the next append, which it would
    otherwise misalign; losing it loses only that record.
    """

    def __init__(self, path: str, *, unit: int = 0):
        self.path = path
        self.unit = unit
        self.fd: int | None = None
        self.size = 0
        self.torn = False

    def open(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
                     | os.O_NOFOLLOW, 0o600)
        try:
            size = os.fstat(fd).st_size
            torn = size % self.unit != 0 if self.unit else \
                bool(size) and os.pread(fd, 1, size - 1) != b"\n"
        except BaseException:
            os.close(fd)
            raise
        self.fd, self.size, self.torn = fd, size, torn

    def append(self, data: bytes) -> int:
        """Write `data` (whole lines) at the end; return the bytes added. On OSError nothing of
        it is left behind (or the file is marked torn), and the error is raised."""
        assert self.fd is not None
        if self.torn and self.unit:
            os.ftruncate(self.fd, self.size - self.size % self.unit)
            self.size -= self.size % self.unit
            self.torn = False
        elif self.torn:
            data = b"\n" + data
        try:
            write_all(self.fd, data)
        except OSError as e:
            self._cut_back()
            if e.filename is None:  # name the file: the error is shown to the user
                raise OSError(e.errno, e.strerror, self.path) from None
            raise
        self.torn = False
        self.size += len(data)
        return len(data)

    def _cut_back(self) -> None:
        assert self.fd is not None
        try:
            os.ftruncate(self.fd, self.size)
        except OSError:
            self.torn = True
            self.size = os.fstat(self.fd).st_size  # the part stays: offsets must count it

    def sync(self) -> None:
        assert self.fd is not None
        os.fsync(self.fd)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def append_durably(path: str, data: bytes, *, sync: bool = True, unit: int = 0) -> None:
    """Append whole lines (or `unit`-byte records) to `path` and fsync them (and the directory
    entry of a new file; neither with `sync=False`), with the same guarantee as
    `AppendFile.append`: a failed append leaves no partial line or record in front of the next
    one. For files appended to rarely, by whichever process holds them."""
    created = not os.path.exists(path)
    f = AppendFile(path, unit=unit)
    f.open()
    try:
        f.append(data)
        if sync:
            f.sync()
    finally:
        f.close()
    if created and sync:
        fsync_dir(os.path.dirname(os.path.abspath(path)))
