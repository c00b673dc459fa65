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


def _parse(line: bytes):
    try:
        return json.loads(line)
    except ValueError:
        return None


def _same(before, after_line: bytes) -> bool:
    after = _parse(after_line)
    return after is not None and shape(after) == shape(before)


def keep_records(original: bytes, redacted: bytes, counts: dict[str, int],
                 redact: Callable[[str], tuple[str, dict[str, int]]]) -> tuple[bytes, dict[str, int]]:
    """`redacted` (the one-pass result for `original`) with each changed JSON record whose
    structure changed redacted again value by value. `redact` is the text redactor."""
    src, out = original.split(b"\n"), redacted.split(b"\n")
    if len(src) != len(out):  # a finding ran across a line end: every line on its own
        out = [redact(line.decode("utf-8", "surrogatepass"))[0].encode("utf-8", "surrogatepass")
               if line else line for line in src]
    for i, (a, b) in enumerate(zip(src, out, strict=True)):
        if a == b or not a.lstrip().startswith((b"{", b"[")):
            continue
        before = _parse(a)
        if before is None or _same(before, b):
            continue
        again: dict[str, int] = {}
        out[i] = json.dumps(_walk(before, redact, again), ensure_ascii=False,
                            separators=(",", ":")).encode("utf-8", "surrogatepass")
    return b"\n".join(out), counts
