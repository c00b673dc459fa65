"""Cut the window: the raw JSONL bytes of a transcript from a watermark to its last complete line.

The window is raw bytes; the only interpretation is a record's top-level `type`, read from its
head. With `record_types` set (the pipeline passes `CONVERSATION_TYPES`), records of any other
type (Claude Code's bookkeeping: attachments, request shapes and blobs, cost state, ...) are left
out *before* the byte cap, so they never crowd out the conversation; they are counted per type.
It is an allow-list: a bookkeeping type that appears in a later Claude Code is left out too. A
record whose type cannot be read from its first `SNIFF_BYTES` is not conversation either.

The window is bounded three ways:

* each record (line) is clipped to `max_record_bytes`, with a visible clip marker;
* the window keeps the **newest** whole records under `max_window_bytes`, with a leading marker
  line naming how many bytes/records were dropped;
* the bytes read are bounded by `max_scan_bytes`, whatever the span: the file is read backward
  from its end in chunks and reading stops once the window is full, so a cut costs O(window),
  not O(file). An over-long line is never buffered whole: only its head is kept while scanning
  back to its start.

Two more things can shape a window. Records already handed to a reflector (`reflected`: their
top-level `uuid`s; a forked session's transcript starts with copies of its parent's records,
same `uuid`) are left out and counted, like bookkeeping; the uuids of the records kept are
returned, to be remembered once the window is reflected. And a record the transcript does not
hold yet (`extra`: the turn's final answer, from the Stop event) can be carried as the newest.

The transcript is opened read-only by `source.open_transcript` (beneath its root, never
through a link, never a FIFO or a device) and the bytes before the watermark are never read (except
one byte when the watermark is already known to be invalid, to align the re-read).
"""

import os
import re
from collections.abc import Container, Sequence

import msgspec

from claude_autoharness.daemon.capture.source import open_transcript

CHUNK = 64 * 1024
DEFAULT_MAX_SCAN_BYTES = 16 * 1024 * 1024
# A clip point never cuts through a token-like run shorter than this (half a secret would leak
# past redaction); longer runs (base64 blobs) are cut anyway.
_TOKEN_BACKOFF = 128
_TOKEN_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+/=.")
# The record types that say what happened in a session; everything else is bookkeeping.
CONVERSATION_TYPES = frozenset({"user", "assistant", "system", "summary"})
# How much of a record's head is searched for its top-level `type` (Claude Code writes it
# within the first ~150 bytes, before the message).
SNIFF_BYTES = 4096
# JSON strings (escapes included) and the structural characters that change nesting depth
_JSON_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]]')
# a `"type": "<string>"` pair (the value captured)
_TYPE_KEY = re.compile(rb'"type"\s*:\s*("[^"\\]*(?:\\.[^"\\]*)*")')
_UUID_KEY = re.compile(rb'"uuid"\s*:\s*("[^"\\]*(?:\\.[^"\\]*)*")')


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
    uuids: list[str] = []  # of the records kept, oldest first (collected with `reflected`)
    extra: bool = False  # the window ends with the `extra` record


def _escaped(data: bytes, i: int) -> bool:
    """Whether the byte at `i` is escaped (an odd run of backslashes before it)."""
    k = i
    while k > 0 and data[k - 1] == 0x5C:
        k -= 1
    return (i - k) % 2 == 1


def _nesting(tokens: list[bytes]) -> int:
    """Opened minus closed objects and arrays among `tokens`."""
    return (tokens.count(b"{") + tokens.count(b"[")) - (tokens.count(b"}") + tokens.count(b"]"))


def _type_value(m: "re.Match[bytes]") -> str | None:
    try:
        return msgspec.json.decode(m.group(1), type=str)
    except msgspec.DecodeError:
        return None


