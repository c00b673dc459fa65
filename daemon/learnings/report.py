"""What the user and the model are told about unprocessed markers.

The texts match atl's `learning-capture` output so its users see what they know.
"""

import os
import time
from collections import Counter
from collections.abc import Callable, Container, Iterable, Sequence

import msgspec

from ...protocol.paths import slash_command
from ...protocol.replies import LearningsReport, MarkerInfo
from ...protocol.words import plural
from ..capture.source import list_transcripts, stat_transcript
from .markers import Marker, MarkerIndexer, dedupe, is_processed, scan_file

SAVE_COMMAND = "/save-learnings"
NO_MARKERS = "📝 learning-capture: no unprocessed markers"


def _transcripts(markers: Iterable[Marker]) -> list[str]:
    """Distinct transcripts in first-seen order."""
    return list(dict.fromkeys(m.transcript for m in markers))


def doc_draft_count(markers: Iterable[Marker]) -> int:
    return sum(1 for m in markers if m.doc_impact != "none")


def session_start_report(markers: list[Marker], *, plugin: bool = False) -> str:
    """The SessionStart text for unprocessed markers; "" when there are none. `plugin`: the
    hooks came from the plugin, whose command is `/autoharness:save-learnings`."""
    markers = dedupe(markers)
    if not markers:
        return ""
    kinds = Counter(m.kind for m in markers)
    lines = [f"🧠 learning-capture: {plural(len(markers), 'unprocessed marker')} across "
             f"{plural(len(_transcripts(markers)), 'transcript')}",
             "  by kind: " + ", ".join(f"{kinds[k]} {k}" for k in sorted(kinds))]
    drafts = doc_draft_count(markers)
    if drafts:
        verb = "requires" if drafts == 1 else "require"
        lines.append(f"  {plural(drafts, 'marker')} {verb} doc drafts (README / doc site)")
    lines.append(f"→ Run: {slash_command(SAVE_COMMAND[1:], plugin)}")
    return "\n".join(lines)


def marker_line(m: Marker) -> str:
    return f"[{m.kind}] {m.topic} (doc-impact: {m.doc_impact})"


def transcript_listing(markers: list[Marker], *, plugin: bool = False) -> str:
    """Single-transcript mode: the summary, then one `[kind] topic (doc-impact: x)` per marker."""
    markers = dedupe(markers)
    if not markers:
        return ""
    head = session_start_report(markers, plugin=plugin).splitlines()
    return "\n".join([head[0], *(f"  {marker_line(m)}" for m in markers), *head[1:]])


def marker_info(m: Marker) -> MarkerInfo:
    """The marker as a report lists it: its raw text (evidence for intents) and atl id are
    noise in a listing."""
    return MarkerInfo(**{f: getattr(m, f) for f in MarkerInfo.__struct_fields__})


def report(markers: list[Marker]) -> LearningsReport:
    """A report of the markers (both modes): deduplicated, in first-seen order."""
    markers = dedupe(markers)
    return LearningsReport(unprocessed=len(markers), transcripts=_transcripts(markers),
                           by_kind=dict(sorted(Counter(m.kind for m in markers).items())),
                           doc_drafts=doc_draft_count(markers),
                           markers=[marker_info(m) for m in markers])


def report_json(markers: list[Marker]) -> dict:
    """`--json` shape of a report (both modes)."""
    return msgspec.to_builtins(report(markers))


def status_json(indexer: MarkerIndexer, processed_for: Callable[[str], Container[str]]) -> dict:
    """`status --json` → `learnings: {markers_seen, unprocessed, projects}`."""
    seen = unprocessed = 0
    projects = 0
    for slug in indexer.slugs():
        known = indexer.markers(slug)
        seen += len(known)
        processed = processed_for(slug)
        waiting = sum(1 for m in known if not is_processed(m, processed))
        unprocessed += waiting
        projects += 1 if waiting else 0
    return {"markers_seen": seen, "unprocessed": unprocessed, "projects": projects}


def previous_transcripts(project_dir: str, since: float, lookback_days: int = 7,
                         *, now: float | None = None,
                         roots: Sequence[str] | None = None) -> list[str]:
    """Top-level transcripts of a Claude Code project dir modified after the cutoff, oldest
    first. The cutoff is `since` (last save), or `lookback_days` back on first use (since 0).
    Listed and opened beneath `roots` only (None: the directory itself is the root)."""
    now = time.time() if now is None else now
    cutoff = since if since > 0 else now - lookback_days * 86_400
    roots = [os.path.realpath(project_dir)] if roots is None else roots
    found = []
    try:
        names = list_transcripts(project_dir, roots)
    except OSError:
        return []
    for p in names:
        try:
            st = stat_transcript(p, roots)
        except OSError:
            continue
        if st.st_mtime > cutoff:
            found.append((st.st_mtime, p))
    return [p for _, p in sorted(found)]


def scan_previous_transcripts(project_dir: str, since: float, lookback_days: int = 7,
                              *, processed_ids: Container[str] = (), now: float | None = None,
                              roots: Sequence[str] | None = None) -> list[Marker]:
    """Offline report: unprocessed markers of the transcripts `previous_transcripts` picks,
    oldest transcript first, each id once. An unreadable transcript is skipped."""
    roots = [os.path.realpath(project_dir)] if roots is None else roots
    found: list[Marker] = []
    for path in previous_transcripts(project_dir, since, lookback_days, now=now, roots=roots):
        try:
            found.extend(scan_file(path, roots))
        except (OSError, ValueError):
            continue
    return [m for m in dedupe(found) if not is_processed(m, processed_ids)]
