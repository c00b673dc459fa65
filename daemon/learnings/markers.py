"""Find `<!-- learning -->` markers in transcript JSONL.

Only what the agent itself said counts: assistant text (plain-string content or `type: "text"`
blocks) of main-session records. Tool inputs and results, user turns, summaries, thinking and
sidechain records quote markers constantly (sessions that *discuss* the format echo it
everywhere), so they never do.

Cost: the literal prefix is searched in the whole buffer with `bytes.find` (C speed) and only the
few lines that contain it are located and JSON-decoded; a transcript without markers costs one
pass of `find`, never a Python loop over its lines.
"""

import hashlib
import os
import re
import threading
from collections.abc import Container, Iterable, Sequence

from ...protocol import paths
from ...protocol.replies import MarkerInfo
from ..capture.records import Record, main_assistant
from ..capture.source import open_transcript

PREFIX = b"<!-- learning"
_PREFIX_STR = PREFIX.decode()

KINDS = ("bug-fix", "decision", "pattern", "anti-pattern", "discovery", "convention")
DOC_IMPACTS = ("none", "readme", "docs", "both", "breaking")
TOPIC_RE = re.compile(r"^[a-z0-9]+(?:[-.][a-z0-9]+)*$")
MAX_TOPIC = 120  # the topic names a wiki file; keep it well under any file-name limit
READ_CHUNK = 1 << 20  # 1 MiB: bigger reads measured slower here (page faults of fresh buffers)
MAX_LINE = 16 << 20

# A block runs from the prefix to the first `-->`; it may not contain another `<!--`, so prose
# that mentions the prefix without closing it cannot swallow a real marker that follows.
_BLOCK_RE = re.compile(r"<!-- learning\b((?:(?!<!--).)*?)-->", re.S)
_FIELD_RE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_-]*)\s*:(.*)$")
_KEYS = {"topic": "topic", "kind": "kind", "doc-impact": "doc_impact", "doc_impact": "doc_impact",
         "body": "body"}


class Marker(MarkerInfo, frozen=True, kw_only=True):
    """One valid marker, where it was found, and when the agent wrote it (what a report
    lists of it, `MarkerInfo`, and the two fields it leaves out)."""

    raw: str = ""  # the marker text as written: the evidence of a marker intent
    # atl hashed only the first line of a body; for multi-line bodies this is that id, so an
    # atl user's processed ids still match (empty when equal to `id`).
    alt_id: str = ""


def marker_id(topic: str, kind: str, body: str) -> str:
    """The stable id shared with atl: first 16 hex chars of sha256(topic|kind|body)."""
    return hashlib.sha256(f"{topic}|{kind}|{body}".encode()).hexdigest()[:16]


def _fields(inner: str) -> dict[str, str]:
    """Loose `key: value` lines; a body continues over lines that do not start a new key."""
    out: dict[str, str] = {}
    body_lines: list[str] | None = None
    for line in inner.splitlines():
        m = _FIELD_RE.match(line)
        if m:
            key = _KEYS.get(m.group(1).lower())
            body_lines = None
            if key is None:
                continue  # unknown keys are ignored
            out[key] = m.group(2).strip()
            if key == "body":
                body_lines = [out["body"]]
        elif body_lines is not None:
            body_lines.append(line.strip())
            out["body"] = "\n".join(body_lines).strip()
    return out


def _is_placeholder(text: str) -> bool:
    """`...`, `…`, `<body>`-style text: the format spec quoted, not a lesson."""
    t = text.strip()
    return not t.strip(".… ") or (t.startswith("<") and t.endswith(">"))


def parse_block(inner: str) -> tuple[str, str, str, str, str] | None:
    """(topic, kind, doc_impact, body, alt_body) of one marker's inner text, or None if noise."""
    f = _fields(inner)
    topic, kind, body = f.get("topic", ""), f.get("kind", ""), f.get("body", "")
    doc = (f.get("doc_impact") or "none").lower()
    if not TOPIC_RE.match(topic) or len(topic) > MAX_TOPIC:
        return None  # missing, uppercase, spaced, `...` or spec-text topics are noise
    if kind not in KINDS or doc not in DOC_IMPACTS:
        return None  # `bug-fix | decision | ...` and other spec text
    if _is_placeholder(body):
        return None
    return topic, kind, doc, body, body.split("\n", 1)[0].strip()


