"""Stale skills, found without a model: a project skill that names repository paths which no
longer exist.

A skill *names* a path when its SKILL.md holds it in backticks (`scripts/migrate.sh`) or as a
link target (`[the API](docs/api.md)`), and it looks like a file of the repository: relative,
no `..`, no glob or shell characters, no URL, a file name with an extension (and, in
backticks, at least one directory: a bare `setup.py` could be anywhere). A path that exists
inside the skill's own directory (its `references/checklist.md`) is the skill's, not the
repository's.

The tree is the project's as git sees it when it is a git work tree (tracked and untracked
files, ignored ones left out, deleted ones gone), else the file system under the project root.
Nothing outside the project root is looked at: a path that resolves outside it is not checked.
"""

import os
import re
import subprocess

from claude_autoharness.daemon.promote import gitmode

MAX_PATHS = 50  # per skill
_BACKTICK = re.compile(r"`([^`\n]{1,300})`")
_LINK = re.compile(r"\]\(\s*<?([^)\s>]{1,300})>?(?:\s+\"[^\"]*\")?\s*\)")
_FILE = re.compile(r"[A-Za-z0-9_@+.-][A-Za-z0-9_@+./-]*\.[A-Za-z0-9]{1,10}")


def _candidate(text: str, *, need_dir: bool) -> str | None:
    p = text.strip().split("#", 1)[0].removeprefix("./")
    if not p or "://" in p or p.startswith(("/", "~", "-")) or not _FILE.fullmatch(p):
        return None
    parts = p.split("/")
    if ".." in parts or "" in parts or (need_dir and len(parts) < 2):
        return None
    return p


def named_paths(skill_md: str) -> list[str]:
    """The repository paths a SKILL.md names, in order of first mention (at most MAX_PATHS)."""
    out: list[str] = []
    for rx, need_dir in ((_BACKTICK, True), (_LINK, False)):
        for m in rx.finditer(skill_md):
            p = _candidate(m.group(1), need_dir=need_dir)
            if p and p not in out:
                out.append(p)
    return out[:MAX_PATHS]


class Tree:
    """One project's tree, listed once per lifecycle pass."""

    def __init__(self, root: str):
        self.root = os.path.realpath(root)
        self._files: set[str] | None = None
        self._dirs: set[str] = set()
        self._git: bool | None = None  # unknown until first asked

    def _list_git(self) -> bool:
        # One listing, tagged: `R` deleted from the work tree, `?` untracked (not ignored),
        # others tracked; a deleted file is listed twice (tracked, then `R`).
        try:
            r = subprocess.run(
                ["git", "-C", self.root, "ls-files", "-z", "-t", "--cached", "--deleted",
                 "--others", "--exclude-standard"], capture_output=True, env=gitmode.git_env(),
                timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return False
        if r.returncode != 0:
            return False
        listed = [e for e in os.fsdecode(r.stdout).split("\0") if len(e) > 2]
        gone = {e[2:] for e in listed if e[0] == "R"}
        self._files = {e[2:] for e in listed if e[2:] not in gone}
        for f in self._files:
            parts = f.split("/")
            for i in range(1, len(parts)):
                self._dirs.add("/".join(parts[:i]))
        return True

    def exists(self, rel: str) -> bool | None:
        """Whether the project has `rel`; None when it cannot be checked (outside the root)."""
        if self._git is None:
            self._git = os.path.isdir(self.root) and self._list_git()
        if self._git:
            assert self._files is not None
            return rel in self._files or rel in self._dirs
        full = os.path.join(self.root, rel)
        real = os.path.realpath(full)
        if real != self.root and not real.startswith(self.root + os.sep):
            return None
        return os.path.lexists(full)


def missing_paths(skill_dir: str, skill_md: str, tree: Tree) -> list[str]:
    """The named paths that exist neither in the skill's directory nor in the project."""
    out = []
    for p in named_paths(skill_md):
        if os.path.lexists(os.path.join(skill_dir, p)):
            continue  # the skill's own supporting file
        if tree.exists(p) is False:
            out.append(p)
    return out
