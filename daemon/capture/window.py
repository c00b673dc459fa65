"""Cut the window: the records of a transcript from a watermark to its last complete line.

The transcript is an opaque log: the window is JSONL-shaped records after the watermark, in
order, never a reconstructed chat. With `record_types` set (the pipeline passes
`records.WORK_TYPES`), records of any other type (Claude Code's bookkeeping: request shapes and
blobs, progress, cost state, ...) are left out by their type alone, *before* the byte cap, so
they never crowd out the work; they are counted per type. With `slim` (the pipeline sets it),
each record left is decoded and sent as `records.slim` shapes it (the work, without ids,
timestamps, usage, signatures or second copies), and only when it carries work
(`records.work_kind`: some `system` subtypes, queued prompts); the rest is counted too.

The window is bounded three ways:

* each record is bounded by `max_record_bytes` (a compaction summary by `max_summary_bytes`):
  its longest strings lose their middle, so it keeps its content's beginning and end, with a
  visible marker (`clip.fit`); a record that cannot be decoded keeps its raw head and end.
  Within it, each tool_use and tool_result block (`records.tool_blocks`) is bounded first by
  `max_tool_bytes` the same way (`clip.squeeze`), so a record's text is cut last: every string
  cut from a tool block only raises the level its text is cut at;
* the window keeps the **newest** records under `max_window_bytes`, with a leading marker line
  naming how many bytes/records were dropped (the digest covers them: see `packet`);
* the bytes read are bounded by `max_scan_bytes`, whatever the span: the file is read backward
  from its end in chunks and reading stops once the window is full, so a cut costs O(window),
  not O(file). An over-long line is never buffered whole, and never decoded past
  `MAX_DECODE_BYTES`.

Records before a compaction whose summary the window holds are not sent again: the cut stops at
the `compact_boundary` and says how many bytes the summary covers. Records already handed to a
reflector (`reflected`: their top-level `uuid`s; a forked session's transcript starts with
copies of its parent's records, same `uuid`) are left out and counted; the uuids of the records
kept are returned, to be remembered once the window is reflected. A record the transcript does
not hold yet (`extra`: the turn's final answer, from the Stop event) can be carried as the
newest. The markers the marker rule finds in the kept records (assistant text only) are
returned whole, taken before any clip.

The transcript is opened read-only by `source.open_transcript` (beneath its root, never
through a link, never a FIFO or a device) and the bytes before the watermark are never read
(except one byte when the watermark is already known to be invalid, to align the re-read).
"""

import os
from collections.abc import Container, Sequence

import msgspec

from ..learnings.markers import markers_in_text
from .clip import clip_raw, fit, squeeze
from .lines import CHUNK, BackwardLines, find_end
from .records import (
    assistant_texts,
    is_compact_boundary,
    is_compact_summary,
    slim,
    tool_blocks,
    work_kind,
)
from .sniff import (
    SNIFF_BYTES,
    record_type,
    record_type_from_tail,
    record_uuid_from_tail,
)
from .source import open_transcript

DEFAULT_MAX_SCAN_BYTES = 16 * 1024 * 1024
MAX_DECODE_BYTES = 4 * 1024 * 1024  # a longer record is kept raw, by its head and end


class Window(msgspec.Struct, frozen=True, kw_only=True):
    """One cut. `[start, end)` is the span it covers: `dropped_bytes` at its head were left out,
    the rest is in `data` (clipped records marked). `end` is the next watermark."""

    data: bytes
    start: int
    end: int
    dropped_bytes: int = 0
    dropped_records: int = 0
    clipped_records: int = 0
    kept_records: int = 0
    fallback: bool = False
    fallback_reason: str = ""
    scanned_bytes: int = 0
    inode: int = 0
    size: int = 0
    # records left out by type (`record_types`) among those scanned, and their raw bytes
    bookkeeping_records: int = 0
    bookkeeping_bytes: int = 0
    bookkeeping_types: dict[str, int] = {}
    # records left out because a reflector already had them (`reflected`), and their raw bytes
    reflected_records: int = 0
    reflected_bytes: int = 0
    summarised_bytes: int = 0  # left out before a compaction whose summary the window holds
    uuids: list[str] = []  # of the records kept, oldest first (collected with `reflected`)
    markers: list[str] = []  # the marker rule's markers in the kept records, oldest first
    extra: bool = False  # the window ends with the `extra` record


