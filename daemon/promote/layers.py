"""Where each layer's skills live, as the promoter resolves them: the user layer under the
Claude config dir, the project layer in the project (or, in git mode, in the mirror of its
review branch). Every path is resolved when a landing is planned and checked again when it
is applied, so a path re-pointed in between is refused, never written through."""

import os
from collections.abc import Callable

from ...protocol import paths
from ...protocol.config import PromoterConfig
from ...protocol.replies import Finding, Outcome
from ..proposals import LAYERS
from . import gitmode, validate

Root = tuple[str, str, str | None]  # (layer, resolved skills dir, anchor it must stay inside)


def layer_root(layer: str, project_root: str | None, cfg: PromoterConfig,
               state: str) -> tuple[str | None, str | None]:
    """(resolved skills dir, anchor it must stay inside) for a layer; (None, None) for the
    project layer without a project root that is an existing directory."""
    if layer == "user":  # like the project's: a skills dir symlinked elsewhere is refused
        return os.path.realpath(paths.user_skills_dir()), paths.claude_dir()
    if not project_root or not os.path.isdir(project_root):
        return None, None
    t = gitmode.target_for(project_root, cfg, state)
    if t is not None:  # git mode: the review branch's skills, through their mirror
        return t.mirror_root, t.base
    return os.path.realpath(paths.project_skills_dir(project_root)), project_root


def roots(project_root: str | None, cfg: PromoterConfig, state: str) -> list[Root]:
    out = []
    for layer in LAYERS:
        root, anchor = layer_root(layer, project_root, cfg, state)
        if root is not None:
            out.append((layer, root, anchor))
    return out


def find_one(name: str, candidates: list[Root], layer: str | None,
             present: Callable[[str], bool]) -> Root | Outcome:
    """The single root among `candidates` (of `layer`, if named) where `present(target)`
    holds, or a rejection saying why there is none."""
    if not validate.name_is_contained(name):
        return Outcome.rejected(Finding(family="contained", code="name",
                                        message="not a plain skill name"))
    hits = [r for r in candidates
            if (layer is None or r[0] == layer) and present(os.path.join(r[1], name))]
    if not hits:
        return Outcome.rejected(shape_finding("missing", f"no skill {name}"))
    if len(hits) > 1:
        return Outcome.rejected(shape_finding("ambiguous", f"{name} exists in both layers: name one"))
    return hits[0]


def same_dir(a: str | None, b: str | None) -> bool:
    if not a or not b:
        return False
    return os.path.realpath(a) == os.path.realpath(b)


def uses_key(skill_dir: str) -> str:
    """Where a skill's uses are counted: where sessions read it. A git-mode skill is shaped in
    a mirror but used from the project's working tree once merged."""
    root, name = os.path.split(skill_dir)
    t = gitmode.target_of_root(root)
    return os.path.join(t.real_root, name) if t is not None else skill_dir


def shape_finding(code: str, message: str) -> Finding:
    return Finding(family="shape", code=code, message=message)


def no_project_root(project_root: str | None) -> Finding:
    if not project_root:
        return shape_finding("no_project_root", "project layer without a project root")
    return shape_finding("no_project_root",
                         f"the project root {project_root} is not an existing directory")
