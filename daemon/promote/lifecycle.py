"""The skill library's lifecycle, decided from counts alone (pure: no files, no clock).

A *turn* is the Stop of a main session: counted per project (the project layer) and overall
(the user layer). For every autoharness-owned live skill the promoter knows `uses` and `turns`,
both counted since the skill landed or was restored. From those:

- `probation` while `turns < maturity_turns`: too young to judge;
- then, with no use at all, the skill is archived as `dormant` (the graduation review);
- the rest are `graduated`. When a layer (one project, or the user layer) holds more graduated
  skills than its capacity, the lowest usage rate (`uses / turns`; ties by name) is archived for
  `capacity` until it fits. Probation skills neither count towards capacity nor are archived.

Hand-written skills are never judged: they get the stage `hand-written` and no decision.
"""

from dataclasses import dataclass
from fractions import Fraction

PROBATION = "probation"
GRADUATED = "graduated"
HAND_WRITTEN = "hand-written"
ARCHIVED = "archived"
DORMANT = "dormant"
CAPACITY = "capacity"


@dataclass(frozen=True)
class SkillCounts:
    """One live skill as the lifecycle sees it. `scope` names its layer instance: the project
    root for the project layer, None for the user layer."""

    name: str
    layer: str  # project | user
    scope: str | None
    owned: bool
    uses: int
    turns: int


@dataclass(frozen=True)
class Decision:
    name: str
    layer: str
    scope: str | None
    reason: str  # dormant | capacity
    uses: int
    turns: int


def stage(skill: SkillCounts, maturity_turns: int) -> str:
    """`hand-written`, `probation`, `dormant` (due for archive) or `graduated`."""
    if not skill.owned:
        return HAND_WRITTEN
    if skill.turns < maturity_turns:
        return PROBATION
    return DORMANT if skill.uses <= 0 else GRADUATED


def usage_rate(skill: SkillCounts) -> Fraction:
    """Uses per turn, exact (a graduated skill has turns >= maturity_turns > 0)."""
    return Fraction(skill.uses, max(1, skill.turns))


def decide(skills: list[SkillCounts], *, maturity_turns: int, capacity_project: int,
           capacity_user: int) -> list[Decision]:
    """Every archive the counts call for: dormant ones first, then capacity per layer scope,
    lowest rate first (ties broken by name). Same counts in, same decisions out."""
    out: list[Decision] = []
    graduated: dict[tuple[str, str | None], list[SkillCounts]] = {}
    for s in sorted(skills, key=lambda s: (s.layer, s.scope or "", s.name)):
        st = stage(s, maturity_turns)
        if st == DORMANT:
            out.append(_decision(s, DORMANT))
        elif st == GRADUATED:
            graduated.setdefault((s.layer, s.scope), []).append(s)
    for (layer, _scope), group in sorted(graduated.items(), key=lambda kv: (kv[0][0],
                                                                             kv[0][1] or "")):
        cap = capacity_user if layer == "user" else capacity_project
        excess = len(group) - cap
        if excess <= 0:
            continue
        group.sort(key=lambda s: (usage_rate(s), s.name))
        out += [_decision(s, CAPACITY) for s in group[:excess]]
    return out


def _decision(s: SkillCounts, reason: str) -> Decision:
    return Decision(name=s.name, layer=s.layer, scope=s.scope, reason=reason, uses=s.uses,
                    turns=s.turns)
