"""The skill library's lifecycle, decided from counts alone (pure: no files, no clock).

A *turn* is the Stop of a main session: counted per project (the project layer) and overall
(the user layer). For every autoharness-owned live skill the promoter knows `uses` and `turns`,
both counted since the skill landed or was restored. From those:

- `probation` while `turns < maturity_turns`: too young to judge;
- then, with no use at all, the skill is archived as `dormant` (the graduation review);
- the rest are `graduated`, unless they have more `harmful` verdicts than `helped` or are
  stale: those stay on probation. When a layer (one project, or the user layer) holds more
  graduated skills than its capacity, the lowest usage rate (`uses / turns`; ties by name) is
  archived for `capacity` until it fits. Probation skills neither count towards capacity nor
  are archived for it. The same holds in listing characters: where a layer scope has a
  character cap (its share of Claude Code's skill listing), graduated skills are archived,
  lowest rate first, until its live skills' lines (probation ones included) fit.
- At any stage, a skill with at least 2 `harmful` verdicts and more `harmful` than `helped` is
  archived as `harmful`; one stale (naming repository paths that are gone) for
  `stale_after_turns` turns is archived as `stale`.

No single pass archives more than `max_share` of a layer's judged skills (at least one): the
rest wait for the next pass, most urgent first (harmful, stale, dormant, capacity).

Hand-written skills are never judged: they get the stage `hand-written` and no decision.
"""

from dataclasses import dataclass, field, replace
from fractions import Fraction

from ..persist.promoter import StaleMark

PROBATION = "probation"
GRADUATED = "graduated"
HAND_WRITTEN = "hand-written"
ARCHIVED = "archived"
DORMANT = "dormant"
CAPACITY = "capacity"
HARMFUL = "harmful"
STALE = "stale"
URGENCY = (HARMFUL, STALE, DORMANT, CAPACITY)


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
    helped: int = 0
    harmful: int = 0
    stale_turns: int | None = None  # turns since it was found stale; None: not stale
    chars: int = 0  # what its line costs Claude Code's skill listing


@dataclass(frozen=True)
class Decision:
    name: str
    layer: str
    scope: str | None
    reason: str  # harmful | stale | dormant | capacity
    uses: int
    turns: int
    detail: str = ""  # the reason in words, for history (set by `explained`)


@dataclass
class Held:
    """A harmful archive review mode keeps for the user: the skill's dir and the grounded
    harmful quotes that call for it."""

    decision: Decision
    path: str
    quotes: list[str]


@dataclass
class Pass:
    """One lifecycle pass: what it decided, carried out, held for review, left for the next
    pass (over a layer's share), and the description repairs it asked for."""

    planned: list[Decision] = field(default_factory=list)
    done: list[Decision] = field(default_factory=list)
    held: list[Held] = field(default_factory=list)  # for the caller to hold (review mode)
    held_back: int = 0
    repairs: list[tuple[str, str]] = field(default_factory=list)  # (layer, skill)
    newly_stale: list[str] = field(default_factory=list)  # project skills found stale


def explained(d: Decision, fb, stale_mark: StaleMark | None) -> Decision:
    """The decision with its reason in words: the counts (`fb`: the skill's FeedbackCounts) or
    the missing paths that made it."""
    if d.reason == HARMFUL:
        why = f"harmful: {fb.harmful} harmful and {fb.helped} helped verdicts"
    elif d.reason == STALE and stale_mark:
        why = f"stale: names paths that are gone ({', '.join(stale_mark.missing)})"
    else:
        return d
    return replace(d, detail=why)


def stage(skill: SkillCounts, maturity_turns: int) -> str:
    """`hand-written`, `probation`, `dormant` (due for archive) or `graduated`: graduating
    needs a use, no more harmful verdicts than helped ones, and not being stale."""
    if not skill.owned:
        return HAND_WRITTEN
    if skill.turns < maturity_turns:
        return PROBATION
    if skill.uses <= 0:
        return DORMANT
    if skill.harmful > skill.helped or skill.stale_turns is not None:
        return PROBATION
    return GRADUATED


def harmful(skill: SkillCounts) -> bool:
    return skill.owned and skill.harmful >= 2 and skill.harmful > skill.helped


def usage_rate(skill: SkillCounts) -> Fraction:
    """Uses per turn, exact (a graduated skill has turns >= maturity_turns > 0)."""
    return Fraction(skill.uses, max(1, skill.turns))


def decide(skills: list[SkillCounts], *, maturity_turns: int, capacity_project: int,
           capacity_user: int, stale_after_turns: int = 20, max_share: float = 1.0,
           chars_caps: dict[tuple[str, str | None], int] | None = None) -> list[Decision]:
    """Every archive the counts call for: harmful, stale and dormant ones, then capacity per
    layer scope, lowest rate first (ties broken by name): in skills, and in listing characters
    where `chars_caps` gives a scope's cap (its live owned skills' `chars`, probation included,
    held to it by archiving graduated ones); at most `max_share` of each layer scope in one
    pass. Same counts in, same decisions out."""
    out: list[Decision] = []
    graduated: dict[tuple[str, str | None], list[SkillCounts]] = {}
    for s in sorted(skills, key=lambda s: (s.layer, s.scope or "", s.name)):
        st = stage(s, maturity_turns)
        if harmful(s):
            out.append(_decision(s, HARMFUL))
        elif s.owned and s.stale_turns is not None and s.stale_turns >= stale_after_turns:
            out.append(_decision(s, STALE))
        elif st == DORMANT:
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
    out += over_chars(skills, graduated, out, chars_caps or {})
    return bounded(out, skills, max_share)


def over_chars(skills: list[SkillCounts], graduated: dict, decided: list[Decision],
               caps: dict[tuple[str, str | None], int]) -> list[Decision]:
    """Capacity archives that bring each capped scope's listing characters within its cap:
    the lowest usage rate of the graduated ones not already archived goes first."""
    gone = {(d.layer, d.name) for d in decided}
    out = []
    for scope, cap in sorted(caps.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        live = [s for s in skills if s.owned and (s.layer, s.scope) == scope
                and (s.layer, s.name) not in gone]
        total = sum(s.chars for s in live)
        for s in sorted(graduated.get(scope, []), key=lambda s: (usage_rate(s), s.name)):
            if total <= cap:
                break
            if (s.layer, s.name) in gone:
                continue
            out.append(_decision(s, CAPACITY))
            total -= s.chars
    return out


def share_cap(judged: int, max_share: float) -> int:
    """How many of a layer's `judged` skills one pass may archive (at least one)."""
    return max(1, int(judged * min(1.0, max(0.0, max_share))))


def bounded(decisions: list[Decision], skills: list[SkillCounts],
            max_share: float) -> list[Decision]:
    """The decisions one pass may carry out: per layer scope, at most its share, the most
    urgent first; order otherwise kept."""
    size: dict[tuple[str, str | None], int] = {}
    for s in skills:
        if s.owned:
            size[(s.layer, s.scope)] = size.get((s.layer, s.scope), 0) + 1
    taken: dict[tuple[str, str | None], int] = {}
    keep: list[Decision] = []
    for d in sorted(decisions, key=lambda d: URGENCY.index(d.reason)):
        k = (d.layer, d.scope)
        if taken.get(k, 0) < share_cap(size.get(k, 0), max_share):
            taken[k] = taken.get(k, 0) + 1
            keep.append(d)
    return [d for d in decisions if d in keep]


def _decision(s: SkillCounts, reason: str) -> Decision:
    return Decision(name=s.name, layer=s.layer, scope=s.scope, reason=reason, uses=s.uses,
                    turns=s.turns)
