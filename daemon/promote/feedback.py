"""Feedback: the reflector's verdicts on skills, grounded in what the window shows.

The model judges; the code checks that the judgement is about what happened. A verdict is
accepted only when
- the skill exists in the layer it names (a hand-written skill's verdicts are accepted and
  shown like any other, but nothing ever acts on them: the lifecycle judges autoharness's
  skills only),
- its evidence is a verbatim quote of the window and carries no secret (checked at intake),
- it is the only accepted verdict on that skill for the window (an invalid one before it
  takes no one's place),
- `helped`, `ignored` and `harmful` come with the window showing the skill *loaded* (a `Skill`
  call that resolves to it, or a `Read` of its own `SKILL.md`: see `loads`), and `missed`
  with the session not showing it loaded, in the window or before it.

An accepted verdict is one entry (`action: feedback`) in the skill's history, keyed by the
verdict's id, so recording it again after a crash changes nothing. It belongs to the version
of the skill that was live when its window ended (`judged_version`). Counts are read back from
the history, per version: those on the current text (since its create, update, repair or
restore; a restored skill starts afresh, like its probation); the older ones stay in history
and in `skills show`. The current version's `missed` quotes are what a description repair is
sent and must quote.
"""

from ..proposals import LOADED_VERDICTS, VERDICTS, Finding
from .evidence import evidence_in_window

FEEDBACK = "feedback"
REPAIR_ASKED = "repair_asked"  # history action: a description repair was asked of the curator
STALE_MARK = "stale"  # history action: the skill names paths that are gone
FRESH_MARK = "fresh"  # history action: they are back (or were repaired away)
MARKS = (FEEDBACK, REPAIR_ASKED, STALE_MARK, FRESH_MARK, "held")  # entries that change no file
REPAIR_AFTER_MISSED = 2
MAX_QUOTE_CHARS = 500

def _refused(code: str, message: str) -> Finding:
    return Finding(family="grounded", code=code, message=message)


def ground(verdict: str, skill: str, layer: str, window: str | None, *, exists: bool,
           loaded: bool, loaded_before: bool = False) -> list[Finding]:
    """Why this verdict cannot be accepted ([] when it can). `loaded`: the window shows this
    skill of this layer loaded (`loads.resolve`); `loaded_before`: the session loaded it
    before the window ended."""
    if verdict not in VERDICTS:
        return [_refused("verdict", f"unknown verdict {verdict!r}")]
    if not exists:
        return [_refused("missing", f"no skill {skill} in the {layer} layer")]
    if window is None:
        return [_refused("no_window", "no recorded window to ground the verdict in")]
    if verdict in LOADED_VERDICTS and not loaded:
        return [_refused("not_loaded", f"`{verdict}` needs the window to show the {layer} "
                                       f"skill {skill} loaded (its Skill call or a read of its "
                                       "own SKILL.md); it does not")]
    if verdict == "missed" and loaded:
        return [_refused("loaded", f"`missed`, but the window shows {skill} loaded")]
    if verdict == "missed" and loaded_before:
        return [_refused("loaded_before", f"`missed`, but the session loaded {skill} earlier")]
    return []


def entry(record, target: str, layer: str, name: str, version: int, now: float,
          quote: str) -> dict:
    """The history entry of one accepted verdict (`record`: its VerdictRecord; `version`: the
    skill's version the window saw, `judged_version`)."""
    v = record.verdict
    return {"landing": "fb-" + record.id, "action": FEEDBACK, "version": version, "files": {},
            "at": now, "target": target, "layer": layer, "name": name,
            "source": record.source, "job": record.job_id, "session": record.session_id,
            "verdict": v.verdict, "quote": quote[:MAX_QUOTE_CHARS],
            "reason": f"{v.verdict}: grounded in job {record.job_id}"}


def _is_landing(e: dict) -> bool:
    return e.get("action") not in MARKS


def _starts_count(e: dict) -> bool:
    """A landing that puts a new text live (a create, update, patch, revert, a file added or
    removed, a restore): verdicts on the text before it are not this version's."""
    return _is_landing(e) and e.get("action") != "archive"


def judged_version(entries: list[dict], window_at: float | None) -> int:
    """The version of the skill live when a window ended at `window_at` (None: now): a
    verdict belongs to the text that was loaded, not to one that landed after."""
    landings = [e for e in entries if _is_landing(e)]
    if window_at:
        before = [e for e in landings if float(e.get("at") or 0) <= window_at]
        if before:
            return int(before[-1]["version"])
    return int(landings[-1]["version"]) if landings else 0


def _current(entries: list[dict]) -> tuple[int, list[dict]]:
    """(the current version, the entries since it landed)."""
    last = max((i for i, e in enumerate(entries) if _starts_count(e)), default=-1)
    if last < 0:
        return 0, entries
    return int(entries[last]["version"]), entries[last + 1:]


def _this_version(entries: list[dict]) -> list[dict]:
    """The accepted verdicts on the current version, oldest first."""
    version, after = _current(entries)
    return [e for e in after if e.get("action") == FEEDBACK
            and int(e.get("version") or 0) >= version]


def counts(entries: list[dict]) -> dict[str, int]:
    """Accepted verdicts per kind on the current version (since its create, update, repair
    or restore): what the lifecycle judges."""
    out = dict.fromkeys(VERDICTS, 0)
    for e in _this_version(entries):
        if e.get("verdict") in out:
            out[e["verdict"]] += 1
    return out


def verdicts(entries: list[dict]) -> list[dict]:
    """Every accepted verdict in the skill's history, oldest first, with the version it
    judged and whether that is the current one (for `skills show`)."""
    current = {id(e) for e in _this_version(entries)}
    return [{"verdict": e.get("verdict"), "quote": e.get("quote"), "at": e.get("at"),
             "job": e.get("job"), "version": e.get("version"), "current": id(e) in current}
            for e in entries if e.get("action") == FEEDBACK]


def missed_quotes(entries: list[dict]) -> list[str]:
    """The `missed` quotes a description repair is to address: those on the current version
    (a repair starts the count again)."""
    return [str(e["quote"]) for e in _this_version(entries)
            if e.get("verdict") == "missed" and e.get("quote")]


def repair_asked(entries: list[dict]) -> bool:
    """A description repair was asked of the curator since the current version landed."""
    return any(e.get("action") == REPAIR_ASKED for e in _current(entries)[1])


def needs_repair(entries: list[dict]) -> bool:
    """Missed at least twice on the current version, and since a repair was last asked for
    (one request per two new misses, however often the lifecycle runs)."""
    version, after = _current(entries)
    last_ask = max((i for i, e in enumerate(after) if e.get("action") == REPAIR_ASKED),
                   default=-1)
    new = [e for e in after[last_ask + 1:] if e.get("action") == FEEDBACK
           and e.get("verdict") == "missed" and int(e.get("version") or 0) >= version]
    return len(new) >= REPAIR_AFTER_MISSED


def repair_findings(entries: list[dict], action: str, evidence: str, name: str
                    ) -> list[Finding]:
    """A curator's `update` or `patch` of a skill whose repair was asked is that repair: it
    must quote a window where the skill was missed (one of its `missed` quotes)."""
    if action not in ("update", "patch") or not repair_asked(entries):
        return []
    if any(evidence_in_window(evidence, q) for q in missed_quotes(entries)):
        return []
    return [Finding(family="attributable", code="repair_unquoted",
                    message=f"a repair of {name} must quote a window where it was missed "
                            "(one of the `missed` quotes it was sent with)")]
