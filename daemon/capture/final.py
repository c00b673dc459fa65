"""The turn's final answer: find its record in the transcript, or stand in for it.

Claude Code's Stop event carries the turn's final text (`last_assistant_message`), and Claude
Code may append that text's assistant record to the transcript only after the Stop hook ran
(while the model thinks the file is quiet, so waiting for quietness is not enough). A Stop's job
keeps the text, redacted and clipped (`final_answer_text`); before its window is cut the pool
waits, bounded, until `final_answer_written` finds the record; if it never comes, the window
carries `final_record` in its place.

Matching is on redacted text, so a job never needs the raw one: a record matches when its text
blocks, redacted and whitespace-normalised, equal the final text, end it (the last of several
text blocks: each block is a record of its own) or start with it (a clipped final text). The
backward scan stops at the turn's own prompt (a `user` record carrying the Stop's `promptId`;
no record before it can be the answer) and is bounded in bytes read. Blocking file I/O.
"""

import os
from collections.abc import Sequence

import msgspec

from .lines import BackwardLines, find_end
from .records import main_assistant
from .sniff import SNIFF_BYTES, record_type, record_type_from_tail
from .source import open_transcript

MAX_FINAL_RAW = 1024 * 1024  # redacted at most this much of a final text
MAX_FINAL_CHARS = 16_000  # a job keeps this much of it (a window clips records shorter still)
MAX_SCAN_BYTES = 4 * 1024 * 1024  # read back at most this far for the record
MAX_RECORD_BYTES = 2 * 1024 * 1024  # an assistant record longer than this is not decoded
MIN_PART = 32  # a partial match (suffix, prefix) needs this many characters
STAND_IN_NOTE = ("the turn's final answer, from Claude Code's Stop event: the transcript did not "
                 "hold it when this window was cut")


def final_answer_text(text: str, redactor) -> str:
    """What a job keeps of a Stop's final text: redacted, then clipped."""
    red, _ = redactor.redact(text[:MAX_FINAL_RAW])
    return red[:MAX_FINAL_CHARS]


def _norm(text: str) -> str:
    return " ".join(text.split())


def matches(record_text: str, final_text: str) -> bool:
    """Whether a record's (redacted) text is the final text's record; both normalised here."""
    r, f = _norm(record_text), _norm(final_text)
    if not r or not f:
        return False
    return r == f or (len(r) >= MIN_PART and f.endswith(r)) \
        or (len(f) >= MIN_PART and r.startswith(f))


def _text_of(line: bytes) -> str | None:
    """The joined text blocks of a main-chain assistant record (None for anything else)."""
    rec = main_assistant(line)
    if rec is None or rec.message is None:
        return None
    content = rec.message.content
    if isinstance(content, str) or content is None:
        return content
    return "".join(b.text for b in content if b.type == "text" and isinstance(b.text, str))


def final_answer_written(path: str | os.PathLike, final_text: str, prompt_id: str | None,
                         redactor, *, roots: Sequence[str] | None = None,
                         max_scan_bytes: int = MAX_SCAN_BYTES) -> bool:
    """Whether the transcript holds, as a complete line, the record of the turn's final answer
    (`final_text` as `final_answer_text` keeps it). Raises OSError if it cannot be read."""
    fd = open_transcript(path, roots)
    try:
        size = os.fstat(fd).st_size
        end, scanned, tail = find_end(fd, 0, size, max_scan_bytes)
        lines = BackwardLines(fd, 0, end, SNIFF_BYTES, max_scan_bytes - scanned, tail)
        turn = b'"%s"' % prompt_id.encode() if prompt_id else None
        while (item := lines.next()) is not None:
            start, stop, head = item
            n = stop - start
            whole = n <= len(head)
            rtype = record_type(head) or record_type_from_tail(
                head if whole else os.pread(fd, min(SNIFF_BYTES, n), stop - min(SNIFF_BYTES, n)))
            if rtype == "user" and turn is not None and b'"promptId"' in head and turn in head:
                return False  # the turn's own prompt (or tool result): its answer comes later
            if rtype != "assistant" or n > MAX_RECORD_BYTES:
                continue
            text = _text_of(head if whole else os.pread(fd, n, start))
            if text and matches(redactor.redact(text)[0], final_text):
                return True
        return False
    finally:
        os.close(fd)


def final_record(final_text: str) -> bytes:
    """The JSONL line a window carries for a final answer the transcript does not hold yet."""
    return msgspec.json.encode({
        "type": "assistant", "autoharness": STAND_IN_NOTE,
        "message": {"role": "assistant", "content": [{"type": "text", "text": final_text}]},
    }) + b"\n"
