"""The daemon state's schema: the snapshot (`State`) and the journal's records, a tagged union
on `op`. Additive evolution only: new fields get defaults, types never change, a record kind
once written is read for ever.

Acknowledged means journaled: every change an event or a job makes (the session's post-state,
the jobs it created or changed, the event's id) is one record, appended before anyone is told.
Records carry post-states, so applying one twice is harmless; a session's post-state travels
without its `tool_ids`, whose additions travel in `calls` (a record stays small however many
calls the session remembers).

A snapshot (`Snapshot`, written `packed`, read `unpacked`) keeps its sessions as rows of values
without field names: a third of its size, so it is rewritten less often for the same restart.
"""

import msgspec

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
    watcher: dict = {}
    markers: dict = {}
    project_marks: dict[str, float] = {}  # project root -> last SessionStart promoter summary
    capture: dict = {}
    turns: Turns = msgspec.field(default_factory=Turns)
    reflections_since_curate: int = 0  # reflection jobs done since the curator last ran
    seen_ids: list[str] = []  # the most recent event ids, oldest first


# ---- the journal's records ----------------------------------------------------------------

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
    path starts with a `State` field name)."""

    sessions: list[Session] = []
    set: list[tuple[list[str], msgspec.Raw]] = []
    unset: list[list[str]] = []


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
