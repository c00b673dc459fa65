"""The skill listing Claude Code will send, as autoharness predicts it (status, doctor,
report, `skills listing`)."""

from .codec import Part


class ListingLine(Part):
    name: str
    layer: str  # user | project | bundled
    owner: str  # autoharness | hand-written | plugin | claude-code
    kind: str = "skill"  # skill | command
    full: bool = True  # listed with its description
    desc_chars: int = 0  # the description's length after Claude Code's cut
    chars: int = 0  # what its whole line costs
    score: float = 0.0  # Claude Code's usage score (0: never used)


class ListingSummary(Part):
    """One session's listing: `chars` with every description against `budget`; the
    autoharness skills it lists by name only, and why in words (`text`), with the `fix`."""

    project: str | None = None
    budget: int = 0
    chars: int = 0
    shown_chars: int = 0
    entries: int = 0
    name_only: int = 0
    autoharness: int = 0
    autoharness_chars: int = 0
    autoharness_name_only: list[str] = []
    never_used_name_only: int = 0
    text: str = ""
    fix: str = ""
    lines: list[ListingLine] = []
