"""Typed `Ok.data` payloads: what the daemon sends and the CLI reads, one Struct per reply.

The daemon answers with these Structs; the CLI decodes the reply's data into the same Struct
(`decode`), so both sides read one definition. Field order is wire order. Fields are encoded
as the Struct says (None included unless it omits defaults). Additive evolution only: new
fields get defaults, a field's type never changes.
"""

from typing import Any, TypeVar

import msgspec

T = TypeVar("T")


class ReplyMismatch(ValueError):
    """A reply's data is not of the shape this client reads (another version's daemon)."""


def decode(data: object, kind: type[T]) -> T:
    """The reply's data (as `Ok.data` arrived: JSON builtins) as its Struct."""
    try:
        return msgspec.convert(data, kind)
    except msgspec.ValidationError as e:
        raise ReplyMismatch(str(e)) from None

# ---- the intent queue: `queue list|show` ------------------------------------------------------

class Proposal(msgspec.Struct, kw_only=True):
    """What a model (or a marker, or /learn) suggests; per-action fields are optional here so
    that a malformed proposal can still be recorded as a rejected intent."""

    action: str
    skill: str
    layer: str = "project"
    reason: str = ""
    evidence: str = ""
    description: str | None = None
    body: str | None = None
    old: str | None = None
    new: str | None = None
    path: str | None = None
    content: str | None = None

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


class FeedbackCounts(msgspec.Struct, kw_only=True):
    """Grounded verdicts on one skill since it landed or was restored."""

    helped: int = 0
    ignored: int = 0
    harmful: int = 0
    missed: int = 0


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
    reason: str | None = None  # archived: dormant | capacity | harmful | stale | curated | proposed
    feedback: FeedbackCounts = msgspec.field(default_factory=FeedbackCounts)
    stale: list[str] = []  # repository paths it names that are gone (project skills)


class SkillView(msgspec.Struct, kw_only=True):
    """`skills show`: one live skill, its SKILL.md, files and provenance landings."""

    info: SkillInfo
    skill_md: str
    files: list[str]
    landings: list[dict[str, Any]]
    sync_conflicts: list["SyncConflict"] = []  # user layer: changed on two machines at once
    verdicts: list[dict[str, Any]] = []  # accepted feedback since landing: verdict, quote, at


class SyncConflict(msgspec.Struct, kw_only=True):
    """A skill changed on two machines between rounds whose changes could not be merged."""

    skill: str
    at: float  # when this machine resolved it
    kept: str  # the machine whose version is live now
    other: str  # the machine whose version went into the skill's history
    note: str = ""


class SyncRefusal(msgspec.Struct, kw_only=True):
    """A change from another machine this machine's promoter would not land, and why."""

    skill: str
    machine: str
    findings: list[Finding] = []


class SyncInfo(msgspec.Struct, kw_only=True):
    """`autoharnessctl sync`: the user layer's sync repository and its last rounds."""

    configured: bool = False
    remote: str = ""
    machine: str = ""
    every_s: float = 0.0
    last_round_at: float | None = None
    last_good_at: float | None = None
    last_error: str | None = None  # why the last round failed (None: it completed)
    failures: int = 0  # rounds failed in a row
    next_try_at: float | None = None  # the daemon's next round, when it runs them
    took: list[str] = []  # skills the last completed round changed here
    pushed: list[str] = []  # skills it sent
    merged: list[str] = []
    conflicts: list[SyncConflict] = []  # the latest, newest last
    refused: list[SyncRefusal] = []  # of the last completed round


class Verdict(msgspec.Struct, kw_only=True):
    """One verdict as the model gave it (checked by `verdict_from_obj`)."""

    skill: str
    layer: str
    verdict: str
    evidence: str = ""


class VerdictRecord(msgspec.Struct, kw_only=True):
    """A verdict in the durable queue: where it came from and whether the promoter grounded it
    (`accepted`) or refused it (`rejected`, with the findings that say why)."""

    id: str
    source: str
    created_at: float
    verdict: Verdict | None = None  # None when the model's item was malformed
    raw: str | None = None
    job_id: str | None = None
    session_id: str | None = None
    project_root: str | None = None
    status: str = "queued"
    findings: list[Finding] = []
    updated_at: float = 0.0


class Intent(msgspec.Struct, kw_only=True):
    """A proposal in the durable queue, with where it came from and what became of it."""

    id: str
    source: str
    created_at: float
    proposal: Proposal | None = None  # None when the model's proposal was malformed
    raw: str | None = None  # the malformed proposal, redacted, for the operator to read
    job_id: str | None = None
    session_id: str | None = None
    project_root: str | None = None
    status: str = "queued"
    findings: list[Finding] = []
    updated_at: float = 0.0