def _invalid_reason(start: int, size: int, inode: int, expect_inode, expect_size) -> str:
    if start < 0:
        return "negative watermark"
    if expect_inode is not None and inode != expect_inode:
        return "file replaced (inode changed)"
    if expect_size is not None and size < expect_size:
        return "file shrank (rewritten)"
    if start > size:
        return "watermark past end of file"
    return ""


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """The bounds of one cut (see `cut_window`)."""

    max_record_bytes: int
    max_window_bytes: int
    max_summary_bytes: int
    max_tool_bytes: int
    max_scan_bytes: int


class _Kept(msgspec.Struct):
    out: bytes
    start: int
    clipped: bool
    uuid: str | None
    markers: list[str]


class _Cut:
    """One backward pass over `[lo, end)`: each record is kept (shaped and clipped) or left out,
    and why is counted, until the window is full, the scan budget is spent or `lo` is reached."""

    def __init__(self, fd: int, lines: BackwardLines, lo: int, end: int, limits: Limits, *,
                 record_types, slim: bool, reflected):
        self.fd, self.lines, self.lo, self.limits = fd, lines, lo, limits
        self.record_types, self.slim, self.reflected = record_types, slim, reflected
        self.kept: list[_Kept] = []  # newest first
        self.used = 0
        self.kept_start = end  # everything in [kept_start, end) is kept or accounted for
        self.dropped_seen = 0
        self.scanned = 0  # bytes read besides the backward scan (record ends, whole records)
        self.skipped: dict[str, int] = {}
        self.skipped_bytes = 0
        self.seen_records = self.seen_bytes = 0
        self.summarised_bytes = 0
        self.summary_kept = False
        # past a compaction the window holds the summary of: the uuids of the records it kept
        # verbatim (not summarised), still to be sent; None before the boundary is reached
        self.preserved: set[str] | None = None

    # -- reading ----------------------------------------------------------------------------

    def _pread(self, n: int, off: int) -> bytes:
        self.scanned += n
        self.lines.budget -= n
        return os.pread(self.fd, n, off)

    def _end_of(self, s: int, e: int, head: bytes) -> bytes:
        """The record's last bytes (its whole self when the head holds it)."""
        if e - s <= len(head):
            return head
        n = min(SNIFF_BYTES, e - s)
        return self._pread(n, e - n)

    def _type(self, s: int, e: int, head: bytes) -> str | None:
        return record_type(head) or record_type_from_tail(self._end_of(s, e, head))

    def _decode(self, s: int, e: int, head: bytes) -> dict | None:
        """The record decoded, or None when it is not a JSON object or too long to read."""
        n = e - s
        if n > len(head) and (n > MAX_DECODE_BYTES or n > self.lines.budget):
            return None
        try:
            rec = msgspec.json.decode(head if n <= len(head) else self._pread(n, s))
        except msgspec.DecodeError:
            return None
        return rec if isinstance(rec, dict) else None

    # -- one record -------------------------------------------------------------------------

    def _leave_out(self, s: int, e: int, kind: str) -> None:
        self.skipped[kind] = self.skipped.get(kind, 0) + 1
        self.skipped_bytes += e - s
        self.kept_start = s  # accounted for: left out as bookkeeping, not by the cap

    def _shape(self, rec: dict, slimmed: bool = False) -> tuple[bytes, bool, list[str]]:
        """A decoded record slimmed (unless it is already) and bounded, and its markers (taken
        before any clip)."""
        found = [mk.raw for text in assistant_texts(rec) for mk in markers_in_text(text)]
        limit = self.limits.max_summary_bytes if is_compact_summary(rec) \
            else self.limits.max_record_bytes
        rec = rec if slimmed else slim(rec)
        tools = [squeeze(block, self.limits.max_tool_bytes) for block in tool_blocks(rec)]
        out, clipped = fit(rec, limit)
        return out, clipped or any(tools), found

    def _raw(self, s: int, e: int, head: bytes) -> tuple[bytes, bool]:
        """A record kept as its raw bytes, clipped to its head and end when too long."""
        limit = self.limits.max_record_bytes
        if e - s <= limit:
            return head[: e - s], False
        tail = self._pread(min(limit, e - s), e - min(limit, e - s))
        return clip_raw(head, tail, e - s, limit), True

    def _classify(self, s: int, e: int, head: bytes) -> tuple[str | None, dict | None]:
        """(what the record is left out as, None when it is kept; the record decoded, with
        `slim`). A type outside `record_types` is left out unread; one not found in its head
        or end is taken from the whole record when it is decoded anyway."""
        rtype = self._type(s, e, head) if self.record_types is not None else None
        if rtype is not None and rtype not in self.record_types:
            return rtype, None
        rec = self._decode(s, e, head) if self.slim else None
        if rec is not None:
            return work_kind(rec), rec
        if self.record_types is not None and rtype is None:
            return "(unknown)", None
        return None, None

    def _summarised(self, s: int, e: int, head: bytes) -> bool:
        """Whether a record before the compaction is one its summary stands for (counted),
        rather than one the compaction kept verbatim."""
        uuid = record_uuid_from_tail(self._end_of(s, e, head))
        if uuid is not None and self.preserved is not None and uuid in self.preserved:
            self.preserved.discard(uuid)
            return False
        self.summarised_bytes += e - s
        self.kept_start = s
        return True

    def _past_boundary(self, rec: dict) -> bool:
        """At the boundary of a compaction whose summary is kept: True when the cut stops
        here, every older record being summarised; else go on for the records it preserved."""
        meta = rec.get("compactMetadata")
        kept = meta.get("preservedMessages") if isinstance(meta, dict) else None
        uuids = kept.get("allUuids") or kept.get("uuids") if isinstance(kept, dict) else None
        self.preserved = {u for u in uuids if isinstance(u, str)} if isinstance(uuids, list) \
            else set()
        return not self.preserved

    def _stop_summarised(self, s: int) -> bool:
        """Everything in `[lo, s)` is summarised: the cut ends (False)."""
        self.summarised_bytes += s - self.lo
        self.kept_start = self.lo
        return False

    def _uuid(self, s: int, e: int, head: bytes, rec: dict | None) -> str | None:
        """The record's top-level `uuid`, when `reflected` asks for it."""
        if self.reflected is None:
            return None
        uuid = rec.get("uuid") if rec is not None else \
            record_uuid_from_tail(self._end_of(s, e, head))
        return uuid if isinstance(uuid, str) else None

    def take(self, s: int, e: int, head: bytes) -> bool:
        """Keep or leave out the record `[s, e)`; False once the window is full."""
        if self.preserved is not None and self._summarised(s, e, head):
            return True
        kind, rec = self._classify(s, e, head)
        if kind is not None:
            self._leave_out(s, e, kind)
            return True
        uuid = self._uuid(s, e, head, rec)
        if uuid is not None and self.reflected is not None and uuid in self.reflected:
            self.seen_records += 1
            self.seen_bytes += e - s
            self.kept_start = s  # accounted for: a reflector had it already
            return True
        if rec is not None:
            out, clipped, found = self._shape(rec)
        else:
            (out, clipped), found = self._raw(s, e, head), []
        if not self.add(_Kept(out, s, clipped, uuid, found)):
            self.dropped_seen += 1 + self.lines.newlines_before()
            return False
        if self.preserved is not None and not self.preserved:
            return self._stop_summarised(s)  # the last record the compaction preserved
        if rec is not None and is_compact_boundary(rec) and self.summary_kept \
                and self._past_boundary(rec):
            return self._stop_summarised(s)  # older records are what the summary stands for
        self.summary_kept = self.summary_kept or (rec is not None and is_compact_summary(rec))
        return True

    def add(self, item: _Kept) -> bool:
        if self.used + len(item.out) > self.limits.max_window_bytes:
            return False
        self.kept.append(item)
        self.used += len(item.out)
        self.kept_start = item.start
        return True

    def extra(self, line: bytes, end: int) -> None:
        """A record the transcript does not hold yet, kept as the newest (already slim)."""
        line = line if line.endswith(b"\n") else line + b"\n"
        try:
            rec = msgspec.json.decode(line)
        except msgspec.DecodeError:
            rec = None
        if isinstance(rec, dict):
            out, clipped, found = self._shape(rec, slimmed=True)
        else:
            limit, found = self.limits.max_record_bytes, []
            clipped = len(line) > limit
            out = clip_raw(line, line, len(line), limit) if clipped else line
        self.add(_Kept(out, end, clipped, None, found))
        self.kept_start = end

    def run(self, aligned: bool) -> None:
        while (item := self.lines.next()) is not None:
            s, e, head = item
            if s == self.lo and not aligned:
                self.dropped_seen += 1  # a fragment of a record cut by the re-read's start
                return
            if not self.take(s, e, head):
                return
        if self.lines.exhausted and self.kept_start > self.lo:
            self.dropped_seen += 1  # the line the budget ran out in (older ones unseen)

    # -- the marker line ----------------------------------------------------------------------

    def marker(self, start: int, reason: str, end: int) -> bytes:
        parts = []
        if reason:
            parts.append(f"fallback: watermark {start} invalid ({reason}); "
                         f"re-read the last {end - self.lo} bytes")
        if self.kept_start > self.lo:
            parts.append(f"dropped {self.kept_start - self.lo} bytes ({self.dropped_seen} "
                         f"records seen) before this window; kept the newest "
                         f"{len(self.kept)} records")
        if self.summarised_bytes:
            parts.append(f"left out the {self.summarised_bytes} bytes before the compaction "
                         f"in this window (its summary covers them)")
        if self.seen_records:
            parts.append(f"left out {self.seen_records} records an earlier window already had "
                         f"(copied from another session, or re-read)")
        return f"[autoharness: {'; '.join(parts)}]\n".encode() if parts else b""

    def close(self, start: int, reason: str, end: int) -> bytes:
        """The marker line, once the oldest kept records that leave it no room are given up."""
        head = self.marker(start, reason, end)
        while head and self.kept and self.used + len(head) > self.limits.max_window_bytes:
            self.used -= len(self.kept.pop().out)
            self.kept_start = self.kept[-1].start if self.kept else end
            self.summarised_bytes = 0
            self.dropped_seen += 1
            head = self.marker(start, reason, end)
        self.kept.reverse()
        return head


