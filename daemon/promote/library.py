"""The skill library as the CLI reads it without a daemon: the live skills, the files of one
skill, and what a git-mode review branch holds. The public API `skills export`, `skills
publish` and the offline facade build on; read-only (the mirror of a git-mode branch is
synced under the promoter's lock, as for any reader).
"""

import os
from dataclasses import dataclass, field
from typing import Literal

from ...protocol.config import PromoterConfig
from ...protocol.replies import SkillInfo
from . import fileops, gitmode
from .land import Promoter
from .plan import PROVENANCE, PROVENANCE_DIR
from .skilltree import read_nofollow
from .statedir import promote_state_dir

# "skill": the skill's own files (SKILL.md, references/, ...); "provenance": autoharness's
# record of its landings; "evidence": autoharness's other files (the evidence quotes).
FileKind = Literal["skill", "provenance", "evidence"]


@dataclass(frozen=True)
class SkillFile:
    rel: str  # '/'-separated, relative to the skill dir
    data: bytes
    kind: FileKind


@dataclass(frozen=True)
class ReviewBranch:
    """A project's git-mode review branch. `top` is None when the project is not in git mode
    (`mode`) or not in a git repository; `commits` are (short hash, subject) beyond the
    default branch, newest first."""

    mode: str
    branch: str
    config_path: str  # the project's own settings file, where git mode is switched on
    top: str | None = None
    exists: bool = False
    default: str | None = None
    remote: str | None = None
    commits: list[tuple[str, str]] = field(default_factory=list)


def list_skills(cfg: PromoterConfig, project_root: str | None) -> list[SkillInfo]:
    """Every skill of the user layer (and the project's, given its root), live then
    archived, as `skills list` shows them."""
    return Promoter(cfg).list_skills(project_root)


def skill_files(skill_dir: str) -> list[SkillFile]:
    """Every regular file of a skill, autoharness's own included, read without following a
    symlink (a file that cannot be read so is left out)."""
    out = []
    for rel in fileops.all_files(skill_dir):
        data = read_nofollow(skill_dir, rel)
        if data is None:
            continue
        kind: FileKind = ("provenance" if rel == PROVENANCE else
                          "evidence" if rel.startswith(PROVENANCE_DIR + "/") else "skill")
        out.append(SkillFile(rel=rel, data=data, kind=kind))
    return out


def review_branch(cfg: PromoterConfig, project: str) -> ReviewBranch:
    """What the project's review branch holds beyond the default branch (nothing is
    fetched or pushed)."""
    mode, branch = gitmode.mode_for(project, cfg)
    out = ReviewBranch(mode=mode, branch=branch,
                       config_path=os.path.join(project, gitmode.PROJECT_CONFIG))
    t = gitmode.target_for(project, cfg, promote_state_dir()) if mode == "git" else None
    if t is None:
        return out
    d = gitmode.default_branch(t.top)
    cur = gitmode.rev(t.top, t.ref)
    remote = gitmode.git(t.top, "config", "--get", f"branch.{short(d[0]) if d else ''}.remote",
                         check=False).strip() or (
        "origin" if gitmode.git(t.top, "remote", check=False).split() else "")
    commits: list[tuple[str, str]] = []
    if cur and d:
        log = gitmode.git(t.top, "log", "--format=%h%x09%s", f"{d[1]}..{cur}")
        for ln in log.splitlines():
            if "\t" in ln:
                oid, subject = ln.split("\t", 1)
                commits.append((oid, subject))
    return ReviewBranch(mode=mode, branch=t.branch, config_path=out.config_path, top=t.top,
                        exists=cur is not None, default=short(d[0]) if d else None,
                        remote=remote or None, commits=commits)


def short(ref: str) -> str:
    """A branch ref's short name (refs/heads/x, refs/remotes/origin/x: x)."""
    for p in ("refs/heads/", "refs/remotes/origin/"):
        if ref.startswith(p):
            return ref[len(p):]
    return ref
