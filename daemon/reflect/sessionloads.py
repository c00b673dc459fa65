"""The skills a session loaded before a point of its transcript, for grounding `missed`.

A `missed` verdict says the situation called for a skill the agent never loaded; a load one
turn earlier in the same session (in an earlier window, or in the records a forked session
copied from its parent) means it was not missed. So each reflected window carries the loads
of its transcript from the first byte to the window's end (`promote.loads` refs).

Scanning is incremental per transcript: the offset reached and the loads found are kept in
memory (per path and inode), so a session's windows cost the new bytes only; a restart scans
each transcript once more. Only lines that can hold a load (`"Skill"` or `SKILL.md`) are
parsed. A record over MAX_LINE_BYTES (a huge tool output) is searched as text, by its head.
Blocking I/O: call it from a worker thread.
"""

import os
import threading
from collections.abc import Sequence

from ..capture.source import open_transcript
from ..promote.loads import line_refs

CHUNK = 1024 * 1024
MAX_LINE_BYTES = 4 * 1024 * 1024
MAX_REFS = 500  # per transcript: more distinct loads than any session makes
_NEEDLES = (b'"Skill"', b"SKILL.md")


class SessionLoads:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[int, int, list[str]]] = {}  # path -> (inode, offset, refs)

    def before(self, path: str, end: int, roots: Sequence[str] | None = None) -> list[str]:
        """The loads in `path`'s bytes [0, end) (`end` a line boundary: a watermark)."""
        fd = open_transcript(path, roots)
        try:
            inode = os.fstat(fd).st_ino
            with self._lock:
                known = self._seen.get(path)
            start, found = 0, []
            if known and known[0] == inode and known[1] <= end:
                start, found = known[1], list(known[2])
            found = _scan(fd, start, end, found)
        finally:
            os.close(fd)
        with self._lock:
            self._seen[path] = (inode, end, found)
            if len(self._seen) > 1024:  # transcripts of sessions long gone
                self._seen.pop(next(iter(self._seen)))
        return list(found)


def _add(line: bytes, found: list[str]) -> None:
    if not any(n in line for n in _NEEDLES):
        return
    for r in line_refs(line.decode("utf-8", "replace")):
        if r not in found and len(found) < MAX_REFS:
            found.append(r)


def _scan(fd: int, start: int, end: int, found: list[str]) -> list[str]:
    pos, carry = start, b""
    while pos < end:
        data = os.pread(fd, min(CHUNK, end - pos), pos)
        if not data:
            break
        pos += len(data)
        lines = (carry + data).split(b"\n")
        carry = lines.pop()
        for line in lines:
            _add(line, found)
        if len(carry) > MAX_LINE_BYTES:
            _add(carry[:MAX_LINE_BYTES], found)  # its head: the tool_use, if it is one
            carry = carry[:0]  # the rest of this record is not searched
    if carry:
        _add(carry, found)
    return found
