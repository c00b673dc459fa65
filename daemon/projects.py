"""Projects: the root a session belongs to, and the per-project off switch.

The project root is the main worktree root of the directory a session started in: a linked git
worktree's `.git` file points into the main repository's `.git/worktrees/<name>`, whose
`commondir` leads back to the main `.git`.
"""

import os
import threading
import time
import tomllib

from ..protocol.words import printable
from .capture.source import TranscriptRefused, open_regular

SWITCH_FILE = os.path.join(".claude", "autoharness.toml")


def project_root(cwd: str) -> str:
    """The main worktree root containing `cwd`, or `cwd` itself outside git."""
    cwd = os.path.abspath(cwd)
    d = cwd
    while True:
        dotgit = os.path.join(d, ".git")
        if os.path.isdir(dotgit):
            return d
        if os.path.isfile(dotgit):
            return _main_worktree(d, dotgit) or d
        parent = os.path.dirname(d)
        if parent == d:
            return cwd
        d = parent


def _main_worktree(d: str, dotgit: str) -> str | None:
    try:
        with open(open_regular(dotgit), encoding="utf-8") as f:  # never blocks (a FIFO)
            line = f.read(4096).strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    gitdir = line[len("gitdir:"):].strip()
    if not os.path.isabs(gitdir):
        gitdir = os.path.normpath(os.path.join(d, gitdir))
    try:
        with open(open_regular(os.path.join(gitdir, "commondir")), encoding="utf-8") as f:
            common = f.read(4096).strip()
    except OSError:
        return None
    if not os.path.isabs(common):
        common = os.path.normpath(os.path.join(gitdir, common))
    return os.path.dirname(common) if os.path.basename(common) == ".git" else None


PROMOTER_KEYS = {"mode": ("auto", "review", "git"), "git_branch": None}


def read_switch(path: str) -> tuple[bool, str]:
    """(enabled, problem) of a project's `.claude/autoharness.toml`. Absent: (True, "").
    It holds `enabled = true|false` and, optionally, a `[promoter]` table (`mode`,
    `git_branch`: git mode per project). A file that cannot be read or is not TOML, an
    `enabled` that is not a boolean, or a key of neither kind (`enable = false`) is a problem
    and the project is taken as off: the switch most likely meant that, and not counting is the
    careful side. A bad `[promoter]` value is a problem that leaves counting as `enabled` says
    (the promoter ignores the value), and so is a FIFO or device there (planted, never written
    as a switch: ignored). The daemon logs problems; `doctor --project` shows them."""
    try:
        # on the event loop: a FIFO here must fail the open, not block it
        with open(open_regular(path), "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        return True, ""
    except tomllib.TOMLDecodeError as e:
        return False, f"{path} is not valid TOML ({e})"
    except UnicodeDecodeError:
        return False, f"{path} is not UTF-8 text"
    except OSError as e:
        if isinstance(e, TranscriptRefused) and "not a regular file" in e.reason:
            # a FIFO or device: planted, never written as a switch
            return True, f"{path} is {e.reason}, so it is ignored"
        return False, f"{path} cannot be read ({e.strerror or e})"
    other = sorted(k for k in data if k not in ("enabled", "promoter"))
    if other:
        return False, (f"{path} has unknown key{'s' if len(other) > 1 else ''} "
                       + ", ".join(f"`{printable(k)}`" for k in other)
                       + " (it holds `enabled` and a `[promoter]` table)")
    enabled = data.get("enabled", True)
    if not isinstance(enabled, bool):
        return False, f"{path}: `enabled` must be true or false, unquoted (got {enabled!r})"
    return enabled, _promoter_problem(path, data.get("promoter", {}))


def _promoter_problem(path: str, table: object) -> str:
    if not isinstance(table, dict):
        return f"{path}: `promoter` must be a `[promoter]` table"
    for key, value in table.items():
        allowed = PROMOTER_KEYS.get(key, ())
        if key not in PROMOTER_KEYS:
            return (f"{path}: unknown key `promoter.{printable(key)}` (it takes `mode` and "
                    "`git_branch`)")
        if allowed and value not in allowed:
            return (f"{path}: `promoter.{key}` must be one of "
                    + ", ".join(f"`{a}`" for a in allowed) + f" (got {value!r})")
        if allowed is None and not (isinstance(value, str) and value):
            return f"{path}: `promoter.{key}` must be a branch name (got {value!r})"
    return ""


SWITCH_FIX = ("correct it (`enabled = false` turns the project off, `enabled = true` on), or "
              "remove the file")


class ProjectSwitches:
    """`<project>/.claude/autoharness.toml` with `enabled = false` turns counting off there; a
    malformed one too (see `read_switch`), logged once per version of the file.

    Asked on every event, so a file is looked at (stat) at most every `recheck_s` and parsed
    only when its (mtime, size) changed.
    """

    def __init__(self, *, recheck_s: float = 2.0, clock=time.monotonic) -> None:
        # root -> (when last checked, (mtime, size) of the file or None, enabled)
        self._cache: dict[str, tuple[float, tuple[float, int] | None, bool]] = {}
        self._roots: dict[str, str] = {}  # cwd -> root; asked on the loop and in threads
        self._roots_lock = threading.Lock()
        self.recheck_s = recheck_s
        self.clock = clock

    def root(self, cwd: str) -> str:
        with self._roots_lock:
            r = self._roots.get(cwd)
        if r is None:
            r = project_root(cwd)
            with self._roots_lock:
                if len(self._roots) > 4096:
                    self._roots.clear()
                self._roots[cwd] = r
        return r

    def root_of(self, cwd: str | None) -> str | None:
        """The project (main worktree) a session's cwd belongs to; None without a cwd."""
        return self.root(cwd) if cwd else None

    def root_enabled(self, root: str) -> bool:
        now = self.clock()
        cached = self._cache.get(root)
        if cached is not None and now - cached[0] < self.recheck_s:
            return cached[2]
        path = os.path.join(root, SWITCH_FILE)
        try:
            st = os.stat(path)
            key: tuple[float, int] | None = (st.st_mtime, st.st_size)
        except OSError:
            key = None
        if cached is not None and cached[1] == key:
            enabled = cached[2]
        elif key is None:
            enabled = True
        else:
            enabled, problem = read_switch(path)
            if problem:
                import structlog  # here: the offline tools load this module without it

                structlog.get_logger("autoharness").warning(
                    "project switch file malformed" + ("" if enabled else
                                                       ": counting nothing there"),
                    problem=problem, fix=SWITCH_FIX)
        self._cache[root] = (now, key, enabled)
        return enabled

    def enabled(self, cwd: str | None) -> bool:
        if not cwd:
            return True
        return self.root_enabled(self.root(cwd))