# ---- jobs a verb queued: `flush`, `learn`, `curate`; `stop` ------------------------------

class FlushedJob(msgspec.Struct, kw_only=True):
    id: str
    session_id: str
    kind: str


class Flushed(msgspec.Struct, kw_only=True):
    jobs: list[FlushedJob]
    unknown: list[str]  # session ids the daemon does not know


class LearnQueued(msgspec.Struct, kw_only=True):
    job: str
    session_id: str
    transcript_path: str | None


class CuratorJob(msgspec.Struct, kw_only=True):
    id: str
    layer: str | None
    project: str | None


class CuratorQueued(msgspec.Struct, kw_only=True):
    jobs: list[CuratorJob]  # empty: one for these layers is already waiting


class PlannedArchive(msgspec.Struct, kw_only=True):
    name: str
    layer: str
    reason: str  # harmful | stale | dormant | capacity
    why: str


class CuratePlan(msgspec.Struct, kw_only=True):
    """`curate --dry-run`: what a lifecycle pass and a curator run would do now; nothing done."""

    archives: list[PlannedArchive] = []  # what the next lifecycle pass would archive
    held_back: int = 0  # archives due but over the pass's share of a layer
    repairs: list[str] = []  # skills whose description the curator would be asked to repair
    stale: dict[str, list[str]] = {}  # skill -> missing paths the curator would be sent
    curator_skills: dict[str, int] = {}  # layer -> skills a curator run would be shown


class Stopping(msgspec.Struct, kw_only=True):
    stopping: bool
    pid: int


# ---- `learnings save` (the daemon's, or the offline one when no daemon listens) -------------

class LearningsSaved(msgspec.Struct, kw_only=True):
    saved: list[str] = []  # marker ids handled by this run (state recorded unless dry run)
    skipped: list[str] = []  # already processed before this run
    journal: list[str] = []  # files written (or that would be), relative to the project root
    wiki: list[str] = []
    drafts: list[str] = []
    intents: list[str] = []  # ids the queue stored the intents under (dry run: marker-<id>)
    dry_run: bool = False


# ---- `replay --batch`: submit, cancel (status: BatchesInfo) ---------------------------------

class BatchSubmitted(msgspec.Struct, kw_only=True):
    items: int  # windows queued for Message Batches
    skipped: int  # windows already sent before
    missing: list[str]  # transcripts named that do not exist


class BatchCanceled(msgspec.Struct, kw_only=True):
    batches: int  # in flight, asked to cancel
    waiting_dropped: int  # items not yet sent


# ---- the parts of typed replies below (status, report) ------------------------------------

class _Part(msgspec.Struct, kw_only=True):
    pass


# ---- `report`: what was learned and what it costs ------------------------------------------

class Count(_Part):
    """A figure over the report's period and over today (since local midnight)."""

    period: int = 0
    today: int = 0


class Funnel(_Part):
    """Reflections to landings: what the model proposed and what the promoter made of it.
    `rejected_by_reason` is keyed by the first finding's code; `archived_by_cause` by the
    archive's reason (dormant, capacity, curated, proposed, and any other a version records)."""

    reflections: Count = msgspec.field(default_factory=Count)
    proposals: Count = msgspec.field(default_factory=Count)
    landed: Count = msgspec.field(default_factory=Count)
    rejected: Count = msgspec.field(default_factory=Count)
    rejected_by_reason: dict[str, Count] = {}
    held: Count = msgspec.field(default_factory=Count)
    archived: Count = msgspec.field(default_factory=Count)
    archived_by_cause: dict[str, Count] = {}
    restored: Count = msgspec.field(default_factory=Count)


class LayerRecall(_Part):
    live: int = 0  # live autoharness skills
    loaded: int = 0  # of them, loaded at least once in the last `turns` turns of their layer
    share: float | None = None  # loaded / live; None without live skills


class Recall(_Part):
    turns: int = 0
    layers: dict[str, LayerRecall] = {}


class LayerContext(_Part):
    """What one layer's skill listing costs every request: `- name: description` lines."""

    skills: int = 0
    chars: int = 0
    autoharness_skills: int = 0
    autoharness_chars: int = 0


class ProjectContext(LayerContext):
    project: str = ""


class SessionStartContext(_Part):
    """The SessionStart context autoharness added, per session start that got any."""

    sent: int = 0
    mean_chars: float = 0.0
    max_chars: int = 0


class ContextCost(_Part):
    """`total_chars`: the user layer plus the largest project layer (one request's listing)."""

    layers: dict[str, LayerContext] = {}
    projects: list[ProjectContext] = []
    total_chars: int = 0
    total_autoharness_chars: int = 0
    session_start: SessionStartContext = msgspec.field(default_factory=SessionStartContext)


