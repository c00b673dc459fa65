"""What Claude Code 2.1.328 lists of its own, measured against a loopback API: its bundled
skills (always listed whole) and its built-in prompt commands (ranked like the user's, by name
only unless used). Only names and line widths are kept: the text is Claude Code's.

Another version lists other entries; a user can set `listing.bundled_chars` to the width its
bundled skills take, and the prediction uses that instead of this table's sum.
"""

from .predict import Entry

VERSION = "2.1.328"

# (name, width of its whole `- name: description` line)
FIXED = (
    ("dataviz", 1447), ("update-config", 707), ("keybindings-help", 248), ("code-review", 850),
    ("simplify", 188), ("fewer-permission-prompts", 191), ("loop", 344), ("claude-api", 1169),
    ("workflow-authoring", 252), ("run", 368), ("plugin-authoring", 275),
)
RANKED = (("init", 67), ("security-review", 90))


def entries(bundled_chars: int | None = None) -> list[Entry]:
    """Claude Code's own entries, in its order (after the user's and the project's). With
    `bundled_chars`, the bundled skills are one fixed entry of that width."""
    if bundled_chars is not None:
        fixed = [Entry("(claude-code bundled skills)", "", layer="bundled", owner="claude-code",
                       fixed=True, full_width=max(0, bundled_chars - 1))]
    else:
        fixed = [Entry(n, "", layer="bundled", owner="claude-code", fixed=True, full_width=w)
                 for n, w in FIXED]
    ranked = [Entry(n, "", layer="bundled", owner="claude-code", kind="command", full_width=w)
              for n, w in RANKED]
    return fixed + ranked


def fixed_chars() -> int:
    """What the bundled skills take of the budget (their lines and the breaks after them)."""
    return sum(w + 1 for _, w in FIXED)
