"""A lesson's check as the promoter judges and stores it.

A check lands as `check.json` in its skill's directory, written by the same landing as the
SKILL.md it belongs to (before it: the SKILL.md is the landing's commit point), so the skill
and its check are always whole or absent together, and its history, revert, restore, archive,
sync and export carry it like any file of the skill. Only a skill autoharness landed has one.

Grounded like everything that lands: the rule must parse and not hold every call of its tool
(protocol/checkrule.py), must match the call the evidence quote points at — a `tool_use` of
the window at or just before the quoted passage — and must not match the call that corrected
it, when the window shows one after the quote.

Pure: the window comes in as text, the rest as arguments.
"""

import json
import os
from collections.abc import Callable, Iterable, Iterator

from ...protocol import checkrule
from ..proposals import CHECK_MODES, Check, Finding
from .evidence import decode_escapes, normalize

CHECK_FILE = "check.json"
MAX_MESSAGE = 300
# the quoted call is the last call of the rule's tool at or before the quote, or one of the
# few before it (a correction often comes after a look at the output)
LOOK_BACK = 3


def check_text(check: Check) -> str:
    """What `check.json` holds: the check as proposed (its action is what applies once the
    lesson is confirmed; until then it reminds)."""
    return json.dumps({"rule": check.rule.strip(), "action": check.action,
                       "message": " ".join(check.message.split())}, indent=1) + "\n"


def rule_text(check: Check) -> str:
    """The rule as the table holds it (parsed and written back)."""
    rule, _ = checkrule.parse(check.rule)
    return rule.text() if rule is not None else check.rule.strip()


def parse_check_file(data: bytes | None) -> Check | None:
    """A stored `check.json`, or None when absent or not one (a damaged one holds nothing)."""
    if not data:
        return None
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    rule, action, message = obj.get("rule"), obj.get("action"), obj.get("message")
    if not (isinstance(rule, str) and action in CHECK_MODES and isinstance(message, str)):
        return None
    if checkrule.parse(rule)[0] is None:
        return None
    return Check(rule=rule, action=action, message=message)


def well_formed(check: Check) -> list[Finding]:
    def bad(message):
        return Finding(family="well_formed", code="check", message=message)

    out = []
    rule, why = checkrule.parse(check.rule)
    if rule is None:
        out.append(bad(f"check: {why}"))
    if check.action not in CHECK_MODES:
        out.append(bad(f"check: action must be one of {', '.join(CHECK_MODES)} "
                       f"(got {check.action!r})"))
    msg = " ".join(check.message.split())
    if not msg:
        out.append(bad("check: a message is required: the lesson and the right way, in a line"))
    elif len(msg) > MAX_MESSAGE:
        out.append(bad(f"check: the message is at most {MAX_MESSAGE} characters"))
    if any(ord(c) < 32 and c not in "\n\t" for c in check.message):
        out.append(bad("check: the message contains control characters"))
    return out


def grounded(check: Check, evidence: str, window: str | None, base: str | None,
             home: str | None) -> list[Finding]:
    """Findings when the check does not hold the call the evidence points at, or holds the
    corrected one. `base` is where relative path rules start (the project's root)."""
    def bad(code, message):
        return Finding(family="attributable", code=code, message=message)

    rule, _ = checkrule.parse(check.rule)
    if rule is None or window is None:
        return []  # well_formed, or attributable (no window), says why
    lines = window.splitlines()
    at = quote_line(evidence, lines)
    if at is None:
        return [bad("check_not_grounded", "the evidence is not a quote of one record of the "
                                          "window, so it points at no tool call")]
    calls = [(i, b["name"], b["input"]) for i, b in tool_uses(lines)
             if isinstance(b.get("name"), str) and b["name"] in rule.tools()
             and isinstance(b.get("input"), dict)]
    before = [c for c in calls if c[0] <= at][-LOOK_BACK:]
    shown = rule.text()
    if not before:
        return [bad("check_not_grounded", f"the window shows no {'/'.join(rule.tools())} "
                                          f"call at or before the evidence for {shown}")]
    held = [c for c in before if checkrule.match(rule, c[1], c[2], base, home) is True]
    if not held:
        last = checkrule.call_text(before[-1][1], before[-1][2]) or "?"
        return [bad("check_not_grounded", f"{shown} does not match the quoted call "
                                          f"`{_clip(last)}`: the rule must match the wrong call")]
    after = [c for c in calls if c[0] > max(at, held[-1][0])][:1]
    if after and checkrule.match(rule, after[0][1], after[0][2], base, home) is True:
        fixed = checkrule.call_text(after[0][1], after[0][2]) or "?"
        return [bad("check_matches_correction", f"{shown} also matches the corrected call "
                                                f"`{_clip(fixed)}`: it would hold the right "
                                                "way too")]
    return []


def quote_line(evidence: str, lines: list[str]) -> int | None:
    """The first line of the window the evidence is a quote of (raw or JSON-decoded)."""
    quote = normalize(evidence)
    if not quote:
        return None
    for i, line in enumerate(lines):
        if quote in normalize(line) or quote in normalize(decode_escapes(line)):
            return i
    return None


def tool_uses(lines: Iterable[str | bytes],
              keep: Callable[[dict], object] = lambda rec: True) -> Iterator[tuple[int, dict]]:
    """(line, block) of every `tool_use` block of the records `keep` accepts, in order; a
    record that is not whole JSON (clipped, damaged) shows none."""
    for i, line in enumerate(lines):
        if '"tool_use"' not in (line if isinstance(line, str) else line.decode("latin-1")):
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            continue
        msg = rec.get("message") if isinstance(rec, dict) and keep(rec) else None
        content = msg.get("content") if isinstance(msg, dict) else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_use":
                yield i, block


def findings(check: Check | None, evidence: str, window: str | None,
             project_root: str | None, *, reflector_dir: str, home: str) -> list[Finding]:
    """Every reason a proposal's check may not land (none when it carries no check)."""
    if check is None:
        return []
    if child_project(project_root, reflector_dir):
        return [Finding(family="owned", code="check_from_child",
                        message="a check never lands from autoharness's own reflector session")]
    return well_formed(check) + grounded(check, evidence, window, project_root, home)


def child_project(project_root: str | None, reflector_dir: str) -> bool:
    """Whether a proposal came from one of autoharness's own reflector sessions."""
    if not project_root:
        return False
    p, d = os.path.normpath(project_root), os.path.normpath(reflector_dir)
    return p == d or p.startswith(d + os.sep)


def _clip(text: str, n: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"