class Tokens(_Part):
    """Tokens by kind (per job and per 100 tool calls: rounded to whole tokens)."""

    input_uncached: int = 0
    cache_write: int = 0
    cache_read: int = 0
    output: int = 0


class ReflectionCost(_Part):
    """Model calls of the period: tokens in total, per job and per 100 main-session tool
    calls, and their price at list price for `model` (batch items at the batch price).
    `usd` is None when the model's price is not known."""

    model: str = ""
    calls: int = 0
    jobs: int = 0
    batch_items: int = 0
    tool_calls: int = 0
    tokens: Tokens = msgspec.field(default_factory=Tokens)
    per_job: Tokens | None = None
    per_100_tool_calls: Tokens | None = None
    usd: float | None = None
    usd_per_job: float | None = None
    usd_per_100_tool_calls: float | None = None
    price_per_mtok: dict[str, float] = {}  # the list prices used (USD per million tokens)


class SkillRow(_Part):
    """One skill of the report: live or archived, with its usage and (when recorded) the
    reflector's verdicts on it and the paths it names that no longer exist."""

    name: str
    layer: str
    owner: str
    stage: str = ""
    status: str = "live"
    reason: str | None = None
    project: str | None = None
    uses: int = 0
    turns: int = 0
    landed_at: float | None = None
    updated_at: float | None = None
    feedback: dict[str, int] | None = None
    stale: list[str] = []


class LibraryDay(_Part):
    """Live autoharness skills per layer at the end of `day`, and what changed that day."""

    day: str
    user: int = 0
    project: int = 0
    landed: int = 0
    archived: int = 0


class Report(_Part):
    """`autoharnessctl report`: the period is the last `days` days (since `since`)."""

    generated_at: float
    days: int
    since: float
    funnel: Funnel = msgspec.field(default_factory=Funnel)
    recall: Recall = msgspec.field(default_factory=Recall)
    context: ContextCost = msgspec.field(default_factory=ContextCost)
    cost: ReflectionCost = msgspec.field(default_factory=ReflectionCost)
    skills: list[SkillRow] = []
    library: list[LibraryDay] = []
    feedback: dict[str, int] = {}  # verdicts over the skills listed, when any are recorded


# ---- status ---------------------------------------------------------------------------------
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
    subagent_calls: int = 0  # its subagents' tool calls: shown apart, never activity


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


class FailedJob(_Part):
    """A failed job and why, for `status` (the most recent few)."""

    job: str
    kind: str = ""
    session_id: str = ""
    error: str = ""
    finished_at: float | None = None


class JobCounts(_Part):
    pending: int = 0
    running: int = 0
    done: int = 0
    failed: int = 0
    failed_24h: int = 0
    by_kind: dict[str, int] = {}
    last_error: LastError | None = None
    waiting: str | None = None
    recent_failures: list[FailedJob] = []  # newest first, at most RECENT_FAILURES


class SpoolInfo(_Part):
    replayed: int
    pending: int


class Failing(_Part):
    """Why the daemon's state writes fail, and since when (the first failure of the episode)."""

    reason: str
    since: float


class PersistenceInfo(_Part):
    last_snapshot_at: float | None
    quarantined: list[str]
    failing: Failing | None  # while state writes fail


class ReflectorInfo(_Part):
    backend: str
    configured: str
    model: str
    reason: str | None
    tokens_today: int
    tokens_total: int
    daily_token_budget: int | None


class LibraryTurns(_Part):
    user: int = 0
    projects: int = 0  # projects with turns counted


class LibraryInfo(_Part):
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


class BatchInFlight(_Part):
    id: str
    items: int
    status: str


class BatchesInfo(_Part):
    """`replay --batch`: batches in flight, items by status, tokens (and at the batch price)."""

    in_flight: list[BatchInFlight] = []
    items: dict[str, int] = {}
    tokens: int = 0
    tokens_at_batch_price: int = 0
    price_ratio: float = 0.0
    requests: int = 0
    waiting: str | None = None


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


class Identity(_Part):
    """The head of any version's status: which daemon answers, and where. What `start` and
    `service` read, so a daemon of another version is still recognised as running."""

    version: str = ""
    protocol: int = 0
    pid: int = 0
    socket: str = ""


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
    library: LibraryInfo
    learnings: LearningsInfo
    batches: BatchesInfo = msgspec.field(default_factory=BatchesInfo)
    sync: SyncInfo = msgspec.field(default_factory=SyncInfo)
    sessions_total: int = 0  # live sessions in all; `sessions` is one page of them, newest first
    sessions_offset: int = 0
