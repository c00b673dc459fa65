"""Redacting JSONL without ever changing a record's structure.

Redaction runs over a window's raw bytes in one pass (fast, and it sees a secret wherever the
JSON put it). A finding is meant to replace text inside a JSON string; should one ever reach
past a string's quote (a rule's value taking the next key), the record would lose a key or
change a type. So every record the pass changed is checked: it must still parse, with the
same keys and the same types everywhere. One that does not is redacted again value by value —
each string on its own, keys kept — which cannot change its structure.
"""

import json
from collections.abc import Callable


def shape(value):
    """A value's structure: keys and types, no contents."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(v) for v in value]
    return type(value).__name__


def _walk(value, redact: Callable[[str], tuple[str, dict[str, int]]], counts: dict[str, int]):
    if isinstance(value, str):
        out, found = redact(value)
        for k, n in found.items():
            counts[k] = counts.get(k, 0) + n
        return out
    if isinstance(value, dict):
        return {k: _walk(v, redact, counts) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, redact, counts) for v in value]
    return value


def _markers(line: bytes) -> dict[str, int]:
    out: dict[str, int] = {}
    for piece in line.split(b"[REDACTED:")[1:]:
        kind = piece.split(b"]", 1)[0].decode("ascii", "replace")
        out[kind] = out.get(kind, 0) + 1
    return out


def _parse(line: bytes):
    try:
        return json.loads(line)
    except ValueError:
        return None


def _same(before, after_line: bytes) -> bool:
    after = _parse(after_line)
    return after is not None and shape(after) == shape(before)


def _changed_lines(original: bytes, redacted: bytes):
    """(line index, original line, redacted line) of each line holding a new marker; the two
    texts have the same number of lines."""
    k, r_at, o_start, o_k = 0, 0, 0, 0
    seen = -1
    m = redacted.find(b"[REDACTED:")
    while m != -1:
        k += redacted.count(b"\n", r_at, m)
        r_at = m
        if k != seen:
            seen = k
            r_start = redacted.rfind(b"\n", 0, m) + 1
            r_end = redacted.find(b"\n", m)
            while o_k < k:  # the original's k-th line
                o_start = original.index(b"\n", o_start) + 1
                o_k += 1
            o_end = original.find(b"\n", o_start)
            yield k, original[o_start:None if o_end < 0 else o_end], \
                redacted[r_start:None if r_end < 0 else r_end]
        m = redacted.find(b"[REDACTED:", m + 1)


def keep_records(original: bytes, redacted: bytes, counts: dict[str, int],
                 redact: Callable[[str], tuple[str, dict[str, int]]]) -> tuple[bytes, dict[str, int]]:
    """`redacted` (the one-pass result for `original`) with each changed JSON record whose
    structure changed redacted again value by value. `redact` is the text redactor."""
    if original.count(b"\n") != redacted.count(b"\n"):
        # a finding ran across a line end: every line on its own
        redacted = b"\n".join(
            redact(line.decode("utf-8", "surrogatepass"))[0].encode("utf-8", "surrogatepass")
            if line else line for line in original.split(b"\n"))
    fixes = {}
    for k, a, b in _changed_lines(original, redacted):
        if a == b or not a.lstrip().startswith((b"{", b"[")):
            continue
        before = _parse(a)
        if before is None or _same(before, b):
            continue
        again: dict[str, int] = {}
        fixes[k] = json.dumps(_walk(before, redact, again), ensure_ascii=False,
                              separators=(",", ":")).encode("utf-8", "surrogatepass")
        counts = dict(counts)  # the first pass's markers on this line give way to the redo's
        for kind, n in _markers(b).items():
            counts[kind] = counts.get(kind, 0) - n
        for kind, n in _markers(fixes[k]).items():
            counts[kind] = counts.get(kind, 0) + n
        counts = {kind: n for kind, n in counts.items() if n > 0}
    if not fixes:
        return redacted, counts
    lines = redacted.split(b"\n")
    for k, line in fixes.items():
        lines[k] = line
    return b"\n".join(lines), counts
