"""Measured adherence: per live check, layer and project, what the agent did before the lesson
landed and since.

Since landing, from every main-session PreToolUse the daemon hears (the counting hook's copy
of the call the check hook judged, held against the same table): calls of the check's tool,
violations (calls the rule matches), how many were reminded, asked or denied, and after a
deny whether the next call of that tool complied or repeated it. Before landing, a baseline
over the project's transcripts (bounded: the newest `BASELINE_FILES` files, `BASELINE_BYTES`
each, records older than the check): the same calls and violations, and in how many
sessions. It is a before/after on the user's own sessions, not a controlled trial.

Stored in the promoter's state (`adherence.json`: skill dir → rule, projects → counts); a
changed rule is a new check and counts from zero. Advisory like the use counts: unreadable
reads as empty.
"""

import dataclasses
import datetime
import json
import os
import threading

from ...protocol import checkcall, checkrule, paths
from ...protocol.replies import CheckAdherence, LessonCheck, SkillCheck
from ...protocol.words import adherence_line
from ..persist.dirs import write_private
from .checks import tool_uses
from .records import read_json

ADHERENCE = "adherence.json"
COUNTS = ("calls", "violations", "reminded", "asked", "approved", "declined", "denied",
          "complied", "repeated")
BEFORE = ("before_calls", "before_violations", "before_sessions")
BASELINE_FILES = 50
BASELINE_BYTES = 8 * 1024 * 1024
USER_PROJECT = ""  # a user-layer check's calls outside any project
ASK_TAIL = 1024 * 1024  # how much of a transcript's end is read for an ask's answer
ASK_WAIT_S = 86_400.0  # an ask whose answer the transcript has not shown by then is dropped
# What Claude Code writes as the tool result of a call the user declined at its prompt.
DECLINED = b"doesn't want to proceed with this tool use"
_LOCK = threading.Lock()


def load(sd) -> dict:
    return read_json(sd.p(ADHERENCE), dict) or {}


def _save(sd, data: dict) -> None:
    paths.make_private_dirs(sd.path)
    write_private(sd.p(ADHERENCE), json.dumps(data, sort_keys=True).encode())


def _entry(data: dict, c: dict) -> dict:
    e = data.get(c["dir"])
    if not isinstance(e, dict) or e.get("rule") != c["rule"]:
        e = data[c["dir"]] = {"rule": c["rule"], "projects": {}}
    return e


def _project(e: dict, project: str, c: dict) -> dict:
    p = e["projects"].get(project)
    if not isinstance(p, dict):
        p = e["projects"][project] = dict.fromkeys(COUNTS, 0)
        p.update(baseline(c, project or None))
    return p


class Recorder:
    """Counts the calls the daemon hears against the checks in force (one thread at a time)."""

    def __init__(self, sd, home: str | None = None):
        self.sd = sd
        self.home = home if home is not None else os.path.expanduser("~")
        self.after_deny: dict[tuple[str, str], bool] = {}  # (session, skill dir) denied last
        self.asks: list[dict] = []  # asked calls whose answer the transcript has not shown yet

    def record(self, calls: list[tuple[dict, str | None]], checks: list[dict],
               now: float = 0.0) -> None:
        """`calls`: (PreToolUse event as decoded, its project root) in the order heard. The
        asks still open are settled from their transcripts too (approved or declined)."""
        if not (calls and checks) and not self.asks:
            return
        with _LOCK:
            data = load(self.sd)
            for ev, root in calls if checks else ():
                self._one(data, ev, root, checks, now)
            self._settle(data, now)
            _save(self.sd, data)

    def _settle(self, data: dict, now: float) -> None:
        open_asks = []
        for ask in self.asks:
            answer = answered(ask["transcript"], ask["tool_use_id"])
            e = data.get(ask["dir"])
            p = (e.get("projects") or {}).get(ask["project"]) if isinstance(e, dict) \
                and e.get("rule") == ask["rule"] else None
            if answer is not None and isinstance(p, dict):
                p[answer] = p.get(answer, 0) + 1
            elif answer is None and now - ask["at"] < ASK_WAIT_S:
                open_asks.append(ask)
        self.asks = open_asks

    def _one(self, data: dict, ev: dict, root: str | None, checks: list[dict],
             now: float) -> None:
        sid = str(ev.get("session_id") or "")
        applied = checkcall.decide(ev, checks, self.home)
        for c, hit in checkcall.about(ev, checks, self.home):
            e = _entry(data, c)
            project = c["root"] or root or USER_PROJECT
            p = _project(e, project, c)
            p["calls"] += 1
            key = (sid, c["dir"])
            if self.after_deny.pop(key, False):
                p["repeated" if hit else "complied"] += 1
            if not hit:
                continue
            p["violations"] += 1
            if applied is not None and applied[1] is c:
                p[{"remind": "reminded", "ask": "asked", "deny": "denied"}[c["action"]]] += 1
                if c["action"] == "deny":
                    self.after_deny[key] = True
                if c["action"] == "ask" and ev.get("tool_use_id") and ev.get("transcript_path"):
                    self.asks.append({"dir": c["dir"], "rule": c["rule"], "project": project,
                                      "transcript": ev["transcript_path"],
                                      "tool_use_id": ev["tool_use_id"], "at": now})


def answered(transcript: str, tool_use_id: str) -> str | None:
    """`approved` or `declined` once the transcript shows the asked call's result (the user
    declined: Claude Code's refusal text); None while it shows none."""
    data = _read(transcript, tail=ASK_TAIL)
    key = b'"tool_use_id":"' + tool_use_id.encode() + b'"'
    for line in reversed(data.split(b"\n")):
        if b'"tool_result"' in line and key in line.replace(b'": "', b'":"'):
            return "declined" if DECLINED in line else "approved"
    return None


