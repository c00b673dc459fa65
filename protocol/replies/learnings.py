"""`learnings report|save`: markers waiting, and what a save did (the daemon's, or the offline
one when no daemon listens)."""

import msgspec


class MarkerInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One unprocessed marker as a report lists it (its raw text and atl id left out)."""

    id: str
    topic: str
    kind: str
    doc_impact: str = "none"
    body: str
    timestamp: str = ""  # the transcript record's ISO timestamp
    transcript: str = ""
    session_id: str = ""


class LearningsReport(msgspec.Struct, kw_only=True):
    """`learnings report --json`: the unprocessed markers, deduplicated, in first-seen order."""

    unprocessed: int = 0
    transcripts: list[str] = []  # distinct, first-seen order
    by_kind: dict[str, int] = {}  # sorted by kind
    doc_drafts: int = 0  # markers whose doc impact is not "none"
    markers: list[MarkerInfo] = []


class LearningsSaved(msgspec.Struct, kw_only=True):
    saved: list[str] = []  # marker ids handled by this run (state recorded unless dry run)
    skipped: list[str] = []  # already processed before this run
    journal: list[str] = []  # files written (or that would be), relative to the project root
    wiki: list[str] = []
    drafts: list[str] = []
    intents: list[str] = []  # ids the queue stored the intents under (dry run: marker-<id>)
    dry_run: bool = False
