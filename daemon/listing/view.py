"""The listing of one project (or the user layer alone) as autoharness reports it: the
prediction for what Claude Code will send, and what it means for autoharness's skills in
words, with the fix. Reads files (read.py); the arithmetic is predict.py's."""

from ...protocol.replies.listing import ListingLine, ListingSummary
from . import read
from .predict import Listing, budget, predict

FIX = ("shorten the descriptions of the learned skills (`autoharnessctl curate` repairs long "
       "ones), turn off skills you do not need (`/skills` in Claude Code), or give the listing "
       "more room: `skillListingBudgetFraction` in Claude Code's settings.json (0.01 of the "
       "context by default) or the SLASH_COMMAND_TOOL_CHAR_BUDGET variable")


def listing_for(project_root: str | None, owners: dict[tuple[str, str], str], *,
                context_tokens: int, bundled_chars: int | None = None,
                env: dict[str, str] | None = None,
                now: float | None = None) -> tuple[Listing, dict[str, float]]:
    """The predicted listing of a session in `project_root` (None: no project) and the usage
    scores it ranked by."""
    s = read.settings(project_root, env)
    scores = read.usage_scores(now)
    entries = read.entries(project_root, owners, s.overrides, bundled_chars)
    b = budget(env_budget=s.env_budget, context_tokens=context_tokens, fraction=s.fraction)
    return predict(entries, budget_chars=b, max_desc=s.max_desc, scores=scores), scores


def summary(listing: Listing, scores: dict[str, float], project: str | None) -> ListingSummary:
    """What `status`, `doctor`, `report` and the session start say of a listing."""
    ours = [ln for ln in listing.lines if ln.entry.owner == "autoharness"]
    hidden = [ln for ln in ours if not ln.full]
    never = [ln for ln in hidden if scores.get(ln.entry.ident, 0.0) == 0.0]
    out = ListingSummary(
        project=project, budget=listing.budget, chars=listing.total, shown_chars=listing.shown,
        entries=len(listing.lines), name_only=len(listing.name_only()),
        autoharness=len(ours), autoharness_chars=sum(ln.full_width + 1 for ln in ours),
        autoharness_name_only=[ln.entry.name for ln in hidden],
        never_used_name_only=len(never),
        lines=[ListingLine(name=ln.entry.name, layer=ln.entry.layer, owner=ln.entry.owner,
                           kind=ln.entry.kind, full=ln.full, desc_chars=ln.desc_chars,
                           chars=ln.full_width, score=round(scores.get(ln.entry.ident, 0.0), 4))
               for ln in listing.lines])
    out.text = words(out)
    out.fix = FIX if hidden else ""
    return out


def words(s: ListingSummary) -> str:
    """One line: "listing 9,412 of 8,000 characters; 3 learned skills never used are shown by
    name only (a, b, c)"."""
    head = f"listing {s.chars:,} of {s.budget:,} characters"
    if not s.autoharness_name_only:
        if s.chars > s.budget:
            return head + f"; {s.name_only} entries by name only, none of them autoharness's"
        return head + "; every skill is listed with its description"
    n = len(s.autoharness_name_only)
    names = ", ".join(s.autoharness_name_only[:5]) + (", ..." if n > 5 else "")
    if s.never_used_name_only == n:
        what = f"{n} learned skill{'s' if n != 1 else ''} never used {'are' if n != 1 else 'is'}"
    else:
        what = (f"{n} learned skill{'s' if n != 1 else ''} ({s.never_used_name_only} never used) "
                f"{'are' if n != 1 else 'is'}")
    return head + f"; {what} shown by name only ({names})"


def owners_of(infos) -> dict[tuple[str, str], str]:
    """(layer, name) -> `autoharness` for the live skills autoharness owns (SkillInfo list)."""
    return {(i.layer, i.name): "autoharness" for i in infos
            if i.status == "live" and i.owner == "autoharness"}


def project_summary(cfg, project_root: str | None, infos=None, *,
                    env: dict[str, str] | None = None) -> ListingSummary:
    """The summary for a session in `project_root` under config `cfg`; `infos` the live
    skills (SkillInfo) when the caller has them, else read from the library."""
    if infos is None:
        from ..promote.library import list_skills

        infos = list_skills(cfg.promoter, project_root)
    lst = cfg.listing
    listing, scores = listing_for(project_root, owners_of(infos),
                                  context_tokens=lst.context_tokens,
                                  bundled_chars=lst.bundled_chars or None, env=env)
    return summary(listing, scores, project_root)