def _span(fd: int, start: int, size: int, inode: int, expect_inode, expect_size,
          fallback_bytes: int) -> tuple[int, bool, str]:
    """(lo, aligned, reason): where the cut starts, whether `lo` is a line start, and why the
    watermark was not used ("" when it was)."""
    reason = _invalid_reason(start, size, inode, expect_inode, expect_size)
    if not reason:
        return start, True, ""
    lo = max(0, size - max(1, fallback_bytes))
    # the re-read starts mid-file: its first line is whole only after a newline
    return lo, lo == 0 or os.pread(fd, 1, lo - 1) == b"\n", reason


def cut_window(
    path: str | os.PathLike,
    start: int,
    *,
    max_record_bytes: int = 4_000,
    max_window_bytes: int = 200_000,
    max_summary_bytes: int = 32_000,
    max_tool_bytes: int | None = None,
    max_scan_bytes: int = DEFAULT_MAX_SCAN_BYTES,
    expect_inode: int | None = None,
    expect_size: int | None = None,
    fallback_bytes: int | None = None,
    record_types: frozenset[str] | None = None,
    slim: bool = False,
    roots: Sequence[str] | None = None,
    reflected: Container[str] | None = None,
    extra: bytes | None = None,
) -> Window:
    """Cut the window of `path` from watermark `start` to its last complete line.

    With `record_types`, only records of those top-level types are kept (before the byte cap);
    the others are counted in `bookkeeping_*`. None keeps every record. With `slim`, each
    record is decoded and sent as `records.slim` shapes it, only when it carries work
    (`records.work_kind`), its tool blocks bounded by `max_tool_bytes` (None: the record's
    bound) and the whole by `fit`; its markers are collected before any clip.

    With `reflected`, records whose top-level `uuid` it holds are left out (counted in
    `reflected_*`) and the kept records' uuids are returned in `uuids`. `extra` (one JSONL
    line) is kept as the newest record, clipped and capped like the others.

    An invalid watermark (past EOF, or the file replaced/shrunk since `expect_inode` /
    `expect_size` were taken) falls back to re-reading at most `fallback_bytes` (default:
    `max_window_bytes`) of the tail, marked as such. Raises OSError if the file cannot be read.
    """
    limits = Limits(max_record_bytes=max(64, int(max_record_bytes)),
                    max_window_bytes=max(1, int(max_window_bytes)),
                    max_summary_bytes=max(64, int(max_summary_bytes)),
                    max_tool_bytes=max(64, int(max_tool_bytes if max_tool_bytes is not None
                                               else max_record_bytes)),
                    max_scan_bytes=int(max_scan_bytes))
    budget = max(limits.max_scan_bytes, limits.max_window_bytes + CHUNK)
    fd = open_transcript(path, roots)
    try:
        st = os.fstat(fd)
        size, inode = st.st_size, st.st_ino
        lo, aligned, reason = _span(fd, start, size, inode, expect_inode, expect_size,
                                    fallback_bytes if fallback_bytes is not None
                                    else limits.max_window_bytes)
        end, scanned, tail = find_end(fd, lo, size, budget)
        head_bytes = limits.max_record_bytes if record_types is None and not slim \
            else max(limits.max_record_bytes, SNIFF_BYTES)
        lines = BackwardLines(fd, lo, end, head_bytes, budget - scanned, tail)
        cut = _Cut(fd, lines, lo, end, limits, record_types=record_types, slim=slim,
                   reflected=reflected)
        if extra:
            cut.extra(extra, end)
        cut.run(aligned)
        scanned += lines.scanned + cut.scanned
    finally:
        os.close(fd)
    head = cut.close(start, reason, end)
    kept = cut.kept
    return Window(
        data=head + b"".join(k.out for k in kept),
        start=lo, end=end,
        dropped_bytes=cut.kept_start - lo,
        dropped_records=cut.dropped_seen,
        clipped_records=sum(1 for k in kept if k.clipped),
        kept_records=len(kept),
        fallback=bool(reason), fallback_reason=reason,
        scanned_bytes=scanned, inode=inode, size=size,
        bookkeeping_records=sum(cut.skipped.values()),
        bookkeeping_bytes=cut.skipped_bytes,
        bookkeeping_types=cut.skipped,
        reflected_records=cut.seen_records, reflected_bytes=cut.seen_bytes,
        summarised_bytes=cut.summarised_bytes,
        uuids=[k.uuid for k in kept if k.uuid is not None],
        markers=[m for k in kept for m in k.markers],
        extra=bool(extra) and bool(kept) and kept[-1].start == end,
    )


def tail_start(path: str | os.PathLike, nbytes: int, *, roots: Sequence[str] | None = None) -> int:
    """A line start about `nbytes` before the end of `path` (0 for a shorter file): a watermark
    for "the recent past" that does not begin the window mid-record. Reads at most one chunk."""
    fd = open_transcript(path, roots)
    try:
        size = os.fstat(fd).st_size
        lo = max(0, size - max(0, int(nbytes)))
        if lo == 0:
            return 0
        pos = lo - 1  # the byte before lo decides whether lo already starts a line
        while pos < size:
            chunk = os.pread(fd, CHUNK, pos)
            if not chunk:
                break
            i = chunk.find(b"\n")
            if i >= 0:
                return pos + i + 1
            pos += len(chunk)
        return size
    finally:
        os.close(fd)
