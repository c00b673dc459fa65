"""The compiled table of live checks the check hook reads at PreToolUse, and who confirmed what.

`<state>/checks.table`, written atomically (0600) whenever the library may have changed:

    Bash Edit                                  line 1: every tool name some check is held against
    {"v": 1, "checks": [{...}, ...]}           line 2: the checks

The hook reads line 1 first and stops there for a call no check is about, so that call never
loads `json`. One entry per live skill autoharness landed (found through the promoter's
histories) that holds a well-formed `check.json`: its rule, its message, and the action in
force — `remind` until the lesson is confirmed (the user approved it, or a later session made
the same call again), the proposed `ask`/`deny` after. A hand-written skill is never in it.

Confirmations live in the promoter's state (`checks-confirmed.json`: skill dir → the rule
confirmed, how, when); a changed rule is a new lesson and reminds again until confirmed.
"""

import json
import os
import threading

from ...protocol import checkrule, paths
from ...protocol.replies import SkillCheck
from ..persist.dirs import write_private
from ..persist.promoter import (
    Confirmation,
    Confirmed,
    load_map,
    save_map,
)
from . import gitmode, records
from .checks import CHECK_FILE, parse_check_file
from .observe import is_owned
from .plan import SKILL_MD
from .skilltree import read_nofollow

TABLE_VERSION = 1
CONFIRMED = "checks-confirmed.json"
_LOCK = threading.Lock()  # confirmations are written outside a landing


def live_checks(sd) -> list[dict]:
    """Every live check, sorted by skill dir: skill, layer, dir, project root (None for the
    user layer), rule, tool, spec, proposed action, the action in force, message, since."""
    confirmed = confirmations(sd)
    out = []
    for target, entries in records.histories(sd.path):
        last = entries[-1] if entries else {}
        if last.get("action") in (None, "archive"):
            continue
        if not os.path.isfile(os.path.join(target, SKILL_MD)) or not is_owned(target, sd.path):
            continue
        check = parse_check_file(read_nofollow(target, CHECK_FILE))
        if check is None:
            continue
        rule, _ = checkrule.parse(check.rule)
        assert rule is not None  # parse_check_file parsed it
        layer = str(last.get("layer") or "project")
        mark = confirmed.get(target)
        ok = mark is not None and mark.rule == rule.text()
        out.append({
            "skill": os.path.basename(target), "layer": layer, "dir": target,
            "root": None if layer == "user" else project_of(target),
            "rule": rule.text(), "tool": rule.tool, "spec": rule.spec,
            "proposed": check.action, "action": check.action if ok else "remind",
            "confirmed": mark.by if mark and ok else None, "message": check.message,
            "since": landed_at(entries),
        })
    return out


def landed_at(entries: list) -> float:
    """When the check in force landed: the first landing of the current check.json."""
    first = first_landing(entries)
    return float(first.get("at") or 0.0) if first else 0.0


def first_landing(entries: list) -> dict | None:
    """The history entry that landed the check.json the last entry holds (None: it has none)."""
    files = [(e.get("files") or {}).get(CHECK_FILE) if isinstance(e, dict) else None
             for e in entries]
    first = None
    for e, sha in zip(entries, files, strict=True):
        if sha is None or sha != files[-1]:
            first = None
        elif first is None:
            first = e
    return first


def confirm_repeat(sd, skill_dir: str, rule: str, session: str | None, at: float) -> bool:
    """A second window showed the same violation: a check landed again with the same rule
    from another session than an earlier landing of it confirms it."""
    entries = sd.history(skill_dir)[:-1]  # before the landing just made
    if not session:
        return False
    for e in reversed(entries):
        sha = (e.get("files") or {}).get(CHECK_FILE)
        try:
            held = parse_check_file(sd.get_blob(sha)) if sha else None
        except OSError:
            held = None
        if held is None or checkrule.parse(held.rule)[0] != checkrule.parse(rule)[0]:
            return False  # the run of landings with this rule ends here
        if e.get("session") not in (None, session):
            return confirm(sd, skill_dir, rule, by="repeat", at=at)
    return False


def project_of(target: str) -> str | None:
    """The project root a project-layer skill dir belongs to."""
    root = os.path.dirname(target)
    t = gitmode.target_of_root(root)
    if t is not None:
        return t.project
    tail = os.path.join(".claude", "skills")
    return os.path.dirname(os.path.dirname(root)) if root.endswith(os.sep + tail) else None


def library_stamp(sd) -> tuple:
    """What changes with every landing, archive and confirmation: the history directory (each
    landing renames its history file into it) and the confirmations file; last, the table."""
    out: list[tuple[int, int, int] | None] = []
    for path in (sd.p("history"), sd.p(CONFIRMED),
                 paths.checks_table_file()):
        try:
            st = os.stat(path)
            out.append((st.st_mtime_ns, st.st_ino, st.st_size))
        except OSError:
            out.append(None)
    return tuple(out)


def table_bytes(checks: list[dict]) -> bytes:
    tools = sorted({t for c in checks for t in checkrule.TOOLS[c["tool"]]})
    keep = ("skill", "layer", "dir", "root", "rule", "tool", "spec", "action", "message")
    body = {"v": TABLE_VERSION, "checks": [{k: c[k] for k in keep} for c in checks]}
    return (" ".join(tools) + "\n" + json.dumps(body, separators=(",", ":")) + "\n").encode()


def write_table(sd) -> list[dict]:
    """Compile the live checks into the hook's table (atomic, 0600); the checks written."""
    checks = live_checks(sd)
    data = table_bytes(checks)
    path = paths.checks_table_file()
    try:
        with open(path, "rb") as f:
            same = f.read(len(data) + 1) == data
    except OSError:
        same = False
    if not same:  # the hook's file changes only when the checks do
        paths.make_private_dirs(paths.state_dir())
        write_private(path, data)
    return checks


# -- confirmations ---------------------------------------------------------------------------

def confirmations(sd) -> Confirmed:
    return load_map(sd.p(CONFIRMED), Confirmed) or {}


def confirm(sd, skill_dir: str, rule: str, *, by: str, at: float) -> bool:
    """Record that the check `rule` of `skill_dir` is confirmed (`by`: user, repeat); False
    when it already was."""
    with _LOCK:
        marks = confirmations(sd)
        if (m := marks.get(skill_dir)) is not None and m.rule == rule:
            return False
        marks[skill_dir] = Confirmation(rule=rule, by=by, at=at)
        paths.make_private_dirs(sd.path)
        save_map(sd.p(CONFIRMED), marks)
        return True


def skill_check(c: dict) -> SkillCheck:
    return SkillCheck(rule=c["rule"], action=c["action"], proposed=c["proposed"],
                      message=c["message"], confirmed=c["confirmed"], since=c["since"])
