"""Jobs a verb queued (`flush`, `learn`, `curate`, `replay --batch`), `stop`, `pause`."""

import msgspec


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


class Paused(msgspec.Struct, kw_only=True):
    """`pause` / `resume`: whether hooks count nothing now (the state as saved)."""

    paused: bool


# ---- `replay --batch`: submit, cancel (status: BatchesInfo) ---------------------------------

class BatchSubmitted(msgspec.Struct, kw_only=True):
    items: int  # windows queued for Message Batches
    skipped: int  # windows already sent before
    missing: list[str]  # transcripts named that do not exist
    reflected: int = 0  # windows left out: a reflector had all their records already


class BatchCanceled(msgspec.Struct, kw_only=True):
    batches: int  # in flight, asked to cancel
    waiting_dropped: int  # items not yet sent
