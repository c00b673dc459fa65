"""A layer's capacity in listing characters: the learned skills of a session's listing may take
`listing.budget_share` of what Claude Code's budget leaves after its own bundled skills, so the
lifecycle sheds a learned skill before the listing pushes the user's own skills (and the
learned ones) to name-only. The user layer is in every session's listing: it is counted first,
and a project's learned skills get the share the user layer leaves. Reads files (the skills'
descriptions, Claude Code's settings); the arithmetic is predict.py's."""

from ..promote.skilltree import read_nofollow
from . import bundled, read
from .predict import budget, cut
from .width import width


def skill_chars(path: str, name: str, max_desc: int) -> int:
    """What a skill's line (and its line break) costs the listing."""
    data = read_nofollow(path, "SKILL.md", limit=read.MAX_SKILL_BYTES) or b""
    desc = read.listed_description(read.frontmatter(data.decode("utf-8", "replace")))
    return width(f"- {name}: {cut(desc, max_desc)}") + 1


def room(project_root: str | None, listing_cfg) -> tuple[int, int]:
    """(characters the learned skills of one session's listing may take, the budget)."""
    s = read.settings(project_root)
    b = budget(env_budget=s.env_budget, context_tokens=listing_cfg.context_tokens,
               fraction=s.fraction)
    fixed = listing_cfg.bundled_chars or bundled.fixed_chars()
    return int(listing_cfg.budget_share * max(0, b - fixed)), b


def caps(project_root: str | None, listing_cfg, chars: dict[tuple[str, str], int]
         ) -> dict[tuple[str, str | None], int]:
    """Per layer scope, the characters its learned skills may take: the user layer the whole
    room, the project what the user layer's learned skills leave of it. `chars`: (layer, name)
    -> listing characters of each live learned skill."""
    total, _ = room(project_root, listing_cfg)
    user = sum(n for (layer, _), n in chars.items() if layer == "user")
    out: dict[tuple[str, str | None], int] = {("user", None): total}
    if project_root:
        out[("project", project_root)] = max(0, total - min(user, total))
    return out
