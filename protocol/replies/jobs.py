"""Jobs a verb queued (`flush`, `learn`, `curate`, `replay --batch`), `stop`, `learnings save`."""

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