def record_type(head: bytes) -> str | None:
    """The top-level `"type"` of a JSON object record, read from its head (a prefix of the line);
    None when the head is not an object or names no top-level type in it.

    A `"type":` whose opening quote is not escaped is a real key (inside a JSON string every
    quote is escaped); it is the top-level one when the tokens before it leave exactly one
    object open. Tokenizing is done by the regex engine, not byte by byte."""
    if not head.lstrip().startswith(b"{"):
        return None
    depth, pos = 0, 0  # nesting at `pos`, always a token boundary (a key's opening quote)
    for m in _TYPE_KEY.finditer(head):
        if _escaped(head, m.start()):
            continue
        depth += _nesting(_JSON_TOKEN.findall(head, pos, m.start()))
        pos = m.start()
        if depth == 1:
            return _type_value(m)
    return None


def record_type_from_tail(tail: bytes) -> str | None:
    """The top-level `"type"` of a JSON object record, read from its end (a suffix of the line,
    newline allowed): Claude Code 2.1 writes `type` after the message. A real key (opening
    quote not escaped) is the top-level one when the tokens after it close exactly one more
    object than they open (the record's own closing brace)."""
    return _top_from_tail(tail, _TYPE_KEY)


def record_uuid_from_tail(tail: bytes) -> str | None:
    """The top-level `"uuid"` of a record, read from its end (Claude Code writes it after the
    message); as `record_type_from_tail`."""
    return _top_from_tail(tail, _UUID_KEY)


def _top_from_tail(tail: bytes, key: "re.Pattern[bytes]") -> str | None:
    data = tail.rstrip()
    if not data.endswith(b"}"):
        return None
    depth, pos = 0, len(data)  # nesting change from `pos` (a token boundary) to the end
    for m in reversed([m for m in key.finditer(data) if not _escaped(data, m.start())]):
        depth += _nesting(_JSON_TOKEN.findall(data, m.start(), pos))
        pos = m.start()
        if depth == -1:
            return _type_value(m)
    return None


class BackwardLines:
    """Complete lines of `[lo, hi)` from newest to oldest, read backward in chunks.

    `hi` must sit right after a newline. Memory stays under `head_bytes + CHUNK` whatever the
    line lengths: while a line's start is not found, only its lowest bytes (its head) are kept.
    """

    def __init__(self, fd: int, lo: int, hi: int, head_bytes: int, budget: int,
                 tail: bytes = b""):
        self.fd, self.lo, self.head_bytes, self.budget = fd, lo, head_bytes, budget
        # `tail` = bytes [hi - len(tail), hi), already read by the caller
        self.pos = hi - len(tail)  # bytes [pos, hi) have been read
        self.line_end = hi
        self.buf = tail  # bytes [pos, pos + len(buf)): the head part of the current line region
        self.scanned = 0
        self.exhausted = False  # the scan budget ran out before `lo` was reached

    def next(self) -> tuple[int, int, bytes] | None:
        """(start, end, head) of the previous line, or None at `lo` or when the budget is spent.

        At `lo` the last line returned starts exactly at `lo` (the caller decides whether `lo`
        was a real line start).
        """
        while True:
            # the current line's own newline (at line_end - 1) is not a separator
            lim = min(len(self.buf), self.line_end - 1 - self.pos)
            j = self.buf.rfind(b"\n", 0, lim) if lim > 0 else -1
            if j >= 0:
                start, end = self.pos + j + 1, self.line_end
                head = self.buf[j + 1 : j + 1 + self.head_bytes]
                self.line_end, self.buf = start, self.buf[: j + 1]
                return start, end, head
            if self.pos <= self.lo:
                if self.line_end > self.lo:
                    start, end = self.lo, self.line_end
                    head = self.buf[: self.head_bytes]
                    self.line_end, self.buf = self.lo, b""
                    return start, end, head
                return None
            if self.budget <= 0:
                self.exhausted = True
                return None
            n = min(CHUNK, self.pos - self.lo, self.budget)
            self.pos -= n
            chunk = os.pread(self.fd, n, self.pos)
            if len(chunk) != n:  # the file shrank under us: treat the rest as unreadable
                self.exhausted = True
                self.pos += n
                return None
            self.budget -= n
            self.scanned += n
            # No newline was in the old buf, so its tail is the middle of one long line: keep
            # only what can still be that line's head.
            self.buf = chunk + self.buf[: self.head_bytes]

    def newlines_before(self) -> int:
        """Line ends already read before the last line returned (records seen, not yet returned)."""
        return self.buf.count(b"\n")


