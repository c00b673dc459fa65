"""Deterministic checks a shaped change must pass before it may touch the skill tree.

Families: well_formed, attributable, safe, contained, owned. Every check runs and
every finding is returned, so an operator sees all that is wrong at once.

Pure: no file I/O, no state dir, no environment. What the live tree holds comes in as
`Seen` (read by `observe`), so the same plan and the same facts give the same findings.
"""

import os
import re

from ..listing.remind import first_clause
from ..proposals import Finding, Proposal
from . import guard, skillfile
from .checks import CHECK_FILE
from .evidence import evidence_in_window
from .plan import (
    MAX_DESCRIPTION,
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_NAME,
    MAX_TOTAL_BYTES,
    SKILL_MD,
    SUPPORT_DIRS,
    Plan,
    Seen,
)

_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# Upper-case markers only: "a todo list" is prose, "TODO" is an unfinished skill.
_PLACEHOLDER = re.compile(r"\bTODO\b|\bFIXME\b|(?i:<placeholder>)")
_REDACTED = re.compile(r"\[REDACTED")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# "Says when to use the skill": the description must carry a trigger, not just a topic.
_WHEN = re.compile(r"\b(?:when|whenever|use|using|before|after|if|while|during)\b", re.IGNORECASE)
_HOME_PATH = re.compile(
    r"(?<![\w.-])(?:/home/[^/\s]+|/Users/[^/\s]+|/root(?![\w.-])|[A-Za-z]:\\Users\\)")


def check(plan: Plan, seen: Seen, *, max_body_lines: int, redactor, home: str,
          max_description: int = MAX_DESCRIPTION) -> list[Finding]:
    """Every finding of the well_formed, safe, contained and owned families for `plan`,
    given what the tree holds (`seen`) and the user's home directory."""
    texts = dict(plan.writes)
    if plan.skill_md is not None:
        texts[SKILL_MD] = plan.skill_md
    findings = contained(plan, seen)
    if plan.skill_md is not None:
        findings += well_formed(plan.skill_md, plan.name, max_body_lines, max_description)
    for rel, text in plan.writes.items():
        findings += _text_hygiene(rel, text)
    findings += guard.scan(texts, redactor)
    findings += owned(plan, seen, texts, home)
    return findings


# -- well_formed ---------------------------------------------------------------------------

def well_formed(text: str, dir_name: str, max_body_lines: int,
                max_description: int = MAX_DESCRIPTION) -> list[Finding]:
    """Claude Code's SKILL.md format plus our house rules on size and finish. A description
    is short (`max_description`) and trigger first: Claude Code lists every skill's in a
    small budget shared by all, cuts what is long and drops descriptions over budget."""
    def bad(code, message):
        return Finding(family="well_formed", code=code, message=message)

    try:
        fields, body = skillfile.parse(text)
    except skillfile.SkillFormatError as e:
        return [bad("frontmatter", str(e))] + _text_hygiene(SKILL_MD, text)
    out = []
    name = fields.get("name", "")
    if not name:
        out.append(bad("name", "frontmatter has no `name`"))
    elif len(name) > MAX_NAME or not _NAME.fullmatch(name):
        out.append(bad("name", f"name must be kebab-case [a-z0-9-], at most {MAX_NAME} chars"))
    if name and name != dir_name:
        out.append(bad("name_mismatch", "frontmatter name differs from the directory name"))
    out += [bad("description", why)
            for why in description_findings(fields.get("description", ""), max_description)]
    lines = [ln for ln in body.splitlines() if ln.strip()]
    if not lines:
        out.append(bad("body", "body is empty"))
    elif len(lines) > max_body_lines:
        out.append(bad("body", f"body has {len(lines)} non-blank lines (max {max_body_lines})"))
    return out + _text_hygiene(SKILL_MD, text)


def description_findings(desc: str, max_description: int = MAX_DESCRIPTION) -> list[str]:
    """What is wrong with a learned description (empty: nothing): present, within
    `max_description` (and the format's own limit), saying when to use the skill, first."""
    limit = min(max_description, MAX_DESCRIPTION)
    if not desc.strip():
        return ["frontmatter has no `description`"]
    if len(desc) > limit:
        return [f"description is {len(desc)} characters, over the {limit} a learned skill may "
                "have (promoter.max_description_chars): Claude Code lists every skill's "
                "description in one small shared budget and shows long ones by name only; say "
                "when to use it first, in one short sentence"]
    if not _WHEN.search(desc):
        return ["description must say when to use the skill"]
    if not _WHEN.search(first_clause(desc)):
        return ["description must open with when to use the skill (\"Use when ...\"): its "
                "first clause is what a reader of Claude Code's skill listing sees, and what a "
                "prompt reminder matches"]
    return []


def _text_hygiene(rel: str, text: str) -> list[Finding]:
    out = []
    if _PLACEHOLDER.search(text):
        out.append(Finding(family="well_formed", code="placeholder",
                           message=f"{rel}: placeholder text (TODO, FIXME, <placeholder>)"))
    # Capture redacted something the proposal relied on: landing it would ship a broken skill.
    if _REDACTED.search(text):
        out.append(Finding(family="well_formed", code="redacted",
                           message=f"{rel}: contains a [REDACTED] marker"))
    if _CONTROL.search(text):
        out.append(Finding(family="well_formed", code="control_chars",
                           message=f"{rel}: contains control characters"))
    return out


