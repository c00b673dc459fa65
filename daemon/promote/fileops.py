"""The promoter's file operations on the skill tree: every write goes through a directory fd
that refuses symlinks, and is temp + fsync + rename + directory fsync (the promoter's own
state files are written by the persistence package, `persist.dirs.write_private`).

Callers reach these through the module (`fileops.write_at(...)`), so a test can stand one in
for a full disk or a crash at an exact step.
"""

import hashlib
import os
import secrets

from .plan import TMP_PREFIX
from .skilltree import open_dir


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha_or_none(data: bytes | None) -> str | None:
    return None if data is None else sha(data)


def write_at(base: str, parts: list[str], data: bytes, *, create: bool = True,
             mode: int = 0o644) -> None:
    """Atomically replace base/parts... with `data`: temp, fsync, rename, fsync the dir.
    `mode` (less the umask): skills are the project's files, state files are 0600."""
    dfd = open_dir(base, parts[:-1], create=create)
    try:
        tmp = f"{TMP_PREFIX}{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     mode, dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, parts[-1], src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise
        os.fsync(dfd)
    finally:
        os.close(dfd)


def unlink_at(base: str, parts: list[str]) -> None:
    try:
        dfd = open_dir(base, parts[:-1])
    except FileNotFoundError:
        return
    try:
        os.unlink(parts[-1], dir_fd=dfd)
        os.fsync(dfd)
    except FileNotFoundError:
        pass
    finally:
        os.close(dfd)


def unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def all_files(d: str) -> list[str]:
    """Every regular file under `d`, autoharness's own included, never through a symlink."""
    out = []
    for here, _dirs, names in os.walk(d, followlinks=False):
        for name in names:
            full = os.path.join(here, name)
            if not os.path.islink(full) and os.path.isfile(full) and \
                    not name.startswith(TMP_PREFIX):
                out.append(os.path.relpath(full, d).replace(os.sep, "/"))
    return sorted(out)


def sweep_temps(target: str) -> None:
    """Remove the temp files an interrupted write left in a skill directory."""
    if os.path.islink(target) or not os.path.isdir(target):
        return
    for here, _dirs, names in os.walk(target, followlinks=False):
        for name in names:
            if name.startswith(TMP_PREFIX):
                unlink(os.path.join(here, name))