def markers_in_text(text: str, **where: str) -> list[Marker]:
    """Every valid marker in one piece of assistant text, in order."""
    if _PREFIX_STR not in text:
        return []
    out = []
    for m in _BLOCK_RE.finditer(text):
        parsed = parse_block(m.group(1))
        if parsed is None:
            continue
        topic, kind, doc, body, first = parsed
        mid = marker_id(topic, kind, body)
        alt = marker_id(topic, kind, first) if first != body else ""
        out.append(Marker(id=mid, topic=topic, kind=kind, doc_impact=doc, body=body,
                          raw=m.group(0), alt_id=alt, **where))
    return out


def _assistant_texts(line: bytes) -> tuple[list[str], Record | None]:
    """The assistant text pieces of one JSONL record (each block separately), or nothing."""
    rec = main_assistant(line)
    msg = rec.message if rec is not None else None
    if msg is None or msg.role != "assistant":
        return [], None
    content = msg.content
    if isinstance(content, str):
        return [content], rec
    if not content:
        return [], None
    return [b.text for b in content if b.type == "text" and isinstance(b.text, str)], rec


def candidate_lines(data, lo: int = 0, hi: int | None = None) -> Iterable[tuple[int, int]]:
    """(start, end) of each line in data[lo:hi] holding the prefix, each line once, found with
    bytes.find and without copying the buffer."""
    hi = len(data) if hi is None else hi
    find, rfind = data.find, data.rfind
    pos = find(PREFIX, lo, hi)
    while pos != -1:
        nl = rfind(b"\n", lo, pos)
        start = nl + 1 if nl != -1 else lo
        end = find(b"\n", pos, hi)
        if end == -1:
            end = hi
        yield start, end
        pos = find(PREFIX, end, hi)


def extract_markers(data, *, source: str = "", start: int = 0, end: int | None = None
                    ) -> list[Marker]:
    """All valid markers in JSONL data (bytes or bytearray; data[start:end]), in order.

    Not deduplicated: the same lesson written twice is two markers with one id; callers that
    report or save deduplicate by id.
    """
    out: list[Marker] = []
    for line_start, line_end in candidate_lines(data, start, end):
        texts, rec = _assistant_texts(data[line_start:line_end])
        if not texts or rec is None:
            continue
        where = {"transcript": source,
                 "timestamp": rec.timestamp if isinstance(rec.timestamp, str) else "",
                 "session_id": rec.sessionId if isinstance(rec.sessionId, str) else ""}
        for text in texts:  # per block: a marker split over two blocks is not a marker
            out.extend(markers_in_text(text, **where))
    return out


def scan_file(path: str, roots: Sequence[str] | None = None) -> list[Marker]:
    """Markers of one transcript on disk (its complete lines), opened beneath `roots`."""
    return scan_range(path, roots=roots)[0]


def scan_range(path: str, start: int = 0, *, roots: Sequence[str] | None = None
               ) -> tuple[list[Marker], int]:
    """Markers of a transcript on disk from byte `start`, and the offset after its last complete
    line (a line still being written has no newline yet: it is left for the next scan).

    Read in READ_CHUNK pieces rather than mapped: Claude Code may rewrite a transcript on
    compaction, and touching a mapping past a shrunk file's end kills the process (SIGBUS).
    A line longer than MAX_LINE is skipped without being buffered whole; no assistant text
    record is anywhere near that size, huge lines are tool output.
    """
    found: list[Marker] = []
    done = start
    pending: list[bytes] = []  # pieces of a line not finished yet
    pending_size = 0
    skipping = False  # inside an over-long line: drop bytes up to its newline
    with open(open_transcript(path, roots), "rb") as f:  # see capture.source
        f.seek(start)
        while block := f.read(READ_CHUNK):
            nl = block.rfind(b"\n")
            if nl == -1:
                if not skipping:
                    pending.append(block)
                    pending_size += len(block)
                    if pending_size > MAX_LINE:
                        pending, pending_size, skipping = [], 0, True
                continue
            lo = 0
            if skipping:
                lo, skipping, buf = block.find(b"\n") + 1, False, block
            elif pending:
                buf = b"".join([*pending, block])
            else:
                buf = block
            tail = len(block) - nl - 1
            found.extend(extract_markers(buf, source=path, start=lo, end=len(buf) - tail))
            done = f.tell() - tail
            pending = [block[nl + 1:]] if tail else []
            pending_size = tail
    return found, done


