"""Persistence: an atomic snapshot of the daemon state plus an append-only journal.

Acknowledged means journaled: every change an event or a job makes (the session's post-state,
the jobs it created or changed, the event's id) is appended with one `write()` before anyone is
told, so a process crash at any instant loses nothing acknowledged; fsync (against power loss)
is batched by the daemon every `fsync_interval_s`. Records carry post-states, so applying one
twice is harmless. The snapshot only shortens replay: startup = snapshot + journal records newer
than it. Compaction keeps the unfinished jobs and live sessions in the journal, so a corrupt
snapshot (quarantined, never fatal) does not drop them.
"""

import os
import threading
import time

import msgspec

from claude_autoharness.daemon.atomic import write_atomic
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
    op: str  # "event", "calls", "job", "session", "carry" (what compaction kept), "turn"
    job: Job | None = None
    jobs: list[Job] = []
    session: Session | None = None
    eid: str = ""  # the event's id: a later copy of it counts nothing
    kind: str = ""  # the event's hook_event_name (its counters travel with it)
    calls: list[str] = []  # tool_use ids the session now remembers as counted
    turn: bool = False  # a main session's Stop: one turn of the user layer and of `project`
    project: str | None = None
    at: float = 0.0


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


def write_private(path: str, data: bytes) -> None:
    """Atomically replace a state file (0600), never into a state dir swapped since start."""
    recheck_dir(os.path.dirname(path))
    write_atomic(path, data, 0o600)


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


def load_snapshot(path: str, qdir: str) -> tuple[State, list[str]]:
    """Load the snapshot; a corrupt one is quarantined and an empty state returned."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return State(), []
    try:
        return _state_decoder.decode(data), []
    except (msgspec.DecodeError, msgspec.ValidationError):
        return State(), [quarantine(path, qdir)]


def encode_state(state: State) -> bytes:
    return _encoder.encode(state)


def light(session: Session) -> Session:
    """The session as journaled: its remembered tool ids travel separately."""
    if not session.tool_ids and not session.tool_at:
        return session
    return msgspec.structs.replace(session, tool_ids=[], tool_at=[])


class Journal:
    """Append-only JSONL. `append` is one `write()` (the event loop calls it: page cache, no
    fsync); `sync` fsyncs and `compact` shrinks the file after a snapshot, both from worker
    threads. The lock orders appends against the swap of the file in `compact`. An append that
    fails (a full disk) leaves no partial line and raises; its record is written ahead of the
    next one that has room, so records stay whole and in order."""

    def __init__(self, path: str):
        self.path = path
        self.seq = 0
        self.size = 0  # bytes appended to the open file
        self._fd: int | None = None
        self._lock = threading.Lock()
        self._unsynced = False
        self._torn = False
        self._unwritten: list[bytes] = []  # records a failed append kept, oldest first

    def open(self) -> None:
        recheck_dir(os.path.dirname(self.path))
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.size = os.fstat(self._fd).st_size
        if self.size and _pread_all(self.path, self.size - 1, self.size) != b"\n":
            _write_all(self._fd, b"\n")  # end a torn last line: it must not swallow the next
            self.size += 1

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def append(self, op: str, *, job: Job | None = None, jobs: list[Job] | None = None,
               session: Session | None = None, eid: str = "", kind: str = "",
               calls: list[str] | None = None, turn: bool = False,
               project: str | None = None) -> int:
        with self._lock:
            self.seq += 1
            rec = JournalRecord(seq=self.seq, op=op, job=job, jobs=jobs or [],
                                session=light(session) if session is not None else None,
                                eid=eid, kind=kind, calls=calls or [], turn=turn, project=project,
                                at=time.time())
            assert self._fd is not None
            # A record a failed append could not write goes first: the caller's state already
            # holds its change, so the post-states recorded after it carry that change too.
            self._unwritten.append(_encoder.encode(rec) + b"\n")
            data = b"".join(self._unwritten)
            if self._torn:  # a failed append left part of a line: end it, or it eats this one
                data = b"\n" + data
            try:
                _write_all(self._fd, data)
            except OSError:
                self._cut_back()
                raise
            self._unwritten.clear()
            self._torn = False
            self.size += len(data)
            self._unsynced = True
            return self.seq

    def _cut_back(self) -> None:
        """After a failed write (a full disk), drop what part of the record got written."""
        assert self._fd is not None
        try:
            os.ftruncate(self._fd, self.size)
        except OSError:
            self._torn = True
            self.size = os.fstat(self._fd).st_size  # the part stays: offsets must count it

    def sync(self) -> None:
        """fsync what was appended (batched: the daemon calls this every fsync_interval_s)."""
        with self._lock:
            if not self._unsynced or self._fd is None:
                return
            fd, self._unsynced = self._fd, False
            fd = os.dup(fd)  # the fsync runs unlocked; a compaction may swap the file meanwhile
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def carry(self, seq: int, jobs: list[Job], sessions: list[Session]) -> bytes:
        """Records for what a compaction keeps: numbered `seq`, so replay after a good snapshot
        skips them and replay after a corrupt one restores them."""
        out = [_encoder.encode(JournalRecord(seq=seq, op="carry", job=j)) for j in jobs]
        out += [_encoder.encode(JournalRecord(seq=seq, op="carry", session=light(s),
                                              calls=list(s.tool_ids), at=time.time()))
                for s in sessions]
        return b"".join(x + b"\n" for x in out)

    def compact(self, size: int, carry: bytes) -> None:
        """Replace the file with `carry` plus whatever was appended after byte `size` (the
        point a durable snapshot covers). Written and fsynced aside, swapped in under the lock."""
        tmp = self.path + ".compact"
        with self._lock:
            end = self.size
        recheck_dir(os.path.dirname(self.path))
        fd = os.open(tmp, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                     0o600)
        old = None
        try:
            _write_all(fd, carry + _pread_all(self.path, size, end))
            os.fsync(fd)
            with self._lock:
                late = _pread_all(self.path, end, self.size)  # appended while we wrote
                _write_all(fd, late)
                os.replace(tmp, self.path)
                old, self._fd, fd = self._fd, fd, -1
                self.size = len(carry) + (self.size - size)  # a torn tail came along: still torn
                self._unsynced = self._unsynced or bool(late)
        finally:
            for f in (fd, old):
                if f is not None and f >= 0:
                    os.close(f)

    def replay(self, after_seq: int, qdir: str) -> tuple[list[JournalRecord], list[str]]:
        """Records newer than `after_seq`. A torn or garbage line is skipped and the file copied
        to quarantine, so nothing readable is lost and the damage stays inspectable."""
        try:
            with open(self.path, "rb") as f:
                lines = f.read().split(b"\n")
        except FileNotFoundError:
            return [], []
        out, bad = [], 0
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
        self.seq = max(self.seq, after_seq)
        quarantined = [quarantine(self.path, qdir, copy=True)] if bad else []
        return out, quarantined


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _pread_all(path: str, start: int, end: int) -> bytes:
    if end <= start:
        return b""
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(end - start)
