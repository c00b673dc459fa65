"""Clip what is long, not what comes first: bound a record by cutting the middle of its longest
strings, so each keeps its beginning and its end with a visible marker between them.

`fit` bounds a decoded record (the window's slim records): it lowers one water level over all
the record's strings, so short strings (a tool's name, a role, a short prompt) stay whole and
only the long ones give up their middle; the record stays valid JSON. `clip_raw` bounds a
record that cannot be decoded (garbage, or too long to read whole) by its raw head and tail.

A cut point never lands inside a token-like run shorter than `TOKEN_BACKOFF` (half a secret
would slip past redaction, which runs after the cut); longer runs (base64 blobs) are cut anyway.
"""

import msgspec

TOKEN_BACKOFF = 128
_TOKEN = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+/=."
_TOKEN_CHARS = frozenset(_TOKEN)
_TOKEN_BYTES = frozenset(_TOKEN.encode())
MARK = "\n[autoharness: {:,} bytes clipped]\n"
RAW_MARK = b" [autoharness: record clipped, %d of %d bytes kept] "
_encode = msgspec.json.encode


def _back(text, cut: int, tokens) -> int:
    """`cut` moved back to the start of a short token-like run it would split."""
    k = cut
    while k > 0 and cut - k < TOKEN_BACKOFF and text[k - 1] in tokens:
        k -= 1
    return cut if cut - k >= TOKEN_BACKOFF else k


def _forward(text, cut: int, tokens) -> int:
    """`cut` moved forward to the end of a short token-like run it would split."""
    k = cut
    while k < len(text) and k - cut < TOKEN_BACKOFF and text[k] in tokens:
        k += 1
    return cut if k - cut >= TOKEN_BACKOFF else k


def clip_text(text: str, keep: int) -> str:
    """`text` with its middle replaced by a marker so about `keep` characters remain, half from
    its beginning and half from its end; unchanged when it is that short already."""
    if len(text) <= keep:
        return text
    head = _back(text, keep - keep // 2, _TOKEN_CHARS)
    tail = _forward(text, len(text) - keep // 2, _TOKEN_CHARS)
    gone = text[head:tail]
    return text[:head] + MARK.format(len(gone.encode("utf-8", "replace"))) + text[tail:]


def _strings(node, out: list) -> None:
    """(container, key) of every string value under `node` (dict values, list items)."""
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for k, v in items:
        if isinstance(v, str):
            out.append((node, k))
        elif isinstance(v, (dict, list)):
            _strings(v, out)


def _level(sizes: list[int], room: int) -> int:
    """The largest cap c with sum(min(size, c)) <= room (sizes > 0)."""
    used, left = 0, len(sizes)
    for s in sorted(sizes):
        if used + s * left <= room:  # everything this short fits whole
            used += s
            left -= 1
            continue
        return max(0, (room - used) // left)
    return max(sizes, default=0)


def squeeze(node: dict | list, limit: int) -> bool:
    """Cut the middle of the longest strings under `node`, in place, until it encodes to at
    most `limit` bytes; whether anything was cut. Strings longer than a common level keep
    their beginning and end around a marker; shorter ones stay whole. False with `node`
    unchanged when it fits already; it may still not fit after (thousands of tiny strings)."""
    size = len(_encode(node))
    if size <= limit:
        return False
    slots: list = []
    _strings(node, slots)
    sizes = [len(_encode(c[k])) for c, k in slots]
    room = limit - (size - sum(sizes)) - len(slots) * len(MARK) - 16
    original = [c[k] for c, k in slots]
    for shrink in (1.0, 0.8, 0.6, 0.4, 0.2, 0.0):
        cap = int(_level(sizes, max(0, room)) * shrink)
        for (c, k), s, n in zip(slots, original, sizes, strict=True):
            c[k] = clip_text(s, max(0, cap * len(s) // n)) if n > cap else s
        if len(_encode(node)) <= limit:
            break
    return True


def fit(record: dict, limit: int) -> tuple[bytes, bool]:
    """The record encoded as one JSON line of at most `limit` bytes (newline included), and
    whether anything was clipped (`squeeze`: replaced in place, so pass a record of your own);
    a record that still cannot fit (thousands of tiny strings) is clipped raw."""
    clipped = squeeze(record, limit - 1)
    line = _encode(record) + b"\n"
    if len(line) <= limit:
        return line, clipped
    return clip_raw(line, line[-limit:], len(line), limit), True


def _utf8_cut(data: bytes, n: int) -> int:
    """Largest cut <= n that does not split a UTF-8 sequence."""
    n = min(n, len(data))
    while 0 < n < len(data) and (data[n] & 0xC0) == 0x80:
        n -= 1
    return n


def _utf8_start(data: bytes, n: int) -> int:
    """Smallest cut >= n that does not split a UTF-8 sequence."""
    while n < len(data) and (data[n] & 0xC0) == 0x80:
        n += 1
    return n


def clip_raw(head: bytes, tail: bytes, raw_len: int, limit: int) -> bytes:
    """A raw record of `raw_len` bytes as its `head` (a prefix) and `tail` (a suffix, newline
    included) around a visible marker, at most `limit` bytes (newline included)."""
    room = max(0, limit - len(RAW_MARK % (raw_len, raw_len)) - 1)
    body = tail.rstrip(b"\n")
    h = _back(head, _utf8_cut(head, room - room // 2), _TOKEN_BYTES)
    want = min(len(body), room - h)
    t = _utf8_start(body, len(body) - want)
    t = _forward(body, t, _TOKEN_BYTES) if want else len(body)
    return head[:h] + RAW_MARK % (h + len(body) - t, raw_len) + body[t:] + b"\n"
