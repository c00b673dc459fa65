"""Recall split: of the moments a learned skill's situation came up, how many ended with it
loaded — with a reminder and without one, listed with its description and by name only — so
a user sees whether reminders and Claude Code's listing budget matter in their own sessions.

A *situation* is a session where the skill was called for: one where a prompt reminder named
it (the trigger matched), one where it was loaded, or a grounded `missed` verdict (the
reflector saw the situation and no load). *Reminded* situations are the sessions with a
reminder; they count as loaded when the skill was loaded in that session. The others are the
sessions with a load and no reminder plus the missed verdicts. Whether a skill is listed with
its description is as Claude Code's listing is predicted now, for the skill's own project.
Pure: the ledger's records and the predicted listing come in as values.
"""

import os
from collections.abc import Iterable

from ...protocol import replies as r


def split(infos: list[tuple[r.SkillInfo, str | None]], uses: Iterable[dict],
          reminders: Iterable[dict], full: dict[tuple[str, str, str | None], bool]
          ) -> tuple[r.RecallSplit, dict[str, r.SkillRecall]]:
    """(the split over every live autoharness skill, each skill's own counts by path).
    `full`: (layer, name, scope) -> listed with its description."""
    loads: dict[str, set[str]] = {}  # skill dir -> sessions it was loaded in
    for u in uses:
        d, s = u.get("dir"), u.get("session")
        if isinstance(d, str) and isinstance(s, str) and s:
            loads.setdefault(os.path.realpath(d), set()).add(s)
    told: dict[tuple[str, str | None], set[str]] = {}  # (layer/name, project) -> sessions
    for rec in reminders:
        s, keys, proj = rec.get("session"), rec.get("skills"), rec.get("project")
        if isinstance(s, str) and isinstance(keys, list):
            for k in keys:
                if isinstance(k, str):
                    scope = proj if k.startswith("project/") else None
                    told.setdefault((k, scope if isinstance(scope, str) else None), set()).add(s)
    out, rows = r.RecallSplit(), {}
    for info, scope in infos:
        if info.status != "live" or info.owner != "autoharness":
            continue
        loaded = loads.get(os.path.realpath(info.path), set())
        reminded = told.get((f"{info.layer}/{info.name}", scope), set())
        row = r.SkillRecall(
            reminded=len(reminded), reminded_loaded=len(reminded & loaded),
            unreminded=len(loaded - reminded) + info.feedback.missed,
            unreminded_loaded=len(loaded - reminded),
            listed=full.get((info.layer, info.name, scope), True))
        rows[info.path] = row
        _add(out.reminded, row.reminded, row.reminded_loaded)
        _add(out.not_reminded, row.unreminded, row.unreminded_loaded)
        part = out.listed_full if row.listed else out.name_only
        _add(part, row.reminded + row.unreminded, row.reminded_loaded + row.unreminded_loaded)
        part.skills += 1
    for p in (out.reminded, out.not_reminded, out.listed_full, out.name_only):
        p.share = round(p.loaded / p.situations, 4) if p.situations else None
    return out, rows


def _add(p: r.RecallPart, situations: int, loaded: int) -> None:
    p.situations += situations
    p.loaded += loaded
