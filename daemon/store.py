"""Persistence: an atomic snapshot of the daemon state plus an append-only journal.

Acknowledged means journaled: every change an event or a job makes (the session's post-state,
the jobs it created or changed, the event's id) is appended with one `write()` before anyone is
told, so a process crash at any instant loses nothing acknowledged; fsync (against power loss)
is batched by the daemon every `fsync_interval_s`. Records carry post-states, so applying one
twice is harmless. The snapshot only shortens replay: startup = snapshot + journal records newer
than it. A persist appends what changed (`Parts`); the snapshot is rewritten only once the
journal has grown about as large as it, so the bytes written per change do not grow with the
state. The previous snapshot and the journal segments since it are kept: a corrupt snapshot
(quarantined, never fatal) falls back to them and loses nothing.
"""

import os
import threading
import time
from typing import Any

import msgspec

from claude_autoharness.daemon.atomic import AppendFile, fsync_dir, write_atomic
from claude_autoharness.daemon.sessions import Job, Session
from claude_autoharness.protocol import paths
from claude_autoharness.protocol.private import private_problem

SCHEMA = 1


class Counters(msgspec.Struct, kw_only=True):
    received: int = 0
    rejected: int = 0
    by_kind: dict[str, int] = {}
    unknown_kinds: int = 0
    malformed_frames: int = 0
    peer_rejected: int = 0
    spool_replayed: int = 0
    duplicates: int = 0  # events whose id was already counted (a spooled copy, a retry)


class Turns(msgspec.Struct, kw_only=True):
    """Stops of main sessions: every one (the user layer's clock) and per project root."""

    user: int = 0
    projects: dict[str, int] = {}

    def add(self, project: str | None) -> None:
        self.user += 1
        if project:
            self.projects[project] = self.projects.get(project, 0) + 1

    def of(self, layer: str, project: str | None) -> int:
        return self.user if layer == "user" else self.projects.get(project or "", 0)


class State(msgspec.Struct, kw_only=True):
    """The snapshot. Additive evolution only: new fields get defaults, types never change."""

    schema: int = SCHEMA
    journal_seq: int = 0
    saved_at: float = 0.0
    sessions: dict[str, Session] = {}
    jobs: dict[str, Job] = {}
    jobs_done: int = 0
    jobs_failed: int = 0
    events: Counters = msgspec.field(default_factory=Counters)
    paused: bool = False
    tokens: dict[str, int] = {}  # "total", and "day:YYYY-MM-DD"
    watcher: dict = {}
    markers: dict = {}
    project_marks: dict[str, float] = {}  # project root -> last SessionStart promoter summary
    capture: dict = {}
    turns: Turns = msgspec.field(default_factory=Turns)
    reflections_since_curate: int = 0  # reflection jobs done since the curator last ran
    seen_ids: list[str] = []  # the most recent event ids, oldest first


