"""Shaping: a proposal turned into the `Plan` of the skill as it will be after the action,
built from the live tree (read only), with the findings only the shaping can make (exists,
missing, a patch that does not match once, a near duplicate, a lesson the user keeps).
"""

import os
from collections.abc import Callable

from ..proposals import Finding, Intent, Proposal, curator_layer
from . import duplicate, memory, skillfile, validate
from .checks import CHECK_FILE, check_text
from .evidence import evidence_in_window
from .layers import shape_finding
from .plan import SKILL_MD, TMP_PREFIX, Plan
from .skilltree import read_nofollow, scan_tree


def shape(p: Proposal, root: str, anchor: str | None, project_root: str | None, *,
          state: str, owned: Callable[[str], bool]) -> tuple[Plan, list[Finding]]:
    """The skill as it will be after the action, built from the live tree (read only).

    `p` passed `check_shape`: every field its action needs is set (`or ""` only narrows).
    """
    description, new_body = p.description or "", p.body or ""
    old, new, path = p.old or "", p.new or "", p.path or ""
    plan = Plan(action=p.action, layer=p.layer, name=p.skill, root=root, anchor=anchor,
                state=state)
    if not validate.name_is_contained(p.skill):
        return plan, []  # contained() reports it; nothing may be read through this name
    plan.exists = os.path.lexists(plan.skill_dir)
    plan.live = scan_tree(plan.skill_dir)[0]
    live_md = read_nofollow(plan.skill_dir, SKILL_MD) if plan.exists else None
    out: list[Finding] = []
    if p.action == "create":
        if plan.exists and owned(plan.skill_dir):
            out.append(shape_finding("exists", f"{p.skill} exists: update or patch it"))
        out += duplicates(root, p.skill, description)
        kept = memory.near_lesson(p.skill, description, memory.lessons(project_root),
                                  new_body)
        if kept is not None:
            out.append(shape_finding(
                "duplicate", f"{p.skill} repeats a lesson the user already keeps in "
                             f"{kept.source}: leave it there"))
        plan.skill_md = skillfile.render({"name": p.skill, "description": description}, new_body)
        if p.check is not None:
            plan.writes[CHECK_FILE] = check_text(p.check)
        return plan, out
    if not plan.exists:
        return plan, [shape_finding("missing", f"no skill {p.skill} in the {p.layer} layer")]
    if p.action in ("update", "patch"):
        if live_md is None:
            return plan, [shape_finding("missing", f"{p.skill} has no readable SKILL.md")]
        try:
            fields, body = skillfile.parse(live_md.decode("utf-8"))
        except (UnicodeDecodeError, skillfile.SkillFormatError) as e:
            return plan, [Finding(family="well_formed", code="frontmatter",
                                  message=f"live SKILL.md: {e}")]
        if p.action == "update":
            fields.update(name=p.skill, description=description)
            body = new_body
            if p.check is not None:  # without one, the skill keeps the check it has
                plan.writes[CHECK_FILE] = check_text(p.check)
        else:
            n = occurrences(body, old)
            if n != 1:
                return plan, [shape_finding("patch_mismatch", f"`old` matches the live "
                                                               f"body {n} times, not once")]
            body = body.replace(old, new, 1)
        plan.skill_md = skillfile.render(fields, body)
    elif path == CHECK_FILE:  # grounded only as a create's or an update's `check`
        out.append(shape_finding("check_file", f"{CHECK_FILE} changes only through a create's "
                                               "or an update's `check`"))
    elif p.action == "add_file":
        plan.writes = {path: p.content or ""}
    elif p.action == "remove_file":
        if path not in plan.live:
            out.append(shape_finding("missing_file", f"{p.skill} has no file {path!r}"))
        plan.removes = [path]
    return plan, out


def curator_findings(intent: Intent, plan: Plan, evidence: str) -> list[Finding]:
    """The curator is shown one layer: it changes that layer only. It archives a skill only on
    a quote of that very skill (what was absorbed elsewhere, or what is obsolete): a quote of
    another skill sent with it does not do."""
    asked = curator_layer(intent.session_id)
    if asked is not None and asked != plan.layer:
        return [shape_finding("wrong_layer", f"the curator was shown the {asked} layer, "
                                              f"not the {plan.layer} layer")]
    if plan.action != "archive":
        return []
    live = read_nofollow(plan.skill_dir, SKILL_MD) if plan.exists else None
    if live is not None and evidence_in_window(evidence, live.decode("utf-8", "replace")):
        return []
    return [Finding(family="attributable", code="evidence_not_found",
                    message=f"the evidence is not a quote of {plan.name}, the skill archived")]


def duplicates(root: str, name: str, description: str) -> list[Finding]:
    """A `duplicate` finding for each live skill in `root` near the one being created."""
    out: list[Finding] = []
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return out
    for other in names:
        if other == name or other.startswith(TMP_PREFIX):
            continue
        data = read_nofollow(os.path.join(root, other), SKILL_MD, limit=64 * 1024)
        if data is None:
            continue
        why = duplicate.near(name, description, other, skillfile.description(data))
        if why:
            out.append(shape_finding(
                "duplicate", f"{name} is near the live skill {other} (same {why}): "
                             f"patch or update {other} instead"))
    return out


def occurrences(text: str, sub: str) -> int:
    """How many times `sub` occurs in `text`, overlaps included (a patch must be unambiguous)."""
    if not sub:
        return 0
    n, i = 0, text.find(sub)
    while i >= 0:
        n += 1
        i = text.find(sub, i + 1)
    return n
