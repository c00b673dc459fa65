"""The skill listing Claude Code will send with every request, worked out ahead (pure).

Claude Code lists the skills the model may load as `- name: description` lines, one per entry
(skills, slash commands, its own bundled skills), in a character budget:

- the budget is `SLASH_COMMAND_TOOL_CHAR_BUDGET` when set to a number, else
  `context tokens x 4 x skillListingBudgetFraction` (0.01 unless set), at least 1;
- each description is cut to `skillListingMaxDescChars` (1,536 unless set): one character
  fewer and an ellipsis;
- an entry set to `name-only` (settings `skillOverrides`) is listed by name whatever the budget;
- when every full line fits (the lines' widths plus one per line break), all are listed whole.
  Otherwise Claude Code's bundled skills and name-only entries stay as they are, every other
  entry is first counted by its name alone, and descriptions are given back in the order of
  their usage score (highest first; equal scores keep the listing's order) to each entry whose
  description still fits in what is left. The rest are listed by name only.

The usage score is Claude Code's: `usageCount x max(0.5 ^ (days since last use / 7), 0.1)`,
0 for a skill never used, so a fresh lesson is the first to lose its description.
Same entries, budget and scores in, same listing out.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field

from .width import width

CHARS_PER_TOKEN = 4
DEFAULT_FRACTION = 0.01
DEFAULT_MAX_DESC = 1536
ELLIPSIS = "\u2026"


@dataclass(frozen=True)
class Entry:
    """One entry of the listing, in Claude Code's order. `fixed`: a bundled skill of Claude
    Code's own, never shortened; `owner`: `autoharness`, `hand-written` or `claude-code`;
    `layer`: `user`, `project`, `plugin` or `bundled`; `kind`: `skill` or `command`."""

    name: str
    description: str
    layer: str = "user"
    owner: str = "hand-written"
    kind: str = "skill"
    fixed: bool = False
    name_only: bool = False
    # a bundled entry known only by its measured widths (its text is Claude Code's)
    full_width: int | None = None
    # the name Claude Code ranks and configures it by, when the line shows more (`dir (name)`)
    key: str = ""

    @property
    def ident(self) -> str:
        return self.key or self.name


@dataclass(frozen=True)
class Line:
    entry: Entry
    full: bool  # listed with its description
    desc_chars: int  # the description's length after the cut (0 when listed by name only)
    full_width: int  # what its whole line costs
    name_width: int  # what its line costs by name only


@dataclass
class Listing:
    budget: int
    total: int  # width of the listing with every description (the cut applied)
    shown: int  # width of the listing as sent
    lines: list[Line] = field(default_factory=list)

    def name_only(self, owner: str | None = None) -> list[Line]:
        return [ln for ln in self.lines if not ln.full and (owner is None or ln.entry.owner == owner)]


def budget(*, env_budget: str | None, context_tokens: int, fraction: float | None) -> int:
    """The listing's budget in characters, as Claude Code computes it."""
    n = _number(env_budget)
    if n:  # 0 or not a number: the computed budget
        return int(n)
    f = DEFAULT_FRACTION if fraction is None else fraction
    return max(1, int(context_tokens * CHARS_PER_TOKEN * f))


def _number(text: str | None) -> float:
    if text is None:
        return 0.0
    s = str(text).strip()
    try:
        v = float(s) if s else 0.0
    except ValueError:
        try:
            v = float(s.replace(",", "").replace("_", "")) if len(s) <= 32 else 0.0
        except ValueError:
            return 0.0
    return v if v == v else 0.0  # NaN: none


def cut(description: str, max_desc: int) -> str:
    """A description as the listing shows it: at most `max_desc` characters."""
    if len(description) > max_desc:
        return description[: max_desc - 1] + ELLIPSIS
    return description


def usage_score(count: float, last_used_ms: float, now_ms: float) -> float:
    """Claude Code's ranking score of a skill from its `skillUsage` record."""
    days = (now_ms - last_used_ms) / 86_400_000
    try:
        return count * max(0.5 ** (days / 7), 0.1)
    except OverflowError:  # a last use far in the future (a clock set wrong): ranked first
        return float("inf") if count > 0 else 0.0


def predict(entries: list[Entry], *, budget_chars: int, max_desc: int = DEFAULT_MAX_DESC,
            scores: Mapping[str, float] | None = None) -> Listing:
    """The listing Claude Code builds from `entries` (in its order) within `budget_chars`,
    ranking by `scores` (entry name -> usage score; absent: 0)."""
    scores = scores or {}
    widths = []
    for e in entries:
        name_w = width(f"- {e.name}")
        if e.name_only:
            widths.append((name_w, name_w, 0))
        elif e.full_width is not None:
            widths.append((e.full_width, name_w, max(0, e.full_width - name_w - 2)))
        else:
            d = cut(e.description, max_desc)
            widths.append((width(f"- {e.name}: {d}"), name_w, len(d)))
    breaks = max(0, len(entries) - 1)
    total = sum(w[0] for w in widths) + breaks
    if total <= budget_chars:
        lines = [Line(e, not e.name_only, w[2], w[0], w[1]) for e, w in zip(entries, widths, strict=True)]
        return Listing(budget=budget_chars, total=total, shown=total, lines=lines)
    keep = [e.fixed or e.name_only for e in entries]
    base = sum(w[0] if k else w[1] for w, k in zip(widths, keep, strict=True)) + breaks
    left = budget_chars - base
    ranked = sorted((i for i, k in enumerate(keep) if not k),
                    key=lambda i: -scores.get(entries[i].ident, 0.0))  # stable: ties keep order
    full = [e.fixed and not e.name_only for e in entries]
    for i in ranked:
        extra = widths[i][0] - widths[i][1]
        if extra <= left:
            full[i] = True
            left -= extra
    lines = [Line(e, f, w[2] if f else 0, w[0], w[1])
             for e, w, f in zip(entries, widths, full, strict=True)]
    shown = sum(ln.full_width if ln.full else ln.name_width for ln in lines) + breaks
    return Listing(budget=budget_chars, total=total, shown=shown, lines=lines)