# -- attributable --------------------------------------------------------------------------

def attributable(p: Proposal, window: str | None) -> list[Finding]:
    """A reason, and evidence quoted verbatim from the recorded window."""
    def bad(code, message):
        return Finding(family="attributable", code=code, message=message)

    out = []
    if not p.reason.strip():
        out.append(bad("no_reason", "proposal gives no reason"))
    if not p.evidence.strip():
        out.append(bad("no_evidence", "proposal quotes no evidence"))
    elif window is None:
        out.append(bad("no_window", "no recorded window to check the evidence against"))
    elif not evidence_in_window(p.evidence, window):
        out.append(bad("evidence_not_found", "evidence is not a verbatim quote from the window"))
    return out


# -- contained -----------------------------------------------------------------------------

def name_is_contained(name: str) -> bool:
    """A single, ordinary path component: no traversal, separators, dotfiles or NULs."""
    return bool(name) and len(name) <= 255 and _PART.fullmatch(name) is not None


def path_problem(rel: str) -> str | None:
    """Why a supporting file path is not allowed, or None when it is."""
    if not rel:
        return "empty path"
    if rel == CHECK_FILE:  # the skill's check (promote/checks.py), beside its SKILL.md
        return None
    if "\\" in rel:
        return "backslash in path"
    if rel.startswith("/"):
        return "absolute path"
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return "path traversal or empty component"
    if any(p.startswith(".") for p in parts):
        return "dotfile or dot-directory"
    if not all(_PART.fullmatch(p) for p in parts):
        return "unusual characters in path"
    if len(parts) < 2 or parts[0] not in SUPPORT_DIRS:
        return f"supporting files go under {', '.join(d + '/' for d in SUPPORT_DIRS)}"
    return None


def contained(plan: Plan, seen: Seen) -> list[Finding]:
    """Names cannot escape, sizes are bounded, and no symlink sits on or below the skill dir.

    Judged before any write: a planted symlink is a rejection, not something to write through.
    """
    def bad(code, message):
        return Finding(family="contained", code=code, message=message)

    out = []
    if not name_is_contained(plan.name):
        return [bad("name", "skill name is not a plain directory name (traversal, separator, "
                            "absolute path or dotfile)")]
    if seen.anchor_real is not None and \
            os.path.commonpath([seen.anchor_real, plan.root]) != seen.anchor_real:
        out.append(bad("symlink", f"the skills dir resolves outside {plan.anchor} "
                                  f"(to {plan.root}): a symlink on the way is refused"))
    if seen.root_not_dir:
        out.append(bad("not_a_directory", "the skills directory is not a directory"))
    if seen.dir_is_link:
        out.append(bad("symlink", f"skill directory {plan.name} is a symlink"))
        return out
    if seen.dir_not_dir:
        out.append(bad("not_a_directory", f"{plan.name} is not a directory"))
        return out
    for rel in seen.links:
        out.append(bad("symlink", f"{rel} is a symlink"))
    for rel in list(plan.writes) + plan.removes:
        problem = path_problem(rel)
        if problem:
            out.append(bad("path", f"{rel!r}: {problem}"))
        else:
            out += [bad("not_a_directory", m) for m in seen.in_the_way.get(rel, [])]
    sizes = {rel: n for rel, n in plan.live.items() if rel not in plan.removes}
    sizes.update({rel: len(text.encode()) for rel, text in plan.writes.items()})
    if plan.skill_md is not None:
        sizes[SKILL_MD] = len(plan.skill_md.encode())
    for rel, text in list(plan.writes.items()) + [(SKILL_MD, plan.skill_md or "")]:
        if len(text.encode()) > MAX_FILE_BYTES:
            out.append(bad("file_too_large", f"{rel} is over {MAX_FILE_BYTES // 1024} KB"))
    if plan.action != "archive":
        if len([r for r in sizes if r != SKILL_MD]) > MAX_FILES:
            out.append(bad("too_many_files", f"more than {MAX_FILES} supporting files"))
        if sum(sizes.values()) > MAX_TOTAL_BYTES:
            out.append(bad("too_large", f"skill over {MAX_TOTAL_BYTES // 1024} KB in total"))
    return out


# -- owned ---------------------------------------------------------------------------------

def owned(plan: Plan, seen: Seen, texts: dict[str, str], home: str) -> list[Finding]:
    """autoharness changes only what it created; user-layer skills carry no home paths."""
    out = []
    if plan.exists and not seen.owned:
        out.append(Finding(family="owned", code="not_owned",
                           message=f"{plan.name} exists and was not created by autoharness"))
    if plan.layer == "user":
        for rel, text in texts.items():
            if _HOME_PATH.search(text) or (len(home) > 1 and home in text):
                out.append(Finding(family="owned", code="home_path",
                                   message=f"{rel}: absolute home path in a user-layer skill "
                                           "(use ~ or a relative path)"))
    return out
