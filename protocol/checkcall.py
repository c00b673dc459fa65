"""A tool call held against the compiled checks: which checks are about it, which it breaks,
and what the strongest of those does. The check hook decides with it and the daemon counts
adherence with it, from the same table, so the counts say what the hook did.

`os` and protocol/checkrule.py only: the check hook imports it on a tool call.
"""

import os

from . import checkrule

RANK = {"remind": 1, "ask": 2, "deny": 3}
OWN = ("autoharnessctl", "autoharness-hook", "autoharnessd")  # autoharness's own programs


def about(ev: dict, checks: list, home: str | None) -> list[tuple[dict, bool]]:
    """(check, whether the call breaks it) for every check of the table that is about this
    call: its tool, its project (a project's lesson holds only inside that project). A call
    that cannot be read, and autoharness's own calls, are about none."""
    tool = ev.get("tool_name")
    tool_input = ev.get("tool_input")
    cwd = ev.get("cwd") if isinstance(ev.get("cwd"), str) else None
    if not isinstance(tool, str) or own_call(tool, tool_input):
        return []
    out = []
    for c in checks:
        if not isinstance(c, dict) or c.get("action") not in RANK:
            continue
        root = c.get("root")
        if root is not None and not (isinstance(root, str) and within(cwd, root)):
            continue  # another project's lesson
        if tool not in checkrule.TOOLS.get(str(c.get("tool")), (tool,)):
            continue  # another tool's check: not even parsed
        rule, _ = checkrule.syntax(c.get("rule") or "")
        if rule is None or tool not in rule.tools():
            continue
        hit = checkrule.match(rule, tool, tool_input, root or cwd, home)
        if hit is None:
            return []  # a call not understood decides nothing and counts nowhere
        if hit and checkrule.matches_every_call(rule):
            continue  # not a check (the promoter never lands one): a damaged table
        out.append((c, hit))
    return out


def decide(ev: dict, checks: list, home: str | None) -> tuple[str, dict] | None:
    """(action, check) of the strongest check the call breaks; None when it breaks none."""
    best = None
    for c, hit in about(ev, checks, home):
        if hit and (best is None or RANK[c["action"]] > RANK[best[0]]):
            best = (c["action"], c)
    return best


def own_call(tool: str, tool_input) -> bool:
    """autoharness's own calls (its CLI, run by /learn and /save-learnings) are never held."""
    if tool != "Bash" or not isinstance(tool_input, dict):
        return False
    cmd = tool_input.get("command")
    parts = checkrule.commands(cmd) if isinstance(cmd, str) else None
    return any(os.path.basename(p.split(" ", 1)[0]) in OWN for p in parts or ())


def within(path: str | None, root: str) -> bool:
    if not path:
        return False
    path, root = os.path.normpath(path), os.path.normpath(root)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)
