"""The triggers of the live skills a session may be reminded of (daemon/listing/remind.py),
kept per project and rebuilt only when a skill file changed: a prompt pays a stat per skill,
not a read of every SKILL.md and provenance record. Read-only; blocking (a worker thread)."""

import os
import threading
from collections.abc import Callable

from ...protocol import paths
from ..promote.skilltree import read_nofollow
from .read import MAX_SKILL_BYTES, frontmatter, listed_description
from .remind import Trigger, trigger

MAX_CACHED = 64  # projects whose triggers are kept


def signature(dirs: list[str]) -> tuple:
    """What changes when a skill is landed, edited, archived or restored in `dirs`."""
    out: list[tuple] = []
    for d in dirs:
        try:
            with os.scandir(d) as it:
                for e in it:
                    try:
                        st = os.stat(os.path.join(e.path, "SKILL.md"), follow_symlinks=False)
                    except OSError:
                        continue
                    out.append((e.path, st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append((d, None))
    return tuple(sorted(out, key=str))


class TriggerIndex:
    def __init__(self, list_skills: Callable[[str | None], list]):
        """`list_skills(root)`: the library's SkillInfo list (owner, layer, status, path)."""
        self.list_skills = list_skills
        self.lock = threading.Lock()
        self.cache: dict[str | None, tuple[tuple, list[tuple[Trigger, str]]]] = {}

    def triggers(self, root: str | None, *, hand_written: bool) -> list[Trigger]:
        """The live skills' triggers for a session in `root`: autoharness's own, and the
        hand-written ones too when `hand_written`."""
        dirs = [paths.user_skills_dir()] + ([paths.project_skills_dir(root)] if root else [])
        sig = signature(dirs)
        with self.lock:
            hit = self.cache.get(root)
        if hit is None or hit[0] != sig:
            built = self.build(root)
            with self.lock:
                if len(self.cache) >= MAX_CACHED:
                    self.cache.pop(next(iter(self.cache)))
                self.cache[root] = (sig, built)
            hit = (sig, built)
        return [t for t, owner in hit[1] if hand_written or owner == "autoharness"]

    def build(self, root: str | None) -> list[tuple[Trigger, str]]:
        out = []
        for info in self.list_skills(root):
            if info.status != "live":
                continue
            data = read_nofollow(info.path, "SKILL.md", limit=MAX_SKILL_BYTES)
            if data is None:
                continue
            desc = listed_description(frontmatter(data.decode("utf-8", "replace")))
            out.append((trigger(info.name, info.layer, desc), info.owner))
        return out