def find_end(fd: int, lo: int, size: int, budget: int) -> tuple[int, int, bytes]:
    """Offset after the last newline in `[lo, size)` (or `lo` if none), bytes read, and the
    bytes read that precede that offset (so they need not be read again).

    A final line without newline is a record still being written: it stays for the next cut.
    """
    pos, scanned = size, 0
    while pos > lo and scanned < budget:
        n = min(CHUNK, pos - lo, budget - scanned)
        pos -= n
        chunk = os.pread(fd, n, pos)
        scanned += len(chunk)
        i = chunk.rfind(b"\n")
        if i >= 0:
            return pos + i + 1, scanned, chunk[: i + 1]
    return lo, scanned, b""


def _utf8_cut(data: bytes, n: int) -> int:
    """Largest cut <= n that does not split a UTF-8 sequence."""
    n = min(n, len(data))
    back = 0
    while n > 0 and back < 3 and n < len(data) and (data[n] & 0xC0) == 0x80:
        n -= 1
        back += 1
    return n


def _clip(head: bytes, raw_len: int, max_record_bytes: int) -> bytes:
    """The record's head with a visible marker, at most `max_record_bytes` long (plus newline)."""
    marker = b" [autoharness: record clipped, %d of %d bytes kept]\n"
    room = max(0, max_record_bytes - len(marker % (raw_len, raw_len)))
    cut = _utf8_cut(head, room)
    back = 0
    while cut > 0 and back < _TOKEN_BACKOFF and head[cut - 1] in _TOKEN_BYTES:
        cut -= 1
        back += 1
    if back == _TOKEN_BACKOFF or cut == 0:  # a long run (base64 etc.): cutting it is fine
        cut = _utf8_cut(head, room)
    return head[:cut] + marker % (cut, raw_len)


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


