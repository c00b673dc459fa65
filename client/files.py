"""Small file helpers of the CLI: atomic replacement keeping a file's mode, private
directories, the directories a write would create, this installation's scripts, the worktree a
project's settings live in."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import sysconfig

from ..daemon.offline import write_atomic
from ..protocol import paths, private


def default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write(path: str, data: bytes, mode: int | None = None) -> None:
    """Replace `path` all at once, keeping its mode.

    A symlinked file (dotfile managers) is written through: the link stays a link.
    """
    target = os.path.realpath(path)
    if mode is None:
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:
            mode = default_mode()
    write_atomic(target, data, mode)


def missing_dirs(path: str) -> list[str]:
    """The parent directories of `path` that do not exist yet, outermost first."""
    out = []
    d = os.path.dirname(os.path.abspath(path))
    while d and not os.path.exists(d):
        out.append(d)
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    return out[::-1]


def private_dir(d: str) -> None:
    """Create `d` and any missing parents 0700 (the daemon refuses a state dir open to others),
    checking each directory from the state dir down to `d` before anything is made inside it:
    one that is another user's, open to others or a link raises `private.NotPrivate` (an
    OSError naming the fix) with nothing written into it."""
    state, target = os.path.abspath(paths.state_dir()), os.path.abspath(d)
    chain = [target]
    if target.startswith(state + os.sep):
        rel = os.path.relpath(target, state).split(os.sep)
        chain = [os.path.join(state, *rel[:i]) for i in range(len(rel) + 1)]
    for p in chain:
        paths.make_private_dirs(p)
        bad = private.private_problem(p)
        if bad is not None:
            raise private.NotPrivate(bad)


def find_script(name: str) -> str | None:
    """An installed script of this installation: pip puts them in the interpreter's scripts dir."""
    for d in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return os.path.abspath(p)
    found = shutil.which(name)
    return os.path.abspath(found) if found else None


def worktree_top(start: str) -> str:
    """The worktree a project's `.claude/settings.json` lives in (git top level, else `start`)."""
    try:
        r = subprocess.run(["git", "-C", start, "rev-parse", "--show-toplevel"],
                           capture_output=True, text=True, timeout=10)
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return os.path.abspath(start)
