"""Feedback: the reflector's verdicts on skills, grounded in what the window shows.

The model judges; the code checks that the judgement is about what happened. A verdict is
accepted only when
- the skill exists in the layer it names (a hand-written skill's verdicts are accepted and
  shown like any other, but nothing ever acts on them: the lifecycle judges autoharness's
  skills only),
- its evidence is a verbatim quote of the window and carries no secret (checked at intake),
- it is the only verdict on that skill for the window (intake),
- `helped`, `ignored` and `harmful` come with the window showing the skill *loaded* (a `Skill`
  tool call naming it, or a `Read` of its `SKILL.md`), and `missed` with the window not
  showing it loaded.

An accepted verdict is one entry (`action: feedback`) in the skill's history, keyed by the
verdict's id, so recording it again after a crash changes nothing. Counts are read back from
the history: those since the skill's last `create` or `restore` (a restored skill starts
afresh, like its probation). `missed` quotes since the last change of the skill (or the last
repair asked for) are what a description repair must quote.
"""

import json
import re

from claude_autoharness.daemon.proposals import LOADED_VERDICTS, VERDICTS, Finding

FEEDBACK = "feedback"
REPAIR_ASKED = "repair_asked"  # history action: a description repair was asked of the curator
STALE_MARK = "stale"  # history action: the skill names paths that are gone
FRESH_MARK = "fresh"  # history action: they are back (or were repaired away)
MARKS = (FEEDBACK, REPAIR_ASKED, STALE_MARK, FRESH_MARK, "held")  # entries that change no file
STARTS = ("create", "restore")  # counts run from here
REPAIR_AFTER_MISSED = 2
MAX_QUOTE_CHARS = 500

# A `Skill` call or a `Read` of a SKILL.md in a record the JSON parse could not read (a
# clipped record): the tool_use's name, then its input's skill or file path.
_SKILL_CALL = re.compile(r'"name"\s*:\s*"Skill"\s*,\s*"input"\s*:\s*\{[^{}]*?'
                         r'"(?:skill|command|name)"\s*:\s*"([^"\\]+)"')
_READ_CALL = re.compile(r'"name"\s*:\s*"Read"\s*,\s*"input"\s*:\s*\{[^{}]*?'
                        r'"file_path"\s*:\s*"([^"]*?SKILL\.md)"')


def _skill_name(ref: str) -> str:
    return ref.strip().lstrip("/").split(":")[-1]  # plugin skills: "plugin:name"


def _from_path(path: str) -> str | None:
    parts = path.replace("\\", "/").rstrip("/").split("/")
    return parts[-2] if len(parts) >= 2 and parts[-1] == "SKILL.md" else None


def _walk(node, out: set[str]) -> None:
    if isinstance(node, dict):
        if node.get("type") == "tool_use" and isinstance(node.get("input"), dict):
            args = node["input"]
            if node.get("name") == "Skill":
                ref = args.get("skill") or args.get("command") or args.get("name")
                if isinstance(ref, str) and ref:
                    out.add(_skill_name(ref))
            elif node.get("name") == "Read" and isinstance(args.get("file_path"), str):
                name = _from_path(args["file_path"])
                if name:
                    out.add(name)
        for v in node.values():
            _walk(v, out)
    elif isinstance(node, list):
        for v in node:
            _walk(v, out)


def loaded_skills(window: str) -> set[str]:
    """The names of the skills the window shows loaded: the agent's own tool calls only (a
    `Skill` call, or a `Read` of `<name>/SKILL.md`), never a mention in text."""
    out: set[str] = set()
    for line in window.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            _walk(json.loads(line), out)
        except (ValueError, RecursionError):
            out.update(_skill_name(m) for m in _SKILL_CALL.findall(line))
            out.update(n for m in _READ_CALL.findall(line) if (n := _from_path(m)))
    return out


def _refused(code: str, message: str) -> Finding:
    return Finding(family="grounded", code=code, message=message)


def ground(verdict: str, skill: str, layer: str, window: str | None, *, exists: bool,
           loaded: set[str] | None = None) -> list[Finding]:
    """Why this verdict cannot be accepted ([] when it can). `loaded`: `loaded_skills(window)`
    when the caller has it already."""
    if verdict not in VERDICTS:
        return [_refused("verdict", f"unknown verdict {verdict!r}")]
    if not exists:
        return [_refused("missing", f"no skill {skill} in the {layer} layer")]
    if window is None:
        return [_refused("no_window", "no recorded window to ground the verdict in")]
    was_loaded = skill in (loaded_skills(window) if loaded is None else loaded)
    if verdict in LOADED_VERDICTS and not was_loaded:
        return [_refused("not_loaded", f"`{verdict}` needs the window to show {skill} loaded "
                                       "(its Skill call or its SKILL.md read); it does not")]
    if verdict == "missed" and was_loaded:
        return [_refused("loaded", f"`missed`, but the window shows {skill} loaded")]
    return []


def entry(record, target: str, layer: str, name: str, version: int, now: float,
          quote: str) -> dict:
    """The history entry of one accepted verdict (`record`: its VerdictRecord)."""
    v = record.verdict
    return {"landing": "fb-" + record.id, "action": FEEDBACK, "version": version, "files": {},
            "at": now, "target": target, "layer": layer, "name": name,
            "source": record.source, "job": record.job_id, "session": record.session_id,
            "verdict": v.verdict, "quote": quote[:MAX_QUOTE_CHARS],
            "reason": f"{v.verdict}: grounded in job {record.job_id}"}


def _since(entries: list[dict], starts: tuple[str, ...]) -> list[dict]:
    last = max((i for i, e in enumerate(entries) if e.get("action") in starts), default=-1)
    return entries[last + 1:]


def counts(entries: list[dict]) -> dict[str, int]:
    """Accepted verdicts per kind since the skill landed or was restored."""
    out = dict.fromkeys(VERDICTS, 0)
    for e in _since(entries, STARTS):
        if e.get("action") == FEEDBACK and e.get("verdict") in out:
            out[e["verdict"]] += 1
    return out


def verdicts(entries: list[dict]) -> list[dict]:
    """The accepted verdicts since landing or restore, oldest first (for `skills show`)."""
    return [{"verdict": e.get("verdict"), "quote": e.get("quote"), "at": e.get("at"),
             "job": e.get("job")}
            for e in _since(entries, STARTS) if e.get("action") == FEEDBACK]


def _missed(entries: list[dict], also: tuple[str, ...] = ()) -> list[str]:
    writes = tuple(a for a in {str(e.get("action")) for e in entries} if a not in MARKS)
    return [str(e["quote"]) for e in _since(entries, writes + also)
            if e.get("action") == FEEDBACK and e.get("verdict") == "missed" and e.get("quote")]


def missed_quotes(entries: list[dict]) -> list[str]:
    """The `missed` quotes a description repair is to address: those since the skill last
    changed (any landing that writes it: a repair starts the count again)."""
    return _missed(entries)


def needs_repair(entries: list[dict]) -> bool:
    """Missed at least twice since it last changed, and since a repair was last asked for
    (one request per two new misses, however often the lifecycle runs)."""
    return len(_missed(entries, (REPAIR_ASKED,))) >= REPAIR_AFTER_MISSED
