"""Typed `Ok.data` payloads: what the daemon sends and the CLI reads, one Struct per reply.

Field order is wire order. Every field is encoded (None included): clients that read the JSON
by key see the same document as before. Additive evolution only: new fields get defaults.
"""

from typing import Any

import msgspec

# ---- the promoter's answers: skills verbs, queue approve/reject -----------------------------

class Finding(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One reason a proposal may not land; `family` groups them (well_formed, safe, ...)."""

    family: str
    code: str
    message: str = ""


class Outcome(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What became of one landing: `skills revert|restore`, `queue approve|reject`."""

    status: str  # landed | rejected | held
    findings: list[Finding] = []
    skill_path: str | None = None  # the SKILL.md (or, for archive, the archive directory)
    version: int | None = None

    @classmethod
    def rejected(cls, *findings: Finding) -> "Outcome":
        return cls(status="rejected", findings=list(findings))


class SkillInfo(msgspec.Struct, kw_only=True):
    """One skill of `skills list`, live or archived."""

    name: str
    layer: str
    path: str
    owner: str  # autoharness | user
    status: str = "live"  # live | archived
    created: float | None = None
    last_changed: float | None = None
    uses: int = 0
    version: int | None = None
    turns: int = 0  # of its layer since it landed or was restored (autoharness skills)
    stage: str = ""  # probation | graduated | hand-written | archived
    reason: str | None = None  # archived: dormant | capacity | curated | proposed


class SkillView(msgspec.Struct, kw_only=True):
    """`skills show`: one live skill, its SKILL.md, files and provenance landings."""

    info: SkillInfo
    skill_md: str
    files: list[str]
    landings: list[dict[str, Any]]


# ---- status ---------------------------------------------------------------------------------

class _Part(msgspec.Struct, kw_only=True):
    pass


class CallCounts(_Part):
    """A session's tool calls by the witness that counted them (each call counts once)."""

    hook: int = 0  # PreToolUse events
    transcript: int = 0  # tool_use blocks in the main transcript no event reported


class SessionInfo(_Part):
    session_id: str
    activity: int
    watermark: int
    transcript_path: str | None
    last_event_at: float
    calls: CallCounts = msgspec.field(default_factory=CallCounts)


class EventCounts(_Part):
    received: int
    rejected: int
    by_kind: dict[str, int]
    unknown_kinds: int
    malformed_frames: int
    peer_rejected: int
    duplicates: int = 0  # copies of events already counted (a spooled copy, a retry)


class LastError(_Part):
    job: str
    error: str
    status: str


class JobCounts(_Part):
    pending: int = 0
    running: int = 0
    done: int = 0
    failed: int = 0
    failed_24h: int = 0
    by_kind: dict[str, int] = {}
    last_error: LastError | None = None
    waiting: str | None = None


class SpoolInfo(_Part):
    replayed: int
    pending: int


class PersistenceInfo(_Part):
    last_snapshot_at: float | None
    quarantined: list[str]
    failing: dict[str, Any] | None  # {reason, since} while state writes fail


class ReflectorInfo(_Part):
    backend: str
    configured: str
    model: str
    reason: str | None
    tokens_today: int
    tokens_total: int
    daily_token_budget: int | None


class PromoterInfo(_Part):
    mode: str
    landed: int
    rejected: int
    held: int
    last_landing_at: float | None
    findings: dict[str, int]


class LearningsInfo(_Part):
    markers_seen: int
    unprocessed: int
    projects: int


class Status(_Part):
    """`autoharnessctl status`: the daemon's view of itself."""

    version: str
    protocol: int
    pid: int
    uptime_s: float
    socket: str
    paused: bool
    sessions: list[SessionInfo]
    events: EventCounts
    jobs: JobCounts
    connections: dict[str, Any]  # open connections, the cap, drops
    spool: SpoolInfo
    persistence: PersistenceInfo
    watcher: dict[str, Any]  # the transcript index's and the watcher's own counters
    capture: dict[str, Any]  # capture statistics, including redactions by kind
    intents: dict[str, int]  # intents by status
    reflector: ReflectorInfo
    promoter: PromoterInfo
    library: dict[str, Any]  # skills per lifecycle stage, turns, the library config
    learnings: LearningsInfo
    batches: dict[str, Any] = {}  # replay --batch: in flight, items, tokens at the batch price