def slug_for(path: str) -> str:
    """The Claude Code project slug a transcript belongs to (its directory under projects/)."""
    projects = os.path.abspath(paths.claude_projects_dir())
    p = os.path.abspath(path)
    rel = os.path.relpath(p, projects)
    if not rel.startswith(os.pardir) and os.sep in rel:
        return rel.split(os.sep, 1)[0]  # also right for <slug>/<session>/subagents/agent-*.jsonl
    return os.path.basename(os.path.dirname(p))


class MarkerIndexer:
    """Markers per project slug, fed incrementally by the transcript watcher.

    Holds every valid marker seen (first sighting per id wins); which ones are unprocessed is
    decided against the project's state at report time, so a scan never changes state.
    """

    MAX_PER_PROJECT = 20_000  # bounds memory for a daemon that lives for months

    def __init__(self) -> None:
        self._lock = threading.Lock()  # feed may run in a worker thread while RPC reads
        self._by_slug: dict[str, dict[str, Marker]] = {}

    def feed(self, path: str, offset: int, data: bytes) -> int:
        """Index complete JSONL lines read from `path` at `offset`; return new markers found.

        The offset is not needed: ids are content hashes, so re-fed bytes add nothing.
        """
        found = extract_markers(data, source=path)
        if not found:
            return 0
        slug = slug_for(path)
        added = 0
        with self._lock:
            known = self._by_slug.setdefault(slug, {})
            for m in found:
                if m.id not in known:
                    known[m.id] = m
                    added += 1
            excess = len(known) - self.MAX_PER_PROJECT
            if excess > 0:  # dicts keep insertion order: drop the oldest sightings
                for mid in list(known)[:excess]:
                    del known[mid]
        return added

    def reset(self, path: str) -> None:
        """The file was rewritten (shrank or new inode): forget what came from it.

        The watcher re-feeds it from the start, which finds the surviving markers again.
        """
        with self._lock:
            known = self._by_slug.get(slug_for(path))
            if known:
                for mid in [k for k, m in known.items() if m.transcript == path]:
                    del known[mid]

    def forget_saved(self, slug: str, ids: Iterable[str]) -> None:
        """Drop saved markers from memory (state keeps them out of reports anyway)."""
        with self._lock:
            known = self._by_slug.get(slug, {})
            for mid in ids:
                known.pop(mid, None)

    def slugs(self) -> list[str]:
        with self._lock:
            return [s for s, known in self._by_slug.items() if known]

    def markers(self, slug: str) -> list[Marker]:
        with self._lock:
            return list(self._by_slug.get(slug, {}).values())

    def unprocessed(self, slug: str, processed_ids: Container[str]) -> list[Marker]:
        """Markers of `slug` whose id (or atl-compatible id) is not among `processed_ids`."""
        return [m for m in self.markers(slug) if not is_processed(m, processed_ids)]

    def to_state(self) -> dict[str, list[Marker]]:
        """The markers per slug: the snapshot's `Markers.projects`."""
        with self._lock:
            return {s: list(known.values()) for s, known in self._by_slug.items() if known}

    def restore(self, projects: dict[str, list[Marker]]) -> None:
        """Replace what this indexer holds with `to_state()` output."""
        by_slug = {s: {m.id: m for m in dedupe(items)} for s, items in projects.items()}
        with self._lock:
            self._by_slug = by_slug


def is_processed(m: Marker, processed_ids: Container[str]) -> bool:
    return m.id in processed_ids or (bool(m.alt_id) and m.alt_id in processed_ids)


def dedupe(markers: Iterable[Marker]) -> list[Marker]:
    """First occurrence of each id, in order."""
    seen: set[str] = set()
    out = []
    for m in markers:
        if m.id not in seen:
            seen.add(m.id)
            out.append(m)
    return out
