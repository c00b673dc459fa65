"""The promoter's stored records as typed schemas (landing records in flight, history,
provenance, archive meta), and the one place skill history is read and written.

Records stay JSON documents on disk. A landing record in flight is its Struct in the promoter;
history entries, provenance and archive meta stay dicts (extra keys a newer or older version
wrote are kept untouched). What a reader accepts is decided here, by decoding against these
Structs: a record not of our shape is treated as absent, never half-trusted.
Additive evolution only: new fields get defaults, types never change.
"""

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from typing import Any, Literal

import msgspec

from ..persist import quarantine
from ..persist.dirs import write_private


class HistoryEntry(msgspec.Struct, kw_only=True):
    """One version of a skill directory, as the promoter landed it. Besides these, an entry
    carries what the landing knew (at, target, layer, name, source, intent, reason, evidence,
    previous, archive, commit...), kept as written and not relied on by readers."""

    landing: str
    action: str
    version: int
    files: dict[str, str]  # relative path -> blob sha256 (provenance excluded)


class History(msgspec.Struct, kw_only=True):
    """`history/<key>.json`: every version landed at one target path, oldest first."""

    target: str
    entries: list[HistoryEntry]


class ProvenanceLanding(msgspec.Struct, kw_only=True):
    landing: str
    action: str
    version: int
    at: float
    skill_md: str | None = None
    previous: str | None = None
    evidence: str | None = None


class Provenance(msgspec.Struct, kw_only=True):
    """`.autoharness/provenance.json` inside a landed skill: who landed each version, why."""

    target: str
    landings: list[ProvenanceLanding]


class ArchivePlan(msgspec.Struct, kw_only=True):
    """An archive's meta.json as its landing record plans it (the path is added on apply)."""

    name: str
    layer: Literal["project", "user"]
    target: str
    landing: str
    archived_at: float
    anchor: str | None = None
    version: int | None = None


class ArchiveMeta(ArchivePlan, kw_only=True):
    """`archive/<name>/<landing>/meta.json`: where an archived skill came from."""

    path: str


class GitPlan(msgspec.Struct, kw_only=True):
    """A landing into a git-mode mirror: the commit it is planned on, and its message."""

    base: str | None
    message: str


class _Landing(msgspec.Struct, kw_only=True, tag_field="op"):
    """A landing record in flight, as the promoter builds, journals and applies it. `history`
    is the entry appended to the target's history once the landing is applied: a
    `HistoryEntry` with every other key the landing knew kept as it is."""

    id: str
    target: str
    anchor: str | None
    history: dict[str, Any]
    git: GitPlan | None = None


class WriteLanding(_Landing, tag="write"):
    """`pending/<landing>.json` of a landing that writes files: each write is (path, blob of
    the new bytes, blob of the bytes it replaces or None), in the order they are applied."""

    created_dir: bool
    writes: list[tuple[str, str, str | None]]
    removes: list[tuple[str, str]]  # (path, blob of the bytes removed)


class ArchiveLanding(_Landing, tag="archive"):
    """`pending/<landing>.json` of an archive: the skill moves to `archive_to`; `meta` (an
    `ArchivePlan`, other keys kept) becomes its meta.json."""

    archive_to: str
    meta: dict[str, Any]


Landing = WriteLanding | ArchiveLanding


def _conforms(data: object, schema: object) -> bool:
    try:
        msgspec.convert(data, schema, strict=True)
    except msgspec.ValidationError:
        return False
    return True


def parse_provenance(data: bytes) -> dict | None:
    """A provenance record from its bytes, or None unless it has our shape with at least one
    well-typed landing."""
    try:
        rec = json.loads(data)
    except (ValueError, RecursionError):  # garbage, bad UTF-8, huge ints, deep nesting
        return None
    if not _conforms(rec, Provenance) or not rec["landings"]:
        return None
    return rec


def read_landing(data: bytes) -> WriteLanding | ArchiveLanding | None:
    """A pending landing record from its bytes, or None unless it has our shape (recover()
    replays only those)."""
    try:
        rec = msgspec.json.decode(data, type=Landing)
    except (msgspec.DecodeError, RecursionError):  # ValidationError included
        return None
    ok = _conforms(rec.history, HistoryEntry) and (
        not isinstance(rec, ArchiveLanding) or _conforms(rec.meta, ArchivePlan))
    return rec if ok else None


# ---- history: read and written here only ---------------------------------------------------

def history_path(state: str, target: str) -> str:
    """The file holding every landing recorded for the skill directory `target`."""
    return os.path.join(state, "history",
                        # fsencode: a directory name need not be UTF-8 (same bytes otherwise)
                        hashlib.sha256(os.fsencode(target)).hexdigest()[:32] + ".json")


def read_json(path: str, schema: object) -> Any:
    """The JSON document at `path` (as dicts) if it is of `schema`, else None."""
    try:
        with open(path, "rb") as f:
            data = json.load(f)
    except (OSError, ValueError, RecursionError):  # garbage, bad UTF-8, huge ints, deep nesting
        return None
    return data if _conforms(data, schema) else None


def read_history(state: str, target: str) -> list[dict]:
    """The landings autoharness recorded for `target` (oldest first); [] when there are none
    or the file is not of our shape."""
    data = read_json(history_path(state, target), History)
    return data["entries"] if data and data["target"] == target else []


def histories(state: str) -> Iterator[tuple[str, list[dict]]]:
    """(target, its landings) for every history of our shape in the state dir."""
    d = os.path.join(state, "history")
    for name in sorted(os.listdir(d) if os.path.isdir(d) else ()):
        data = read_json(os.path.join(d, name), History)
        if data and history_path(state, data["target"]).endswith(name):
            yield data["target"], data["entries"]


def append_history(state: str, entry: dict, *,
                   write: Callable[[str, bytes], None] = write_private) -> None:
    """Add one landing to its target's history (idempotent: recover() may replay it), written
    whole and atomically (`write(path, data)`)."""
    path = history_path(state, entry["target"])
    entries = read_history(state, entry["target"])
    if any(e["landing"] == entry["landing"] for e in entries):
        return  # replayed by recover(): already recorded
    if not entries and os.path.exists(path):
        # Unreadable (we never write an empty one): quarantined for the operator, not lost.
        quarantine.set_aside(path, why="not a skill history")
    entries.append(entry)
    data = {"target": entry["target"], "entries": entries}
    write(path, json.dumps(data, indent=1).encode())
