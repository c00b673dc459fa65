"""The daemon state's schema: the snapshot (`State`) and the journal's records, a tagged union
on `op`. Additive evolution only: new fields get defaults, types never change, a record kind
once written is read for ever.

Acknowledged means journaled: every change an event or a job makes (the session's post-state,
the jobs it created or changed, the event's id) is one record, appended before anyone is told.
Records carry post-states, so applying one twice is harmless; a session's post-state travels
without its `tool_ids`, whose additions travel in `calls` (a record stays small however many
calls the session remembers).

The tables other parts keep (`Watcher`, `Markers`, `Capture`) are typed like the rest: a field
an older version wrote that they no longer have is ignored, and a value not of its type makes
the snapshot or the record unreadable (set aside), never half-trusted.

A snapshot (`Snapshot`, written `packed`, read `unpacked`) keeps its sessions as rows of values
without field names: a third of its size, so it is rewritten less often for the same restart.
"""

import functools
import types
from typing import get_args, get_origin

import msgspec

from ..learnings.markers import Marker
from ..sessions import Job, Session
from .journal import Sequenced

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


class Tail(msgspec.Struct, array_like=True):  # how far the watcher read a transcript
    offset: int = 0
    inode: int = 0


class Tails(msgspec.Struct):
    files: dict[str, Tail] = {}


class Transcript(msgspec.Struct, array_like=True):  # what the index knows of one transcript
    size: int = 0
    inode: int = 0
    mtime: float = 0.0
    last_growth_at: float = 0.0  # when the file was last seen growing (clock time)
    bytes_indexed: int = 0


class Index(msgspec.Struct):
    bytes_indexed: int = 0
    last_event_at: float | None = None
    entries: dict[str, Transcript] = {}


class Watcher(msgspec.Struct):
    """The transcript watcher's offsets and its index (older versions' `tails` keyed by path
    are ignored: those transcripts are read again)."""

    tails: Tails = msgspec.field(default_factory=Tails)
    index: Index = msgspec.field(default_factory=Index)


class Markers(msgspec.Struct):
    """The markers found per project slug (an older `files` table of offsets is ignored)."""

    projects: dict[str, list[Marker]] = {}


class Refusal(msgspec.Struct):
    path: str = ""
    reason: str = ""
    at: float = 0.0


class Capture(msgspec.Struct, kw_only=True):
    """The capture counters status shows, and per session what its windows spanned."""

    windows_cut: int = 0
    bytes_dropped: int = 0
    fallbacks: int = 0
    bookkeeping_records: int = 0
    bookkeeping_bytes: int = 0
    bytes_digest_only: int = 0
    bytes_unseen: int = 0
    redactions: dict[str, int] = {}
    refused: int = 0
    last_refused: Refusal | None = None
    seen: dict[str, dict[str, int]] = {}


class State(msgspec.Struct, kw_only=True):
    """The daemon's state; on disk as its `Snapshot`."""

    schema: int = SCHEMA
    journal_seq: int = 0
    sessions: dict[str, Session] = {}
    jobs: dict[str, Job] = {}
    jobs_done: int = 0
    jobs_failed: int = 0
    events: Counters = msgspec.field(default_factory=Counters)
    paused: bool = False
    tokens: dict[str, int] = {}  # "total", "day:YYYY-MM-DD" and "day:YYYY-MM-DD/<backend>"
    watcher: Watcher = msgspec.field(default_factory=Watcher)
    markers: Markers = msgspec.field(default_factory=Markers)
    project_marks: dict[str, float] = {}  # project root -> last SessionStart promoter summary
    capture: Capture = msgspec.field(default_factory=Capture)
    turns: Turns = msgspec.field(default_factory=Turns)
    reflections_since_curate: int = 0  # reflection jobs done since the curator last ran
    seen_ids: list[str] = []  # the most recent event ids, oldest first


# ---- the journal's records ----------------------------------------------------------------

Leaf = bool | int | float | str | list | dict | None  # a leaf of a table, as JSON has it


def type_at(path: list[str]) -> object | None:
    """The type `State` gives `path` (a field name, then a key per table level down); None for
    one it does not know (a later version's field, an older shape's key)."""
    t: object = State
    for key in path:
        every, fields = _children(t)
        if (t := every or fields.get(key)) is None:
            return None
    return t


