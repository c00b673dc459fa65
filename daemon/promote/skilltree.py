"""Reading the skill tree without following symlinks: a directory fd per step, bounded reads
that never hang on a FIFO, the files and links of a skill dir, its provenance record.

Never writes; `fileops` writes through the same `open_dir`.
"""

import os
import stat

from ..capture.source import open_dir_beneath
from . import records
from .plan import (
    MAX_PROVENANCE_BYTES,
    PROVENANCE,
    PROVENANCE_DIR,
    TMP_PREFIX,
)


def open_dir(base: str, parts: list[str], *, create: bool = False) -> int:
    """An fd for base/parts..., refusing a symlink at every step below `base`
    (`open_dir_beneath`). With `create`, missing directories are made."""
    return open_dir_beneath(base, parts, make=0o755 if create else None)


def read_nofollow(base: str, rel: str, *, limit: int | None = None) -> bytes | None:
    """The bytes of base/rel, or None when missing, not a regular file, behind a symlink,
    or (given `limit`) larger than `limit` bytes."""
    parts = rel.split("/")
    try:
        dfd = open_dir(base, parts[:-1])
    except OSError:
        return None
    try:
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                     dir_fd=dfd)
    except OSError:
        return None
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    # O_NONBLOCK above and this check: a planted FIFO, device or directory must not hang,
    # feed or fail us (a directory opens fine but cannot be read as a file).
    if not stat.S_ISREG(st.st_mode) or (limit is not None and st.st_size > limit):
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as f:
        data = f.read() if limit is None else f.read(limit + 1)
    return None if limit is not None and len(data) > limit else data


def scan_tree(skill_dir: str) -> tuple[dict[str, int], list[str]]:
    """(regular files → size, symlinks) under `skill_dir`, never following a link.

    autoharness's own provenance files are not counted as the skill's files, but a symlink
    among them is reported like any other: landing writes there too.
    """
    files: dict[str, int] = {}
    links: list[str] = []
    if os.path.islink(skill_dir) or not os.path.isdir(skill_dir):
        return files, links
    for here, dirs, names in os.walk(skill_dir, followlinks=False):
        rel_here = os.path.relpath(here, skill_dir)
        for name in dirs + names:
            rel = name if rel_here == "." else f"{rel_here}/{name}"
            st = os.lstat(os.path.join(here, name))
            if stat.S_ISLNK(st.st_mode):
                links.append(rel)
            elif (stat.S_ISREG(st.st_mode) and rel.split("/")[0] != PROVENANCE_DIR
                  and not name.startswith(TMP_PREFIX)):
                files[rel] = st.st_size
    return files, sorted(links)


def in_the_way(skill_dir: str, rel: str) -> list[str]:
    """What sits on the path of a file to write at skill_dir/rel (`rel` already passed
    `validate.path_problem`): a file where a directory must go, or the reverse. Symlinks
    are `scan_tree`'s to report; the walk stops at one."""
    out, here = [], skill_dir
    parts = rel.split("/")
    for i, part in enumerate(parts):
        here = os.path.join(here, part)
        if not os.path.lexists(here) or os.path.islink(here):
            break
        last = i == len(parts) - 1
        if not last and not os.path.isdir(here):
            out.append(f"{'/'.join(parts[:i + 1])} is not a directory")
        if last and os.path.isdir(here):
            out.append(f"{rel} is a directory")
    return out


def read_provenance(skill_dir: str) -> dict | None:
    """The skill's provenance record, or None when absent, unreadable or not of our shape.

    The file sits in the skill tree, where a repository or a user can put anything: it is
    read without following symlinks, bounded in size, and never raises.
    """
    data = read_nofollow(skill_dir, PROVENANCE, limit=MAX_PROVENANCE_BYTES)
    return None if data is None else records.parse_provenance(data)
