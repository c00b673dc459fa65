"""Who learned a skill (`Learned`, which `skills show` and the report put in words with
`protocol.words.learned_words`): read from its provenance's first landing (the source, the
session or the machine, when).

A skill autoharness landed in *another* home (a teammate's project skill committed to the
repository, a skills dir copied from elsewhere) carries a provenance this home has no landing
records for: it is not owned here (never changed, archived or reverted by this daemon, which
only trusts its own records), but it is not hand-written either. It is listed with the owner
`elsewhere`, and its attribution says it was learned in another home.
"""

from __future__ import annotations

from claude_autoharness.daemon.promote.skilltree import read_provenance
from claude_autoharness.protocol.replies import Finding, Learned

ELSEWHERE = "elsewhere"
NOT_MANAGED = "not managed here"  # its stage: this home's lifecycle does not judge it


def learned(prov: dict | None, *, here: bool) -> Learned | None:
    """The attribution of a provenance record (None without a landing)."""
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
    return Learned(source=text(first, "source") or "",
                   at=at if isinstance(at, int | float) else None,
                   session=text(first, "session"), machine=machine, here=here)



def not_owned(name: str, skill_dir: str) -> Finding:
    """Why a skill this home's autoharness did not land cannot be changed by it: hand-written,
    or learned in another home (then: where to change it)."""
    if learned(read_provenance(skill_dir), here=False) is not None:
        return Finding(family="owned", code="not_owned",
                       message=f"{name} was learned by autoharness in another home: it is not "
                               "managed here; change it in that home (or through your "
                               "repository, for a committed project skill)")
    return Finding(family="owned", code="not_owned",
                   message=f"{name} was not created by autoharness")
