"""What every part of the promoter shares and nothing else: the names and limits of a skill
directory, the `Plan` of a change and the `Seen` facts of the live tree it is judged against.

Imports nothing of the promoter, so the pure checks, the file I/O and the landing can all
depend on it without depending on each other.
"""

import os
from dataclasses import dataclass, field

SKILL_MD = "SKILL.md"
# autoharness's own files inside a skill: provenance record and evidence quotes.
PROVENANCE_DIR = ".autoharness"
PROVENANCE_FILE = "provenance.json"
PROVENANCE = f"{PROVENANCE_DIR}/{PROVENANCE_FILE}"
EVIDENCE_DIR = f"{PROVENANCE_DIR}/evidence"
# Far above what years of landings write; a bigger file is not one of ours.
MAX_PROVENANCE_BYTES = 4 * 1024 * 1024
SUPPORT_DIRS = ("references", "scripts", "templates", "assets")
# Temp files of atomic writes; recover() sweeps whatever a crash left with this prefix.
TMP_PREFIX = ".ah-tmp-"
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_FILES = 8
MAX_FILE_BYTES = 64 * 1024
MAX_TOTAL_BYTES = 256 * 1024


@dataclass
class Plan:
    """A change shaped in memory: what the skill directory will hold after landing."""

    action: str
    layer: str
    name: str
    root: str  # the layer's skills directory, symlinks resolved
    anchor: str | None = None  # a directory `root` must stay inside (the project root)
    exists: bool = False  # something (anything) is at root/name now
    skill_md: str | None = None  # the new SKILL.md; None when unchanged or archived
    writes: dict[str, str] = field(default_factory=dict)  # supporting file → new text
    removes: list[str] = field(default_factory=list)
    live: dict[str, int] = field(default_factory=dict)  # files there now → size
    state: str | None = None  # the promoter's state dir (landing records); None: the default

    @property
    def skill_dir(self) -> str:
        return os.path.join(self.root, self.name)


@dataclass(frozen=True)
class Seen:
    """What the live tree and the state dir say about a plan, read (never written, never
    through a symlink) before the pure checks judge it. The defaults are a clean tree."""

    anchor_real: str | None = None  # the plan's anchor, symlinks resolved
    root_not_dir: bool = False  # something other than a directory is at the skills dir
    dir_is_link: bool = False  # the skill directory is a symlink
    dir_not_dir: bool = False  # something other than a directory is at the skill dir
    links: tuple[str, ...] = ()  # symlinks below the skill dir
    # a plain file where a written path needs a directory, or a directory where it needs a file
    in_the_way: dict[str, list[str]] = field(default_factory=dict)
    owned: bool = True  # what exists at the skill dir was landed there by autoharness
