"""Stale skills, found without a model: a project skill that says a repository path exists
which does not.

A skill *names* a path when its SKILL.md holds it in backticks (`scripts/migrate.sh`) or as a
link target (`[the API](docs/api.md)`), and it looks like a file of the repository: relative,
no `..`, no glob or shell characters, no URL, a file name with an extension (and, in
backticks, at least one directory: a bare `setup.py` could be anywhere). Not checked:
- a host-like first part (`github.com/acme/tool.git`): an address, not a directory, unless
  the project has a directory of that name;
- a path the skill says to make (`create docs/adr/0001-title.md`, `write ... to out/x.json`,
  `dist/bundle.js` "is generated"): a verb of making before it in its sentence, or a passive
  one just after it;
- a path inside the skill's own directory (its `references/checklist.md`): its own file;
- a path in a git submodule (or any nested repository): not the project's to say.

A named path is missing when the file system under the project root does not have it: an
ignored or untracked file that exists (a build output, a local config) is there. Nothing
outside the project root is looked at: a path that resolves outside it is not checked.
"""

import os
import re
import subprocess

from . import gitmode

MAX_PATHS = 50  # per skill
_BACKTICK = re.compile(r"`([^`\n]{1,300})`")
_LINK = re.compile(r"\]\(\s*<?([^)\s>]{1,300})>?(?:\s+\"[^\"]*\")?\s*\)")
_FILE = re.compile(r"[A-Za-z0-9_@+.-][A-Za-z0-9_@+./-]*\.[A-Za-z0-9]{1,10}")
# a host name: dot-separated labels ending in an alphabetic top-level one
_HOST = re.compile(r"(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,24}")
_MAKE_BEFORE = re.compile(
    r"\b(?:create|creates|creating|make|makes|making|write|writes|writing|generate|generates|"
    r"generating|touch|scaffold|scaffolds|save|saves|saving|emit|emits|output|outputs|produce|"
    r"produces|new|add|adds|adding|rename|renames|move|moves|copy|copies)\b"
    r"[^.;!?]{0,40}$", re.IGNORECASE)
# where the sentence (or list item) a mention is in begins, looking back from it
_SENTENCE_END = re.compile(r"[.;!?](?:\s|$)|\n\s*\n|\n\s*(?:[-*+]|\d+[.)])\s")
_MAKE_AFTER = re.compile(
    r"^[^.;!?\n]{0,30}\b(?:is|are|gets|get|will be|to be)\s+(?:created|generated|written|"
    r"made|built|produced|emitted)\b|^\s*\(?(?:created|generated|written|new)\b",
    re.IGNORECASE)


def _candidate(text: str, *, need_dir: bool) -> str | None:
    p = text.strip().split("#", 1)[0].removeprefix("./")
    if not p or "://" in p or p.startswith(("/", "~", "-")) or not _FILE.fullmatch(p):
        return None
    parts = p.split("/")
    if ".." in parts or "" in parts or (need_dir and len(parts) < 2):
        return None
    return p


def _to_make(skill_md: str, start: int, end: int) -> bool:
    """Whether the mention at [start, end) is of a path the skill says to make: a verb of
    making before it in its sentence, or a passive one just after it."""
    before = skill_md[max(0, start - 120):start]
    ends = list(_SENTENCE_END.finditer(before))
    if ends:
        before = before[ends[-1].end():]
    before = " ".join(before.split()).rstrip("`[ (")
    line_end = skill_md.find("\n", end)
    after = skill_md[end:line_end if line_end >= 0 else len(skill_md)].lstrip("`)")
    return bool(_MAKE_BEFORE.search(before) or _MAKE_AFTER.search(after))


def host_like(path: str) -> bool:
    """A first part that reads as a host name (`github.com/...`)."""
    parts = path.split("/")
    return len(parts) > 1 and _HOST.fullmatch(parts[0]) is not None


def named_paths(skill_md: str) -> list[str]:
    """The repository paths a SKILL.md says exist, in order of first mention (at most
    MAX_PATHS): paths it says to make and host-like names are left out."""
    out: list[str] = []
    made: set[str] = set()
    for rx, need_dir in ((_BACKTICK, True), (_LINK, False)):
        for m in rx.finditer(skill_md):
            p = _candidate(m.group(1), need_dir=need_dir)
            if not p:
                continue
            if _to_make(skill_md, m.start(), m.end()):
                made.add(p)
            elif p not in out:
                out.append(p)
    return [p for p in out if p not in made][:MAX_PATHS]


class Tree:
    """One project's tree, as one lifecycle pass checks it."""

    def __init__(self, root: str):
        self.root = os.path.realpath(root)
        self._nested: set[str] | None = None  # submodules' paths, listed once

    def _submodules(self) -> set[str]:
        if self._nested is None:
            self._nested = set()
            try:
                r = subprocess.run(
                    ["git", "-C", self.root, "config", "--file", ".gitmodules", "-z",
                     "--get-regexp", r"^submodule\..*\.path$"], capture_output=True,
                    env=gitmode.git_env(), timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                return self._nested
            for entry in os.fsdecode(r.stdout).split("\0"):
                _key, _, path = entry.partition("\n")
                if path.strip():
                    self._nested.add(path.strip().strip("/"))
        return self._nested

    def _in_other_repo(self, rel: str) -> bool:
        """Under a submodule (registered, checked out or not) or a nested repository."""
        parts = rel.split("/")
        subs = self._submodules()
        for i in range(1, len(parts)):
            d = "/".join(parts[:i])
            if d in subs or os.path.lexists(os.path.join(self.root, d, ".git")):
                return True
        return False

    def exists(self, rel: str) -> bool | None:
        """Whether the project has `rel`; None when it is not checked (outside the root, in a
        submodule, or a host-like name the project has no directory for)."""
        full = os.path.join(self.root, rel)
        real = os.path.realpath(full)
        if real != self.root and not real.startswith(self.root + os.sep):
            return None
        if os.path.lexists(full):
            return True
        if self._in_other_repo(rel):
            return None
        if host_like(rel) and not os.path.isdir(os.path.join(self.root, rel.split("/")[0])):
            return None
        return False


def missing_paths(skill_dir: str, skill_md: str, tree: Tree) -> list[str]:
    """The named paths that exist neither in the skill's directory nor in the project."""
    out = []
    for p in named_paths(skill_md):
        if os.path.lexists(os.path.join(skill_dir, p)):
            continue  # the skill's own supporting file
        if tree.exists(p) is False:
            out.append(p)
    return out
