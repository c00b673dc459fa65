"""What autoharness injects at SessionStart, under one character budget.

The marker report and the promoter summary are about this project right now; the rule is the
same every time. So when space runs short the rule goes first, and nothing is ever cut mid-line:
half a line reads as a different instruction.
"""

from functools import cache
from importlib import resources

BUDGET = 2_000
# Fixed priority, whatever order the caller passes the parts in; unknown names come last.
PRIORITY = ("report", "promoter", "rule", "listing")
# A partial rule would teach a broken marker format: it goes in whole or not at all.
WHOLE = frozenset({"rule"})
SEPARATOR = "\n\n"


@cache
def rule_text() -> str:
    """The marker rule exactly as injected (and as `autoharnessctl learnings rule` prints it)."""
    text = resources.files("claude_autoharness.daemon.learnings").joinpath("rule.md").read_text("utf-8")
    return text.strip()


def _rank(name: str) -> int:
    return PRIORITY.index(name) if name in PRIORITY else len(PRIORITY)


def _fit_lines(text: str, room: int) -> str:
    """The longest prefix of whole lines of `text` that fits in `room` characters."""
    taken: list[str] = []
    used = 0
    for line in text.split("\n"):
        cost = len(line) + (1 if taken else 0)
        if used + cost > room:
            break
        taken.append(line)
        used += cost
    return "\n".join(taken).rstrip("\n")


def session_start_context(parts: list[tuple[str, str]], budget: int = BUDGET) -> str:
    """Join (name, text) parts in priority order within `budget` characters.

    Higher-priority parts are taken first; a part that does not fit whole is cut at a line
    boundary (or left out, for `WHOLE` parts), and the lower-priority parts still get whatever
    room is left. Empty parts are skipped; "" when nothing fits.
    """
    ordered = sorted((p for p in parts if p[1].strip()), key=lambda p: _rank(p[0]))  # stable
    out: list[str] = []
    used = 0
    for name, text in ordered:
        text = text.strip("\n")
        room = budget - used - (len(SEPARATOR) if out else 0)
        if room <= 0:
            break
        piece = text if len(text) <= room else ("" if name in WHOLE else _fit_lines(text, room))
        if not piece.strip():
            continue
        used += len(piece) + (len(SEPARATOR) if out else 0)
        out.append(piece)
    return SEPARATOR.join(out)
