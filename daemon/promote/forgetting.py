"""Forgetting a lesson: the user takes an autoharness skill out of the live library, at any
version, and it is not learned again until they restore it.

A forgotten skill is an archive like any other (journaled, listed, restorable with `skills
restore`), whose reason is `forgotten`. While that archive exists, the promoter refuses a
`create` near it (the duplicate guard's test: the same name, or a description that says the
same thing) in the same layer, and the reflector's proposals that repeat it fail with a
finding naming the restore. Restoring the skill removes the archive, and with it the refusal.
"""

from __future__ import annotations

import os

from ...protocol.replies import Finding
from . import duplicate, skillfile
from .layers import same_dir, shape_finding
from .plan import SKILL_MD, Plan
from .skilltree import read_nofollow

FORGOTTEN = "forgotten"


def _description(meta: dict) -> str:
    return skillfile.description(read_nofollow(os.path.join(meta["path"], "skill"), SKILL_MD,
                                               limit=64 * 1024))


def forgotten(archives: list[dict], layer: str, anchor: str | None) -> list[dict]:
    """The forgotten archives of one layer (of the project at `anchor` for the project layer),
    newest first."""
    out = [m for m in archives if m.get("reason") == FORGOTTEN and m["layer"] == layer
           and (layer == "user" or same_dir(m["anchor"], anchor))]
    return sorted(out, key=lambda m: m["landing"], reverse=True)


def refused(archives: list[dict], plan: Plan, description: str,
            project_root: str | None) -> list[Finding]:
    """A finding when the skill `plan` creates repeats a lesson the user forgot."""
    anchor = project_root if plan.layer == "project" else None
    for meta in forgotten(archives, plan.layer, anchor):
        why = duplicate.near(plan.name, description, meta["name"], _description(meta))
        if why:
            return [shape_finding(
                "forgotten", f"{plan.name} repeats {meta['name']} (same {why}), a lesson the "
                             f"user forgot: it is not learned again unless they bring it back "
                             f"(`autoharnessctl skills restore {meta['name']}`)")]
    return []
