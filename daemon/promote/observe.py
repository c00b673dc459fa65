"""What the live tree and the promoter's records say about a skill: whether autoharness owns
it, and the `Seen` facts of a plan that the pure checks (`validate`) judge.

Reads only, never through a symlink below the layer root.
"""

import os
from dataclasses import replace

from . import attribution, gitmode, records, skilltree, validate
from .plan import SKILL_MD, Plan, Seen
from .statedir import promote_state_dir


def is_owned(skill_dir: str, state: str | None = None) -> bool:
    """Landed by autoharness *at this path*, by autoharness's own records.

    The provenance file alone proves nothing — a repository can ship one — so it must name
    this path (or the skill was taken in here from another home: `Verbs.take_in`) *and*
    share a landing (id and SKILL.md hash) with the landing records in the state dir. A
    copied or moved skill dir is not owned until it is taken in, and nothing sitting where
    autoharness last archived a skill is ours until a restore records it again.
    """
    rec = skilltree.read_provenance(skill_dir)
    if rec is None:
        return False
    state = state or promote_state_dir()
    entries = records.read_history(state, skill_dir)
    if not entries:  # merged from a git-mode review branch: its landings are the mirror's
        mirror = gitmode.twin(state, skill_dir)
        entries = records.read_history(state, mirror) if mirror else []
    if not entries or entries[-1]["action"] == "archive":
        return False
    # one taken in from another home names that home's path; the records here name this one
    if rec["target"] != skill_dir and entries[0]["action"] != attribution.ADOPT:
        return False
    claimed = {(x["landing"], x["skill_md"]) for x in rec["landings"] if x["skill_md"]}
    return any((e["landing"], e["files"].get(SKILL_MD)) in claimed for e in entries)


def observe(plan: Plan) -> Seen:
    """The facts `validate.check` needs about `plan`'s skills dir and skill dir. Nothing is
    read through a name that is not a plain directory name (the check refuses it)."""
    if not validate.name_is_contained(plan.name):
        return Seen()
    owned = is_owned(plan.skill_dir, plan.state) if plan.exists else True
    skill_dir = plan.skill_dir
    is_link = os.path.islink(skill_dir)
    seen = Seen(
        anchor_real=os.path.realpath(plan.anchor) if plan.anchor is not None else None,
        root_not_dir=os.path.lexists(plan.root) and not os.path.isdir(plan.root),
        dir_is_link=is_link, owned=owned,
        dir_not_dir=not is_link and os.path.lexists(skill_dir) and not os.path.isdir(skill_dir))
    if seen.dir_is_link or seen.dir_not_dir:
        return seen  # judged on that alone: nothing below it is read
    return replace(
        seen, links=tuple(skilltree.scan_tree(skill_dir)[1]),
        in_the_way={rel: skilltree.in_the_way(skill_dir, rel)
                    for rel in list(plan.writes) + plan.removes
                    if validate.path_problem(rel) is None})
