"""`autoharnessctl status`: the daemon's view of itself, and the `Identity` any version answers."""

from typing import Any

import msgspec

from .codec import Part
from .listing import ListingSummary
from .skills import FeedbackCounts, SkillCheck, SyncInfo


class CallCounts(Part):
    """A session's tool calls by the witness that counted them (each call counts once)."""

    hook: int = 0  # PreToolUse events
    transcript: int = 0  # tool_use blocks in the main transcript no event reported


class SessionInfo(Part):
    session_id: str
    activity: int
    watermark: int
    transcript_path: str | None
    last_event_at: float
    calls: CallCounts = msgspec.field(default_factory=CallCounts)
    subagent_calls: int = 0  # its subagents' tool calls: shown apart, never activity
    # what its windows spanned after the watermark (`bytes`) and how the reflector saw it:
    # `window_bytes`, `summarised_bytes`, `digest_bytes`, `unseen_bytes` (empty: no window yet)
    seen: dict[str, int] = {}


class EventCounts(Part):
    received: int
    rejected: int
    by_kind: dict[str, int]
    unknown_kinds: int
    malformed_frames: int
    peer_rejected: int
    duplicates: int = 0  # copies of events already counted (a spooled copy, a retry)


class LastError(Part):
    job: str
    error: str
    status: str


class FailedJob(Part):
    """A failed job and why, for `status` (the most recent few)."""

    job: str
    kind: str = ""
    session_id: str = ""
    error: str = ""
    finished_at: float | None = None


class JobCounts(Part):
    pending: int = 0
    running: int = 0
    done: int = 0
    failed: int = 0
    failed_24h: int = 0
    by_kind: dict[str, int] = {}
    last_error: LastError | None = None
    waiting: str | None = None
    recent_failures: list[FailedJob] = []  # newest first, at most RECENT_FAILURES


class SpoolInfo(Part):
    replayed: int
    pending: int
    lost: int = 0  # events hooks could neither deliver nor spool (a full disk), since start


class Failing(Part):
    """Why the daemon's state writes fail, and since when (the first failure of the episode)."""

    reason: str
    since: float


class PersistenceInfo(Part):
    last_snapshot_at: float | None
    quarantined: list[str]
    failing: Failing | None  # while state writes fail


class ReflectorInfo(Part):
    backend: str
    configured: str
    model: str
    reason: str | None
    tokens_today: int
    tokens_total: int
    daily_token_budget: int | None
    destination: str = ""  # where a window goes, in words
    output: str | None = None  # the openai backend: tools, json_schema, or auto (none yet)
    routes: dict[str, str] = {}  # kind of work -> "backend model (destination)" when routed


class LibraryTurns(Part):
    user: int = 0
    projects: int = 0  # projects with turns counted


class LessonCheck(Part):
    """One live check with its skill and its measured adherence (status, report)."""

    skill: str
    layer: str
    check: SkillCheck


class LibraryInfo(Part):
    """Skills per lifecycle stage over the layers judged so far, turns, the library config."""

    probation: int = 0
    graduated: int = 0
    hand_written: int = msgspec.field(default=0, name="hand-written")
    archived: int = 0
    archived_by_reason: dict[str, int] = {}
    turns: LibraryTurns = msgspec.field(default_factory=LibraryTurns)
    config: dict[str, Any] = {}
    feedback: FeedbackCounts = msgspec.field(default_factory=FeedbackCounts)  # live skills
    stale: int = 0  # live skills naming repository paths that are gone
    verdicts_refused: int = 0  # verdicts the promoter (or intake) did not accept
    checks: list[LessonCheck] = []  # the live checks and their adherence


class BatchInFlight(Part):
    id: str
    items: int
    status: str


class BatchesInfo(Part):
    """`replay --batch`: batches in flight, items by status, tokens (and at the batch price)."""

    in_flight: list[BatchInFlight] = []
    items: dict[str, int] = {}
    tokens: int = 0
    tokens_at_batch_price: int = 0
    price_ratio: float = 0.0
    requests: int = 0
    waiting: str | None = None


class PromoterInfo(Part):
    mode: str
    landed: int
    rejected: int
    held: int
    last_landing_at: float | None
    findings: dict[str, int]


class LearningsInfo(Part):
    markers_seen: int
    unprocessed: int
    projects: int


class DeliveryInfo(Part):
    """Sessions whose hook events arrived through both installs (the plugin, from an enabled
    plugin or `claude --plugin-dir`, and the settings hooks), in the last day: Claude Code ran
    every hook twice for them. No settings file shows a command-line flag: this does."""

    both: int = 0  # such sessions
    last_session: str | None = None
    last_at: float | None = None


class Identity(Part):
    """The head of any version's status: which daemon answers, and where. What `start` and
    `service` read, so a daemon of another version is still recognised as running."""

    version: str = ""
    protocol: int = 0
    pid: int = 0
    socket: str = ""


class SettingsInfo(Part):
    """Where the daemon's settings came from: each key set (not left at its default) with the
    config file or the variable that set it, and who started the daemon: `autostart` (a hook,
    whose session's variables it never reads) or `explicit` (`autoharnessctl start`, the
    service, a shell: their AUTOHARNESS_<KEY> variables count)."""

    started_by: str = "explicit"
    sources: dict[str, str] = {}


class Status(Part):
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
    library: LibraryInfo
    learnings: LearningsInfo
    batches: BatchesInfo = msgspec.field(default_factory=BatchesInfo)
    sync: SyncInfo = msgspec.field(default_factory=SyncInfo)
    settings: SettingsInfo = msgspec.field(default_factory=SettingsInfo)
    sessions_total: int = 0  # live sessions in all; `sessions` is one page of them, newest first
    sessions_offset: int = 0
    # Claude Code's skill listing for a session where `status` was asked (added by the CLI)
    listing: ListingSummary | None = None
    delivery: DeliveryInfo = msgspec.field(default_factory=DeliveryInfo)
