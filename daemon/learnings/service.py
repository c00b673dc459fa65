"""Report and save markers for a project: the one place the daemon and the offline CLI share.

The daemon passes its incremental indexer (markers already found as transcripts grew); the
offline CLI passes none and the project's transcripts are scanned instead.
"""

import os
from collections.abc import Sequence

import msgspec
import structlog

from ...protocol import paths
from ...protocol.replies import LearningsSaved
from ..capture.source import TranscriptRefused, resolve, transcript_roots
from . import report as rp
from .markers import Marker, MarkerIndexer, scan_file
from .save import pending, save_markers
from .state import LearningState, load

log = structlog.get_logger("autoharness")


def slug_of(project_root: str) -> str:
    return paths.project_slug(os.path.abspath(project_root))


def project_markers(slug: str, indexer: MarkerIndexer | None, *, lookback_days: int,
                    transcripts: Sequence[str] = (),
                    roots: list[str] | None = None) -> list[Marker]:
    """Unprocessed markers of one project (optionally only from some transcripts, each read
    only if it resolves inside `roots`, default: the Claude Code projects dir)."""
    st = load(slug)
    if transcripts:
        roots = transcript_roots() if roots is None else roots
        found: list[Marker] = []
        for t in transcripts:
            known = [m for m in indexer.markers(slug) if m.transcript == t] if indexer else []
            if known:
                found += known
                continue
            try:
                found += scan_file(resolve(t, roots), roots)
            except TranscriptRefused as e:
                log.warning("transcript refused", path=t, reason=e.reason)
        return pending(found, st.processed_ids)
    if indexer is not None:
        return pending(indexer.unprocessed(slug, set(st.processed_ids)), st.processed_ids)
    project_dir = os.path.join(paths.claude_projects_dir(), slug)
    return pending(rp.scan_previous_transcripts(project_dir, st.last_processed_at, lookback_days,
                                                processed_ids=st.processed_ids,
                                                roots=transcript_roots() if roots is None else roots),
                   st.processed_ids)


def save_project(project_root: str, indexer: MarkerIndexer | None, queue, *, lookback_days: int,
                 transcripts: Sequence[str] = (), dry_run: bool = False,
                 redactor=None, roots: list[str] | None = None) -> LearningsSaved:
    """Journal, wiki, doc drafts and marker intents for the project's unprocessed markers.

    `redactor` (capture's Redactor, default: the packaged rules; the daemon passes the one of
    its `redaction` config) redacts the marker text before it is written or queued, and judges
    the intents at the queue's door. `LearningsSaved.intents` names the ids the queue stored.
    """
    if redactor is None:
        from ..capture.redact import default_redactor  # only a save needs it

        redactor = default_redactor()
    slug = slug_of(project_root)
    markers = project_markers(slug, indexer, lookback_days=lookback_days, transcripts=transcripts,
                              roots=roots)
    ls = LearningState(slug)

    def queue_intent(intent) -> list[str]:
        # The marker intent's id is the job id: re-intake returns the intent already stored.
        stored = queue.intake(intent.id, intent.session_id, "marker",
                              [msgspec.to_builtins(intent.proposal)], intent.proposal.evidence,
                              intent.project_root, 1, redactor=redactor)
        return [i.id for i in stored]

    res = save_markers(project_root, markers, ls, queue_intent=queue_intent if queue else None,
                       dry_run=dry_run, advance_time=not transcripts, redactor=redactor)
    if indexer is not None and not dry_run:
        indexer.forget_saved(slug, res.saved)
    return res