class JournalRecord(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One change. `session` is a post-state without its `tool_ids`, whose additions travel in
    `calls` (a session record stays small however many calls it remembers)."""

    seq: int
    # "event", "calls", "job", "session", "carry" (an older compaction kept it), "turn",
    # "parts" (the snapshot's other fields that changed), "forget" (pruned state)
    op: str
    job: Job | None = None
    jobs: list[Job] = []
    session: Session | None = None
    sessions: list[Session] = []  # more post-states (a flush resets several counters)
    eid: str = ""  # the event's id: a later copy of it counts nothing
    kind: str = ""  # the event's hook_event_name (its counters travel with it)
    calls: list[str] = []  # tool_use ids the session now remembers as counted
    turn: bool = False  # a main session's Stop: one turn of the user layer and of `project`
    project: str | None = None
    at: float = 0.0
    # "parts": (path, value) pairs set, paths deleted; a path starts with a State field name
    set: list[tuple[list[str], msgspec.Raw]] = []
    unset: list[list[str]] = []
    forget_sessions: list[str] = []  # "forget": state pruned (see Book._prune)
    forget_jobs: list[str] = []


_state_decoder = msgspec.json.Decoder(State)
_record_decoder = msgspec.json.Decoder(JournalRecord)
_encoder = msgspec.json.Encoder()


def ensure_private_dir(path: str) -> None:
    """Create `path` (and parents) 0700; refuse one that is not ours or is open to others."""
    paths.make_private_dirs(path)
    check_private_dir(path)


class UnsafeDir(Exception):
    pass


def check_private_dir(path: str) -> None:
    """Raise UnsafeDir, with the exact fix, unless `path` is our own 0700 directory."""
    problem = private_problem(path, fixes={"not_dir": "remove it and restart"})
    if problem is not None:
        raise UnsafeDir(str(problem))


class StateDirMoved(OSError):
    """The state directory is no longer the one the daemon started with: not written."""


_pinned: dict[str, tuple[int, int]] = {}  # directory -> (st_dev, st_ino) when it was checked


def pin_dir(path: str) -> None:
    """Remember `path` (checked private at start): `recheck_dir` compares against it."""
    st = os.lstat(path)
    _pinned[os.path.abspath(path)] = (st.st_dev, st.st_ino)


def recheck_dir(path: str) -> None:
    """Before state is written into a pinned directory: raise StateDirMoved (an OSError, so
    persistence reports and retries it) unless it is still that same private directory of
    ours. A directory swapped for another user's, or for a link, is never written into."""
    d = os.path.abspath(path)
    want = _pinned.get(d)
    if want is None:
        return
    try:
        st = os.lstat(d)
        problem = private_problem(d)
    except OSError:
        st, problem = None, None
    if st is None or (st.st_dev, st.st_ino) != want or problem is not None:
        why = str(problem) if problem else "it was moved or replaced since the daemon started"
        raise StateDirMoved(0, f"not writing into {d}: {why}; stop the daemon, find out who "
                               "changed it, and start again")


def write_private(path: str, data: bytes, *, previous: str | None = None) -> None:
    """Atomically replace a state file (0600), the replaced one kept as `previous` if named;
    never into a state dir swapped since start."""
    recheck_dir(os.path.dirname(path))
    write_atomic(path, data, 0o600, previous=previous)


def quarantine(path: str, qdir: str, *, copy: bool = False) -> str:
    """Move (or copy) a corrupt file aside so it can be inspected; return where it went."""
    ensure_private_dir(qdir)
    dest = os.path.join(qdir, f"{os.path.basename(path)}.{time.strftime('%Y%m%dT%H%M%S')}.{os.getpid()}")
    if copy:
        with open(path, "rb") as src, open(os.open(dest, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as dst:
            dst.write(src.read())
    else:
        os.replace(path, dest)
    return dest


def load_snapshot(path: str, previous: str, qdir: str) -> tuple[State, list[str]]:
    """Load the snapshot; a corrupt one is quarantined and the previous one (kept by
    `write_atomic(previous=...)`) loaded instead, whose journal segments are still there; an
    empty state when neither is readable."""
    quarantined: list[str] = []
    for candidate in (path, previous):
        try:
            with open(candidate, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            continue
        try:
            return _state_decoder.decode(data), quarantined
        except (msgspec.DecodeError, msgspec.ValidationError):
            quarantined.append(quarantine(candidate, qdir))
    return State(), quarantined


def encode_state(state: State) -> bytes:
    return _encoder.encode(state)


def light(session: Session) -> Session:
    """The session as journaled: its remembered tool ids travel separately."""
    if not session.tool_ids and not session.tool_at:
        return session
    return msgspec.structs.replace(session, tool_ids=[], tool_at=[])


class Journal:
    """Append-only JSONL in segments: `path` is appended to; `rotate` (when a snapshot is
    taken) closes it as `<stem>.<last seq>.jsonl` and starts an empty one, and segments a
    snapshot no longer needs are deleted, whole: nothing is ever copied. Replay reads the
    segments, oldest first, then `path` (a journal of one file, as older versions wrote, reads
    the same).

    `append` is one `write()` (the event loop calls it: page cache, no fsync); `sync` fsyncs
    from a worker thread. The lock orders appends against `sync` picking up the file. An
    append that fails (a full disk) leaves no partial line (`AppendFile`) and raises; its
    record is written ahead of the next one that has room, so records stay whole and in
    order."""

    def __init__(self, path: str):
        self.path = path
        self.seq = 0
        self.file = AppendFile(path)
        self.appended = 0  # bytes in the journal since the last rotation
        self._lock = threading.Lock()
        self._unsynced = False
        self._unsynced_dir = False  # a rotation renamed and created files
        self._closed: list[AppendFile] = []  # rotated away, not fsynced yet
        self._unwritten: list[bytes] = []  # records a failed append kept, oldest first

    @property
    def size(self) -> int:
        return self.file.size

    def open(self) -> None:
        recheck_dir(os.path.dirname(self.path))
        self.file.open()
        self.appended = self.file.size + sum(os.path.getsize(p) for _, p in self.segments())

    def close(self) -> None:
        with self._lock:
            for f in self._closed:
                f.close()
            self._closed.clear()
            self.file.close()

    def append(self, op: str, *, job: Job | None = None, jobs: list[Job] | None = None,
               session: Session | None = None, sessions: list[Session] | None = None,
               **fields) -> int:
        with self._lock:
            self.seq += 1
            rec = JournalRecord(seq=self.seq, op=op, job=job, jobs=jobs or [],
                                session=light(session) if session is not None else None,
                                sessions=[light(s) for s in sessions or ()],
                                at=time.time(), **fields)
            # A record a failed append could not write goes first: the caller's state already
            # holds its change, so the post-states recorded after it carry that change too.
            self._unwritten.append(_encoder.encode(rec) + b"\n")
            n = self.file.append(b"".join(self._unwritten))
            self._unwritten.clear()
            self.appended += n
            self._unsynced = True
            return self.seq

    def sync(self) -> None:
        """fsync what was appended (batched: the daemon calls this every fsync_interval_s),
        segments rotated away since the last sync, and the directory after a rotation."""
        with self._lock:
            if not self._unsynced or self.file.fd is None:
                return
            closed, self._closed = self._closed, []
            fd, self._unsynced = os.dup(self.file.fd), False  # fsync unlocked: appends go on
            dir_too, self._unsynced_dir = self._unsynced_dir, False
        try:
            for f in closed:
                try:
                    f.sync()
                finally:
                    f.close()
            os.fsync(fd)
            if dir_too:
                fsync_dir(os.path.dirname(os.path.abspath(self.path)))
        except BaseException:
            with self._lock:
                self._unsynced = True
                self._unsynced_dir = self._unsynced_dir or dir_too
            raise
        finally:
            os.close(fd)

    def segments(self) -> list[tuple[int, str]]:
        """(last seq, path) of each closed segment, oldest first."""
        d = os.path.dirname(os.path.abspath(self.path))
        stem, ext = os.path.splitext(os.path.basename(self.path))
        out = []
        try:
            names = os.listdir(d)
        except FileNotFoundError:
            return []
        for name in names:
            middle = name[len(stem) + 1:-len(ext)] if name.startswith(stem + ".") \
                and name.endswith(ext) else ""
            seq, _, extra = middle.partition(".")
            if seq.isdigit() and (not extra or extra.isdigit()):
                out.append((int(seq), os.path.join(d, name)))
        return sorted(out)

    def rotate(self) -> None:
        """Close the file as a segment named by its last record's seq and start an empty one
        (on the loop, between appends: a snapshot encoded just now covers the whole segment).
        Cheap: two renames' worth of metadata; the old file is fsynced by the next `sync`."""
        with self._lock:
            if self.file.size == 0 or self.file.fd is None:
                return
            stem, ext = os.path.splitext(self.path)
            seg = f"{stem}.{self.seq:020d}{ext}"
            n = 0
            while os.path.lexists(seg):  # never replace a segment (the same seq twice)
                n += 1
                seg = f"{stem}.{self.seq:020d}.{n}{ext}"
            recheck_dir(os.path.dirname(self.path))
            os.rename(self.path, seg)
            fresh = AppendFile(self.path)
            try:
                fresh.open()
            except OSError:
                os.rename(seg, self.path)  # keep appending where we were
                raise
            self._closed.append(self.file)
            self.file = fresh
            self.appended = 0
            self._unsynced = self._unsynced_dir = True

    def drop_segments(self, upto_seq: int) -> None:
        """Delete the segments whose records are all at or below `upto_seq` (a durable
        snapshot that is not the newest covers them: the newest may turn out unreadable)."""
        for last, path in self.segments():
            if last <= upto_seq:
                os.unlink(path)

    def replay(self, after_seq: int, qdir: str) -> tuple[list[JournalRecord], list[str]]:
        """Records newer than `after_seq`, from the segments and the file. A torn or garbage
        line is skipped and its file copied to quarantine, so nothing readable is lost and the
        damage stays inspectable."""
        out: list[JournalRecord] = []
        quarantined: list[str] = []
        for path in [p for _, p in self.segments()] + [self.path]:
            try:
                with open(path, "rb") as f:
                    lines = f.read().split(b"\n")
            except FileNotFoundError:
                continue
            bad = 0
            for line in lines:
                if not line.strip():
                    continue
                try:
                    rec = _record_decoder.decode(line)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    bad += 1
                    continue
                self.seq = max(self.seq, rec.seq)
                if rec.seq > after_seq:
                    out.append(rec)
            if bad:
                quarantined.append(quarantine(path, qdir, copy=True))
        self.seq = max(self.seq, after_seq)
        return out, quarantined


_OWN_RECORDS = frozenset({"schema", "journal_seq", "saved_at", "sessions", "jobs", "turns",
                          "seen_ids"})


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

    def changes(self, state: State) -> tuple[list[tuple[list[str], msgspec.Raw]], list[list[str]]]:
        """What changed since the last `changes` (or `reset`); taken as written."""
        now = self.leaves(state)
        old = self._written
        put = [(list(k), msgspec.Raw(v)) for k, v in now.items() if old.get(k) != v]
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
        out[path] = _encoder.encode(value)


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

    def add(self, rec: JournalRecord) -> None:
        for path in rec.unset:
            if path[0] not in self.fields:
                continue
            if len(path) == 1:  # an empty table that now has entries: they follow
                self.work[path[0]] = {}
                continue
            self._field(path[0])
            _unset(self.work, path)
        for path, raw in rec.set:
            if path[0] not in self.fields:
                continue  # a field a later version added: not ours to keep
            self._field(path[0])
            _set(self.work, path, msgspec.json.decode(raw))

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