def cut_window(
    path: str | os.PathLike,
    start: int,
    *,
    max_record_bytes: int = 4_000,
    max_window_bytes: int = 200_000,
    expect_inode: int | None = None,
    expect_size: int | None = None,
    fallback_bytes: int | None = None,
    max_scan_bytes: int | None = None,
    record_types: frozenset[str] | None = None,
    roots: Sequence[str] | None = None,
    reflected: Container[str] | None = None,
    extra: bytes | None = None,
) -> Window:
    """Cut the window of `path` from watermark `start` to its last complete line.

    With `record_types`, only records of those top-level types are kept (before the byte cap);
    the others are counted in `bookkeeping_*`. None keeps every record.

    With `reflected`, records whose top-level `uuid` it holds are left out (counted in
    `reflected_*`) and the kept records' uuids are returned in `uuids`. `extra` (one JSONL
    line) is kept as the newest record, clipped and capped like the others.

    An invalid watermark (past EOF, or the file replaced/shrunk since `expect_inode` /
    `expect_size` were taken) falls back to re-reading at most `fallback_bytes` (default:
    `max_window_bytes`) of the tail, marked as such. Raises OSError if the file cannot be read.
    """
    max_record_bytes = max(64, int(max_record_bytes))
    max_window_bytes = max(1, int(max_window_bytes))
    budget = max_scan_bytes if max_scan_bytes is not None else DEFAULT_MAX_SCAN_BYTES
    budget = max(budget, max_window_bytes + CHUNK)
    fd = open_transcript(path, roots)
    try:
        st = os.fstat(fd)
        size, inode = st.st_size, st.st_ino
        reason = _invalid_reason(start, size, inode, expect_inode, expect_size)
        aligned = True
        if reason:
            fb = max(1, fallback_bytes if fallback_bytes is not None else max_window_bytes)
            lo = max(0, size - fb)
            # the re-read starts mid-file: its first line is whole only after a newline
            aligned = lo == 0 or os.pread(fd, 1, lo - 1) == b"\n"
        else:
            lo = start
        end, scanned, tail = find_end(fd, lo, size, budget)
        head_bytes = max_record_bytes if record_types is None else max(max_record_bytes,
                                                                           SNIFF_BYTES)
        lines = BackwardLines(fd, lo, end, head_bytes, budget - scanned, tail)
        # (output, line start, clipped, uuid), newest first
        kept: list[tuple[bytes, int, bool, str | None]] = []
        skipped: dict[str, int] = {}
        skipped_bytes = 0
        seen_records = seen_bytes = 0
        used = 0
        kept_start = end
        dropped_seen = 0
        if extra:
            line = extra if extra.endswith(b"\n") else extra + b"\n"
            out = _clip(line, len(line), max_record_bytes) if len(line) > max_record_bytes \
                else line
            if len(out) <= max_window_bytes:
                kept.append((out, end, len(line) > max_record_bytes, None))
                used += len(out)
        while True:
            item = lines.next()
            if item is None:
                if lines.exhausted and kept_start > lo:
                    dropped_seen += 1  # the line the budget ran out in (older ones unseen)
                break
            s, e, head = item
            if s == lo and not aligned:
                dropped_seen += 1  # a fragment of a record cut by the re-read's start
                break
            raw_len = e - s
            if record_types is not None:
                rtype = record_type(head)
                if rtype is None and raw_len > len(head):  # clipped head: try the record's end
                    n = min(SNIFF_BYTES, raw_len)
                    rtype = record_type_from_tail(os.pread(fd, n, e - n))
                    scanned += n
                elif rtype is None:
                    rtype = record_type_from_tail(head)
                if rtype not in record_types:
                    key = rtype if rtype is not None else "(unknown)"
                    skipped[key] = skipped.get(key, 0) + 1
                    skipped_bytes += raw_len
                    kept_start = s  # accounted for: left out by type, not by the cap
                    continue
            uuid = None
            if reflected is not None:
                if raw_len <= len(head):
                    uuid = record_uuid_from_tail(head)
                else:  # Claude Code writes `uuid` after the message: read the record's end
                    n = min(SNIFF_BYTES, raw_len)
                    uuid = record_uuid_from_tail(os.pread(fd, n, e - n))
                    scanned += n
                if uuid is not None and uuid in reflected:
                    seen_records += 1
                    seen_bytes += raw_len
                    kept_start = s  # accounted for: a reflector had it already
                    continue
            is_clipped = raw_len > max_record_bytes
            out = _clip(head, raw_len, max_record_bytes) if is_clipped else head
            if used + len(out) > max_window_bytes:
                dropped_seen += 1 + lines.newlines_before()
                break
            kept.append((out, s, is_clipped, uuid))
            used += len(out)
            kept_start = s
        scanned += lines.scanned
    finally:
        os.close(fd)

    def marker() -> bytes:
        parts = []
        if reason:
            parts.append(f"fallback: watermark {start} invalid ({reason}); "
                         f"re-read the last {end - lo} bytes")
        if kept_start > lo:
            parts.append(f"dropped {kept_start - lo} bytes ({dropped_seen} records seen) "
                         f"before this window; kept the newest {len(kept)} records")
        if seen_records:
            parts.append(f"left out {seen_records} records an earlier window already had "
                         f"(copied from another session, or re-read)")
        return f"[autoharness: {'; '.join(parts)}]\n".encode() if parts else b""

    head = marker()
    # the marker counts against the cap too: give up the oldest kept records until it fits
    while head and kept and used + len(head) > max_window_bytes:
        used -= len(kept.pop()[0])
        kept_start = kept[-1][1] if kept else end
        dropped_seen += 1
        head = marker()
    kept.reverse()
    return Window(
        data=head + b"".join(out for out, _, _, _ in kept),
        start=lo,
        end=end,
        dropped_bytes=kept_start - lo,
        dropped_records=dropped_seen,
        clipped_records=sum(1 for _, _, c, _ in kept if c),
        kept_records=len(kept),
        fallback=bool(reason),
        fallback_reason=reason,
        scanned_bytes=scanned,
        inode=inode,
        size=size,
        bookkeeping_records=sum(skipped.values()),
        bookkeeping_bytes=skipped_bytes,
        bookkeeping_types=skipped,
        reflected_records=seen_records,
        reflected_bytes=seen_bytes,
        uuids=[u for _, _, _, u in kept if u is not None],
        extra=bool(extra) and bool(kept) and kept[-1][1] == end,
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