def _read(path: str, *, tail: int = 0) -> bytes:
    """A transcript's bytes (its last `tail` bytes, or its first BASELINE_BYTES), opened
    only beneath the transcript roots; b"" when it cannot be."""
    from ..capture.source import open_transcript, transcript_roots

    try:
        fd = open_transcript(path, transcript_roots())
    except (OSError, ValueError):
        return b""
    try:
        if tail:
            size = os.fstat(fd).st_size
            os.lseek(fd, max(0, size - tail), os.SEEK_SET)
        return os.read(fd, tail or BASELINE_BYTES)
    except OSError:
        return b""
    finally:
        os.close(fd)


def baseline(c: dict, project: str | None) -> dict:
    """The project's calls and violations before the check landed, from its transcripts."""
    out = dict.fromkeys(BEFORE, 0)
    rule, _ = checkrule.parse(c["rule"])
    if rule is None or not project:
        return out
    d = os.path.join(paths.claude_projects_dir(), paths.project_slug(project))
    try:
        names = [n for n in os.listdir(d) if n.endswith(".jsonl")]
        files = sorted(names, key=lambda n: -os.lstat(os.path.join(d, n)).st_mtime)
    except OSError:
        return out
    home = os.path.expanduser("~")
    for n in files[:BASELINE_FILES]:
        calls, hits = _scan(os.path.join(d, n), rule, project, home, float(c.get("since") or 0))
        out["before_calls"] += calls
        out["before_violations"] += hits
        out["before_sessions"] += hits > 0
    return out


def _scan(path: str, rule, project: str, home: str, since: float) -> tuple[int, int]:
    calls = hits = 0
    for _, b in tool_uses(_read(path).split(b"\n"),
                          lambda rec: not rec.get("isSidechain") and _before(rec, since)):
        if b.get("name") not in rule.tools():
            continue
        hit = checkrule.match(rule, b["name"], b.get("input"), project, home)
        if hit is not None:
            calls += 1
            hits += hit
    return calls, hits


def _before(rec: dict, since: float) -> bool:
    ts = rec.get("timestamp")
    if not since or not isinstance(ts, str):
        return not since
    try:
        at = datetime.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return False
    return at < since


def fill_baselines(sd, checks: list[dict]) -> None:
    """Compute the baseline of each project-layer check that has none yet (blocking)."""
    with _LOCK:
        data = load(sd)
        changed = False
        for c in checks:
            if c["root"] is None:
                continue
            e = _entry(data, c)
            if c["root"] not in e["projects"]:
                _project(e, c["root"], c)
                changed = True
        if changed:
            _save(sd, data)


def figures(sd, c: dict) -> list[CheckAdherence]:
    """The counts of one check, a row per project, as the replies carry them."""
    e = load(sd).get(c["dir"])
    if not isinstance(e, dict) or e.get("rule") != c["rule"]:
        return []
    out = []
    for project, p in sorted((e.get("projects") or {}).items()):
        if isinstance(p, dict):
            counts: dict[str, int] = {k: v for k in COUNTS + BEFORE
                                      if type(v := p.get(k)) is int}
            out.append(CheckAdherence(project=project or None, tool=c["tool"], **counts))
    return out


def attach(sd, infos: list) -> None:
    """Give each live skill of `infos` that has a check its check and its figures."""
    from .checktable import live_checks, skill_check

    checks = {c["dir"]: c for c in live_checks(sd)}
    for i in infos:
        c = checks.get(i.path) if i.status == "live" else None
        if c is not None:
            i.check = skill_check(c)
            i.check.adherence = figures(sd, c)


def in_words(c: SkillCheck | None) -> str:
    """A check and its figures in a line per project ("" without a check)."""
    if c is None:
        return ""
    rows = [f"{a.project or 'no project'}: {adherence_line(a)}" for a in c.adherence]
    return f"{c.rule} ({c.action})" + ("; " + "; ".join(rows) if rows else "")


def insisted(c: SkillCheck | None) -> int:
    """Evidence that the lesson is wrong: asks the user approved, and denies the user insisted
    on (the next call broke the rule again). Counted as `harmful` in the lifecycle, with the
    verdicts' bounds."""
    return sum(a.approved + a.repeated for a in c.adherence) if c is not None else 0


def explained(d, c: SkillCheck | None):
    """A `harmful` decision's reason with the adherence evidence that went into it."""
    n = insisted(c)
    if d.reason != "harmful" or not n or c is None:
        return d
    approved = sum(a.approved for a in c.adherence)
    extra = (f"; its check {c.rule}: {approved} asks approved, {n - approved} denies "
             "insisted on")
    return dataclasses.replace(d, detail=(d.detail or "harmful") + extra)


def acted(c: SkillCheck | None) -> int:
    """Calls the check acted on (reminded, asked, denied): uses of the lesson for the
    lifecycle. A check that never matched adds none, so it is no evidence of help and the
    skill's dormancy is judged as for any other."""
    return sum(a.reminded + a.asked + a.denied for a in c.adherence) if c is not None else 0


def lessons(sd, checks: list[dict]) -> list[LessonCheck]:
    """Each of `checks` (the ones the hook holds calls against now) with its figures."""
    from .checktable import skill_check

    out = []
    for c in checks:
        sc = skill_check(c)
        sc.adherence = figures(sd, c)
        out.append(LessonCheck(skill=c["skill"], layer=c["layer"], check=sc))
    return out
