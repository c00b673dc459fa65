"""Typed `Ok.data` payloads: what the daemon sends and the CLI reads, one Struct per reply.

The daemon answers with these Structs; the CLI decodes the reply's data into the same Struct
(`decode`), so both sides read one definition. Field order is wire order. Fields are encoded
as the Struct says (None included unless it omits defaults). Additive evolution only: new
fields get defaults, a field's type never changes. One submodule per subject; every name is
re-exported here, so callers write `replies.Status`.
"""

from .capture import (
    Packet,
)
from .codec import (
    Part,
    ReplyMismatch,
    T,
    decode,
)
from .jobs import (
    BatchCanceled,
    BatchSubmitted,
    CuratePlan,
    CuratorJob,
    CuratorQueued,
    Flushed,
    FlushedJob,
    LearnQueued,
    Paused,
    PlannedArchive,
    Stopping,
)
from .learnings import (
    LearningsReport,
    LearningsSaved,
    MarkerInfo,
)
from .listing import ListingLine, ListingSummary
from .queue import (
    Check,
    Intent,
    Proposal,
    Verdict,
    VerdictRecord,
)
from .report import (
    ContextCost,
    Count,
    Funnel,
    Headline,
    LayerContext,
    LayerRecall,
    LibraryDay,
    ProjectContext,
    Recall,
    RecallPart,
    RecallSplit,
    ReflectionCost,
    Report,
    SessionStartContext,
    SkillRecall,
    SkillRow,
    Tokens,
)
from .skills import (
    CheckAdherence,
    FeedbackCounts,
    Finding,
    Learned,
    Outcome,
    SkillCheck,
    SkillInfo,
    SkillView,
    SyncConflict,
    SyncInfo,
    SyncRefusal,
)
from .status import (
    BatchesInfo,
    BatchInFlight,
    CallCounts,
    DeliveryInfo,
    EventCounts,
    FailedJob,
    Failing,
    Identity,
    JobCounts,
    LastError,
    LearningsInfo,
    LessonCheck,
    LibraryInfo,
    LibraryTurns,
    PersistenceInfo,
    PromoterInfo,
    ReflectorInfo,
    SessionInfo,
    SettingsInfo,
    SpoolInfo,
    Status,
)
