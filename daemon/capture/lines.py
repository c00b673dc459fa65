"""Complete JSONL lines of a transcript, read backward from an offset in bounded chunks.

A line still being written (no newline yet) is never returned; an over-long line is never
buffered whole. The window, the digest and the final-answer check all read this way.
"""

import os

CHUNK = 64 * 1024


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


