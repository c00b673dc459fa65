"""Persistence: an atomic snapshot of the daemon state plus a fsynced append-only journal.

Counters and watermarks live in memory and are snapshotted when dirty; anything whose loss would
lose a lesson (a created job, a job's status) is journaled and fsynced before it is acknowledged.
Startup = snapshot + journal records newer than it. A corrupt file is quarantined, never fatal.
"""

import os
import stat
import threading
import time

import msgspec

from claude_autoharness.daemon.atomic import write_atomic
from claude_autoharness.daemon.sessions import Job, Session
from claude_autoharness.protocol import paths

SCHEMA = 1


class Counters(msgspec.Struct, kw_only=True):
    received: int = 0
    rejected: int = 0
    by_kind: dict[str, int] = {}
    unknown_kinds: int = 0
    malformed_frames: int = 0
    peer_rejected: int = 0
    spool_replayed: int = 0


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
    spool_done: list[int] = []  # [inode, size] of a spool replay a snapshot already covers
    turns: Turns = msgspec.field(default_factory=Turns)
    reflections_since_curate: int = 0  # reflection jobs done since the curator last ran


class JournalRecord(msgspec.Struct, kw_only=True, omit_defaults=True):
    seq: int
    op: str  # "job": a job created or changed; "session": a session's counter/watermark;
    # "turn": a main session's Stop, counted in the user layer and in `project` (if any)
    job: Job | None = None
    session: Session | None = None
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
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UnsafeDir(f"{path} is not a directory (a symlink?): remove it and restart")
    if st.st_uid != os.getuid():
        raise UnsafeDir(f"{path} is owned by uid {st.st_uid}, not you ({os.getuid()})")
    if st.st_mode & 0o077:
        raise UnsafeDir(
            f"{path} is open to other users (mode {st.st_mode & 0o777:o}): run `chmod 700 {path}`"
        )


def write_private(path: str, data: bytes) -> None:
    """Atomically replace a state file (0600)."""
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


class Journal:
    """Append-only JSONL; each append is fsynced before it returns. Thread-safe: appends come
    from worker threads while the loop decides when a snapshot covers them."""

    def __init__(self, path: str):
        self.path = path
        self.seq = 0
        self._fd: int | None = None
        self._lock = threading.Lock()

    def open(self) -> None:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def append(self, op: str, *, job: Job | None = None, session: Session | None = None,
               project: str | None = None) -> int:
        with self._lock:
            self.seq += 1
            rec = JournalRecord(seq=self.seq, op=op, job=job, session=session, project=project,
                                at=time.time())
            assert self._fd is not None
            data = _encoder.encode(rec) + b"\n"
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
            os.fsync(self._fd)
            return self.seq

    def truncate_if(self, seq: int) -> bool:
        """Drop every record if none was appended after `seq` (a durable snapshot covers them)."""
        with self._lock:
            if self.seq != seq:
                return False
            assert self._fd is not None
            os.ftruncate(self._fd, 0)
            os.fsync(self._fd)
            return True

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
