"""A record's top-level `type` or `uuid`, read from its head or its end without decoding it.

Reading only a few KB of a record decides whether it can be work at all (bookkeeping types are
left out by their type alone, however long they are), and finds the `uuid` Claude Code writes
after the message. Tokenizing is done by the regex engine, not byte by byte.
"""

import re

import msgspec

# How much of a record's head (or end) is searched for its top-level `type` (Claude Code writes
# it within the first ~150 bytes, before the message; 2.1 after it).
SNIFF_BYTES = 4096
# JSON strings (escapes included) and the structural characters that change nesting depth
_JSON_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]]')
# a `"type": "<string>"` pair (the value captured)
_TYPE_KEY = re.compile(rb'"type"\s*:\s*("[^"\\]*(?:\\.[^"\\]*)*")')
_UUID_KEY = re.compile(rb'"uuid"\s*:\s*("[^"\\]*(?:\\.[^"\\]*)*")')


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


