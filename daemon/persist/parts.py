"""The snapshot's fields that no per-change record carries (counters, tokens, the watcher's
and markers' tables...), journaled as the leaves that changed since they were last written, and
applied back, in journal order, when the state is loaded."""

from typing import Any

import msgspec

from .journal import encoder
from .state import Leaf, PartsRecord, State

_OWN_RECORDS = frozenset({"schema", "journal_seq", "sessions", "jobs", "turns", "seen_ids"})


class Parts:
    """The snapshot's fields that no per-change record carries (counters, tokens, the
    watcher's and markers' tables...), journaled as what changed since they were last written:
    each field is flattened to its leaves (dict keys down to `DEPTH` levels) and a leaf whose
    encoding differs from the one last written goes into a "parts" record, so a persist writes
    the transcripts whose offsets moved, not the whole table."""

    # every field but those per-change records carry (or that only a snapshot means): a field
    # added later is journaled as it changes without anyone remembering to
    FIELDS = tuple(f for f in State.__struct_fields__ if f not in _OWN_RECORDS)
    DEPTH = 4

    def __init__(self):
        self._written: dict[tuple[str, ...], bytes] = {}

    def leaves(self, state: State) -> dict[tuple[str, ...], bytes]:
        out: dict[tuple[str, ...], bytes] = {}
        for name in self.FIELDS:
            _flatten(msgspec.to_builtins(getattr(state, name)), (name,), out, self.DEPTH)
        return out

    def reset(self, state: State) -> None:
        """What `state` holds is durable (just loaded, or just snapshotted)."""
        self._written = self.leaves(state)

    def changes(self, state: State) -> tuple[list[tuple[list[str], Leaf]], list[list[str]]]:
        """What changed since the last `changes` (or `reset`); taken as written."""
        now = self.leaves(state)
        old = self._written
        put = [(list(k), msgspec.json.decode(v)) for k, v in now.items() if old.get(k) != v]
        gone = [list(k) for k in old if k not in now]
        self._written = now
        return put, gone

    def undo(self, put: list, gone: list) -> None:
        """The record of `changes` was not written: the next `changes` must repeat it."""
        for k, _ in put:
            self._written.pop(tuple(k), None)
        for k in gone:
            self._written[tuple(k)] = b""


def _flatten(value, path: tuple[str, ...], out: dict, depth: int) -> None:
    if isinstance(value, dict) and value and len(path) < depth:
        for k, v in value.items():
            _flatten(v, path + (str(k),), out, depth)
    else:
        out[path] = encoder.encode(value)


class PartsReplay:
    """Applies "parts" records to a state being loaded, in journal order: each field a record
    touches is worked on as plain data and converted back once, at `finish`. An event record
    replayed after a parts record adds its counts to that same data (`count_event`), so the
    counters come out as they were, whatever the order of the two kinds."""

    def __init__(self, state: State):
        self.state = state
        self.fields = {f.name: f.type for f in msgspec.structs.fields(State)}
        self.work: dict[str, Any] = {}

    def _field(self, name: str) -> Any:
        if name not in self.work:
            self.work[name] = msgspec.to_builtins(getattr(self.state, name))
        return self.work[name]

    def add(self, rec: PartsRecord) -> None:
        for path in rec.unset:
            if path[0] not in self.fields:
                continue
            if len(path) == 1:  # an empty table that now has entries: they follow
                self.work[path[0]] = {}
                continue
            self._field(path[0])
            _unset(self.work, path)
        for path, value in rec.set:
            if path[0] not in self.fields:
                continue  # a field a later version added: not ours to keep
            self._field(path[0])
            _set(self.work, path, value)

    def count_event(self, kind: str) -> None:
        if "events" not in self.work:
            ev = self.state.events
            ev.received += 1
            ev.by_kind[kind] = ev.by_kind.get(kind, 0) + 1
            return
        ev_data = self.work["events"]
        ev_data["received"] = ev_data.get("received", 0) + 1
        by_kind = ev_data.setdefault("by_kind", {})
        by_kind[kind] = by_kind.get(kind, 0) + 1

    def finish(self) -> None:
        for name, value in self.work.items():
            try:
                setattr(self.state, name, msgspec.convert(value, self.fields[name]))
            except msgspec.ValidationError:
                continue  # the snapshot's value stands
        self.work = {}


def _set(root: dict, path: list[str], value) -> None:
    node = root
    for key in path[:-1]:
        nxt = node.get(key)
        if not isinstance(nxt, dict):
            nxt = node[key] = {}
        node = nxt
    node[path[-1]] = value


def _unset(root: dict, path: list[str]) -> None:
    node = root
    for key in path[:-1]:
        nxt = node.get(key)
        if not isinstance(nxt, dict):
            return
        node = nxt
    node.pop(path[-1], None)
