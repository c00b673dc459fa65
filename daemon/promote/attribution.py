"""Who learned a skill (`Learned`, which `skills show` and the report put in words with
`protocol.words.learned_words`): read from its provenance's first landing (the source, the
session or the machine, when).

A project skill autoharness landed in *another* home (a teammate's, committed to the
repository) carries a provenance this home has no landing records for. When its SKILL.md is
still the text that landing wrote, this home takes it in (`Verbs.take_in`): one history entry, action
`adopt`, naming that landing and the files as they are, and a fresh probation. From then on
it is this home's learned skill like its own (judged by the lifecycle, counted in capacity and
the report, forgotten or reverted by the verbs), and its attribution still says who learned
it, when and from which session or machine, in the other home. The skill's files are not
touched by taking it in. One whose text was changed since (by hand, in the repository) is not
taken in: it is listed with the owner `elsewhere`, not managed here. User-layer skills from
elsewhere come through sync, which keeps its own records.
"""

from __future__ import annotations

import os

from ...protocol.replies import Finding, Learned
from . import fileops
from .plan import SKILL_MD
from .skilltree import read_nofollow, read_provenance

ELSEWHERE = "elsewhere"
NOT_MANAGED = "not managed here"  # its stage: this home's lifecycle does not judge it
ADOPT = "adopt"  # the history action of a skill taken in from another home


def taken_in(prov: dict | None, d: str) -> dict | None:
    """The landing `d` is taken in at: the provenance's last, when SKILL.md is its text."""
    landings = (prov or {}).get("landings") or []
    last = landings[-1] if landings and isinstance(landings[-1], dict) else None
    md = read_nofollow(d, SKILL_MD)
    if last is None or md is None or last.get("skill_md") != fileops.sha(md):
        return None
    return last


def skill_dirs(root: str) -> list[str]:
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    return [os.path.join(root, n) for n in names if os.path.isfile(os.path.join(root, n, SKILL_MD))]


def adopted_at(history: list[dict]) -> float | None:
    """When this home took the skill in from another (None: learned here, or not taken in)."""
    first = history[0] if history else {}
    at = first.get("at") if first.get("action") == ADOPT else None
    return at if isinstance(at, int | float) else None


def learned(prov: dict | None, *, here: bool, history: list[dict] | None = None) -> Learned | None:
    """The attribution of a provenance record (None without a landing); `history`: this
    home's records of the skill, which say whether it was taken in from another home."""
    landings = (prov or {}).get("landings") or []
    first = landings[0] if landings and isinstance(landings[0], dict) else None
    if first is None:
        return None
    at = first.get("origin_at") or first.get("at")

    def text(landing: dict, key: str) -> str | None:
        v = landing.get(key)
        return v if isinstance(v, str) and v else None

    # a skill taken in by sync was learned on the machine its first sync landing names
    machine = text(first, "machine") or next(
        (text(x, "machine") for x in landings
         if isinstance(x, dict) and x.get("source") == "sync" and text(x, "machine")), None)
    taken = adopted_at(history or [])
    return Learned(source=text(first, "source") or "",
                   at=at if isinstance(at, int | float) else None,
                   session=text(first, "session"), machine=machine,
                   here=here and taken is None, adopted_at=taken)



def not_owned(name: str, skill_dir: str) -> Finding:
    """Why a skill this home's autoharness did not land cannot be changed by it: hand-written,
    or learned in another home (then: where to change it)."""
    if learned(read_provenance(skill_dir), here=False) is not None:
        return Finding(family="owned", code="not_owned",
                       message=f"{name} was learned by autoharness in another home and changed "
                               "since: it is not managed here; change it in that home (or "
                               "through your repository, for a committed project skill)")
    return Finding(family="owned", code="not_owned",
                   message=f"{name} was not created by autoharness")
