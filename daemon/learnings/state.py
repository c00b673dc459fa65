"""Per-project marker state: what has been saved, so it is not reported again.

Keyed by the Claude Code project slug. Changed only by a save, never by a scan or a report: a
crash before the save finishes re-reports rather than loses.

Users of `atl` already have `$CLAUDE_CONFIG_DIR/state/learning-capture-state.json`
(`{"projects": {slug: {"lastProcessedAt": RFC3339, "processedMarkers": [id, ...]}}}`). It seeds a
project's state on first use so migrating users are not re-shown old markers. It belongs to atl:
read leniently, never written.
"""

import hashlib
import json
import os
from collections.abc import Iterable
from datetime import datetime

import msgspec

from ...protocol import paths
from ..persist import document
from ..persist.dirs import flocked

MAX_PROCESSED = 5_000
MAX_QUEUED_INTENTS = 5_000


class ProjectState(msgspec.Struct, kw_only=True):
    last_processed_at: float = 0.0  # epoch seconds; 0 = never saved
    processed_ids: list[str] = []  # oldest first, FIFO-capped
    # marker ids whose intent was already handed to the queue: a rerun after a crash between
    # queueing and the state update does not queue the lesson twice
    queued_intents: list[str] = []


def record(state: ProjectState, ids: Iterable[str], processed_at: float | None) -> ProjectState:
    """Pure: add ids (dedup, FIFO cap) and move `last_processed_at` forward only."""
    have = set(state.processed_ids)
    new = [i for i in dict.fromkeys(ids) if i not in have]
    have.update(new)
    last = state.last_processed_at if processed_at is None else max(state.last_processed_at, processed_at)
    queued = [q for q in state.queued_intents if q not in have]  # saved: no longer pending
    return ProjectState(last_processed_at=last, processed_ids=(state.processed_ids + new)[-MAX_PROCESSED:],
                        queued_intents=queued)


def note_intents(state: ProjectState, ids: Iterable[str]) -> ProjectState:
    """Pure: remember marker ids whose intent was queued (FIFO-capped)."""
    q = state.queued_intents + [i for i in dict.fromkeys(ids) if i not in state.queued_intents]
    return msgspec.structs.replace(state, queued_intents=q[-MAX_QUEUED_INTENTS:])


def state_file(slug: str) -> str:
    # slugs of deep paths can pass the 255-byte file-name limit: shorten, keep unique
    name = slug
    if len(slug) > 200:
        name = f"{slug[:150]}-{hashlib.sha256(slug.encode()).hexdigest()[:16]}"
    return os.path.join(paths.state_dir(), "learnings", f"{name}.json")


def atl_state_file() -> str:
    return os.path.join(paths.claude_dir(), "state", "learning-capture-state.json")


def _parse_time(value: object) -> float:
    """RFC3339 (Go writes up to 9 fractional digits) or epoch seconds; 0.0 if unreadable."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) if value > 0 else 0.0
    if not isinstance(value, str) or not value.strip():
        return 0.0
    s = value.strip().replace("Z", "+00:00").replace("z", "+00:00")
    if "." in s:  # Python 3.11 takes at most 6 fractional digits
        head, _, tail = s.partition(".")
        digits = len(tail) - len(tail.lstrip("0123456789"))
        s = f"{head}.{tail[:min(digits, 6)]}{tail[digits:]}" if digits else head + tail
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        return 0.0
    if dt.tzinfo is None:
        return 0.0  # ambiguous; treat as unknown rather than guess a zone
    ts = dt.timestamp()
    return ts if ts > 0 else 0.0  # Go's zero time (year 1) means "never"


def read_atl(slug: str) -> ProjectState | None:
    """atl's record for `slug`, or None. Accepts `{"projects": {...}}` and a flat `{slug: ...}`,
    camelCase or snake_case keys; anything unreadable is ignored."""
    try:
        with open(atl_state_file(), "rb") as f:
            data = json.loads(f.read())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    projects = data["projects"] if isinstance(data.get("projects"), dict) else data
    entry = projects.get(slug)
    if not isinstance(entry, dict):
        return None
    when = entry.get("lastProcessedAt", entry.get("last_processed_at"))
    ids = entry.get("processedMarkers", entry.get("processed_ids"))
    ids = [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []
    return ProjectState(last_processed_at=_parse_time(when), processed_ids=ids[-MAX_PROCESSED:])


def load(slug: str) -> ProjectState:
    """Our state for `slug`; on first use (no file of ours yet) atl's, else empty. A corrupt
    state file is quarantined, never fatal: the worst case is a re-report."""
    return document.load_or_set_aside(state_file(slug), ProjectState) or read_atl(slug) \
        or ProjectState()


def save(slug: str, state: ProjectState) -> None:
    path = state_file(slug)
    paths.make_private_dirs(os.path.dirname(path))
    document.save(path, state)


class LearningState:
    """The project's state as a save sees it: read once, each change persisted at once."""

    def __init__(self, slug: str) -> None:
        self.slug = slug
        self.state = load(slug)

    @property
    def processed_ids(self) -> frozenset[str]:
        return frozenset(self.state.processed_ids)

    @property
    def queued_intents(self) -> frozenset[str]:
        return frozenset(self.state.queued_intents)

    @property
    def last_processed_at(self) -> float:
        return self.state.last_processed_at

    def _update(self, change) -> None:
        with flocked(state_file(self.slug) + ".lock"):  # vs an offline CLI's read-modify-write
            current = load(self.slug)  # merge with whatever another writer saved meanwhile
            self.state = change(current)
            save(self.slug, self.state)

    def record(self, ids: Iterable[str], processed_at: float | None) -> None:
        ids = list(ids)
        self._update(lambda s: record(s, ids, processed_at))

    def note_intents(self, ids: Iterable[str]) -> None:
        ids = list(ids)
        self._update(lambda s: note_intents(s, ids))