@functools.cache
def _children(t: object) -> tuple[object, dict[str, object]]:
    """The type of a dict's every value, or a Struct's (`X | None`: X's) fields' types."""
    if get_origin(t) is dict:
        return get_args(t)[1], {}
    if isinstance(t, types.UnionType):
        t = next(a for a in get_args(t) if a is not types.NoneType)
    if isinstance(t, type) and issubclass(t, msgspec.Struct):
        return None, {f.name: f.type for f in msgspec.structs.fields(t)}
    return None, {}


class EventRecord(Sequenced, tag="event"):
    """One acknowledged hook event: its id and kind (its counters travel with it), the
    session's post-state with the tool calls it counted, the jobs it created, and for a main
    session's Stop (`turn`) one turn of the user layer and of `project`."""

    eid: str = ""
    kind: str = ""
    session: Session | None = None
    calls: list[str] = []
    jobs: list[Job] = []
    turn: bool = False
    project: str | None = None


class CallsRecord(Sequenced, tag="calls"):
    """Tool calls counted from a session's transcript (no hook event reported them)."""

    session: Session | None = None
    calls: list[str] = []


class JobsRecord(Sequenced, tag="job"):
    """New or changed jobs, with a moved watermark (`session`) or the counters a flush reset
    (`sessions`). `job` is how older versions wrote a single one."""

    jobs: list[Job] = []
    session: Session | None = None
    sessions: list[Session] = []
    job: Job | None = None


class PartsRecord(Sequenced, tag="parts"):
    """What changed outside the other records: sessions changed outside an event, and the
    snapshot's other fields' changed leaves as (path, value) pairs set and paths deleted (a
    path starts with a `State` field name). A value not of the type its path has in `State`
    makes the record unreadable; a path `State` does not know is not checked (replay drops
    it)."""

    sessions: list[Session] = []
    set: list[tuple[list[str], Leaf]] = []
    unset: list[list[str]] = []

    def __post_init__(self):
        for path, value in self.set:
            if (t := type_at(path)) is not None:
                msgspec.convert(value, t)


class ForgetRecord(Sequenced, tag="forget"):
    """State pruned: sessions and jobs dropped."""

    forget_sessions: list[str] = []
    forget_jobs: list[str] = []


class SessionRecord(Sequenced, tag="session"):
    """Legacy (nothing writes it): a session's post-state."""

    session: Session | None = None


class CarryRecord(Sequenced, tag="carry"):
    """Legacy (an older compaction kept a job or a session this way)."""

    job: Job | None = None
    session: Session | None = None


class TurnRecord(Sequenced, tag="turn"):
    """Legacy (turns now travel in a Stop's event record): one turn of the user layer and of
    `project`. Still applied, once, so an old journal's turn counts are kept."""

    project: str | None = None


Record = (EventRecord | CallsRecord | JobsRecord | PartsRecord | ForgetRecord | SessionRecord
          | CarryRecord | TurnRecord)


class SessionRow(Session, array_like=True):
    """A session as a snapshot keeps it: its fields' values in order, without their names
    (a third of a snapshot's bytes). `Session`'s fields are only ever added at its end."""


class Snapshot(State):
    """The state as a snapshot holds it: its sessions as rows (older versions wrote them in
    `sessions`, read as they are)."""

    session_rows: list[SessionRow] = []


def packed(state: State) -> Snapshot:
    rows = [msgspec.structs.astuple(s) for s in state.sessions.values()]
    return Snapshot(**{**_fields(state), "sessions": {}, "session_rows": rows})


_DEFAULTS = msgspec.structs.asdict(Session(session_id=""))


def unpacked(snap: Snapshot) -> State:
    state = State(**_fields(snap))
    for row in snap.session_rows:
        # a value equal to its default is left to it: as omitted, it is not journaled
        state.sessions[row.session_id] = Session(**{
            k: v for k, v in zip(Session.__struct_fields__, msgspec.structs.astuple(row), strict=True)
            if k == "session_id" or v != _DEFAULTS[k]})
    return state


def _fields(state: State) -> dict:
    return {name: getattr(state, name) for name in State.__struct_fields__}


def light(session: Session) -> Session:
    """The session as journaled: its remembered tool ids travel separately."""
    if not session.tool_ids and not session.tool_at:
        return session
    return msgspec.structs.replace(session, tool_ids=[], tool_at=[])
