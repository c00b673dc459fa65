"""The spool directory: events the hook could not get acknowledged, one file each.

The hook writes `<state>/spool/.<name>` and renames it to `<name>` (`<time_ns>.<event id>`), so
a listed name is always a complete record and no two writers ever share a file. The daemon
processes a record (its effect journaled, its event id remembered) and only then deletes it: a
crash in between replays it once more, and the event id makes that replay count nothing.

The format both sides share: the hook writes records (by hand, to stay within its import
budget; a test checks it against `record_name`), the daemon replays them, `doctor` counts them
without a daemon. Plain blocking functions (the daemon runs them in worker threads).
"""

import os
import stat

MAX_RECORD = 64 * 1024 * 1024  # as large as a frame may be
STALE_TMP_S = 3600.0  # a dot-file this old belongs to a hook that died mid-write


def record_name(time_ns: int, event_id: str) -> str:
    """A record's file name: sorting names sorts records by when the hook wrote them."""
    return f"{time_ns:020d}.{event_id}"


def pending(spool_dir: str) -> list[str]:
    """Names of complete records, oldest first (names start with the hook's time in ns)."""
    try:
        names = os.listdir(spool_dir)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(n for n in names if not n.startswith("."))


def count(spool_dir: str) -> int:
    return len(pending(spool_dir))


# An event a hook could not keep (its spool record failed to write: a full disk) leaves an empty
# `lost-event.<name>` in the state dir: an empty file needs no data block, so it is made when
# the record could not be. The daemon counts these, says so, and removes them.
LOST_PREFIX = "lost-event."


def lost(state_dir: str) -> list[str]:
    """The lost-event markers in the state dir."""
    try:
        return sorted(n for n in os.listdir(state_dir) if n.startswith(LOST_PREFIX))
    except OSError:
        return []


def take_lost(state_dir: str) -> int:
    """Remove the lost-event markers; how many there were (each one event)."""
    n = 0
    for name in lost(state_dir):
        try:
            os.unlink(os.path.join(state_dir, name))
            n += 1
        except FileNotFoundError:
            pass
        except OSError:
            break  # counted the next time
    return n


def read(spool_dir: str, name: str) -> bytes | None:
    """A record's bytes; None for anything that is not a regular file of ours (never followed
    through a symlink, never a FIFO that would block)."""
    try:
        fd = os.open(os.path.join(spool_dir, name),
                     os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_size > MAX_RECORD:
            return None
        chunks, left = [], st.st_size
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


def remove(spool_dir: str, name: str) -> None:
    try:
        os.unlink(os.path.join(spool_dir, name))
    except FileNotFoundError:
        pass


def drop_stale_tmp(spool_dir: str, now: float, older_than: float = STALE_TMP_S) -> int:
    """Delete dot-files left by hooks killed between creating and renaming their record."""
    n = 0
    try:
        names = [x for x in os.listdir(spool_dir) if x.startswith(".")]
    except OSError:
        return 0
    for name in names:
        path = os.path.join(spool_dir, name)
        try:
            if now - os.lstat(path).st_mtime > older_than:
                os.unlink(path)
                n += 1
        except OSError:
            continue
    return n
