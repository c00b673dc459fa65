"""Other readings of the same bytes, where a secret is not written out plainly.

* **wrapped**: a token broken over lines (a terminal's wrap, a pasted key) is one token once
  the line breaks inside it — raw, JSON-escaped `\\n`, with the next line's indentation or a
  Read line number — are taken out (`joined`);
* **URL-encoded**: `DB_PASSWORD%3Dp%40ss` reads `DB_PASSWORD=p@ss` (`percent_runs`,
  `percent_decode`);
* **base64 of text**: `base64 -w0 .env` prints the file's secrets encoded (`b64_text_blobs`).

Each view maps what the rules find in it back to offsets in the original bytes, so the
original is what gets replaced.
"""

import base64
import binascii
import bisect
import re

import re2

from .redact_scan import BYTES

# a line break inside a token: raw (after a shell's `\` continuation too) or JSON-escaped (once
# or more), then indentation or the line number a Read result or `cat -n` puts before each line
BREAK = re.compile(rb"(?:\\+r|\r)?(?:\\+n|\\?\n)(?:[ \t]|\\+t)*"
                   rb"(?:[0-9]{1,7}(?:\xe2\x86\x92|\\+u2192|\\+t|\t))?")
_TOKEN = rb"A-Za-z0-9_.+/=~%$-"
_TOKEN_SET = frozenset(c for c in range(256) if re.match(rb"[" + _TOKEN + rb"]", bytes([c])))
_BREAK_START = re.compile(rb"[\\\r\n]")
_NEXT_RUN = re.compile(rb"[" + _TOKEN + rb"]{1,400}")
# a name written by a person (one case, short), then `=` and a value (not `=` padding)
_ASSIGNMENT = re.compile(rb"(?:[A-Z_][A-Z0-9_]{0,40}|[a-z_][a-z0-9_.-]{0,40})=[^=]")


def continues_after_break(data: bytes, at: int, *, generated: bool = False) -> bool:
    """Whether the token characters from `at` run into a line break and go on after it;
    with `generated`, only when what goes on looks generated (a digit, or capitals among
    small letters): a token that ends its line is not joined to the next line's word."""
    end = _NEXT_RUN.match(data, at)
    brk = BREAK.match(data, end.end() if end else at)
    if brk is None:
        return False
    nxt = _NEXT_RUN.match(data, brk.end())
    if nxt is None:
        return False
    run = nxt.group()
    if _ASSIGNMENT.match(run):  # the next line of a `.env`: a name of its own, not a tail
        return False
    if not generated:
        return True
    upper = sum(1 for c in run if 0x41 <= c <= 0x5A)
    return any(0x30 <= c <= 0x39 for c in run) or (upper >= 2 and upper < len(run))


class Mapped:
    """A derived text and, for each of its offsets, the original offset it came from."""

    def __init__(self, text: bytes, starts: list[int], origins: list[int], coded: set[int]):
        self.text = text
        self._starts = starts  # offset in `text` where each piece begins
        self._origins = origins  # that piece's offset in the original
        self._coded = coded  # pieces that are one decoded `%XX` (three original bytes)

    def _piece(self, i: int) -> int:
        return bisect.bisect_right(self._starts, i) - 1

    def span(self, s: int, e: int) -> tuple[int, int]:
        """The original span covering derived [s, e)."""
        k = self._piece(s)
        start = self._origins[k] + (s - self._starts[k])
        if e <= s:
            return start, start
        k = self._piece(e - 1)
        if k in self._coded:
            return start, self._origins[k] + 3
        return start, self._origins[k] + (e - 1 - self._starts[k]) + 1


# token characters and the line breaks between them, from where a token starts
_WRAPPED_RUN = re.compile(rb"(?:[" + _TOKEN + rb"]++(?:" + BREAK.pattern + rb"(?=[" + _TOKEN
                          + rb"]))?)*+")


def joined(data: bytes, lo: int, hi: int, at: int | None = None) -> Mapped:
    """data[lo:hi] with the line breaks that sit between two token characters taken out; only
    the token run that starts at `at` (default `lo`) is joined (the rest is copied as it is)."""
    at = lo if at is None else at
    run = _WRAPPED_RUN.match(data, at, hi)  # always matches (perhaps empty)
    end = run.end() if run is not None else at
    parts, starts, origins, size, last = [], [], [], 0, lo
    for c in _BREAK_START.finditer(data, at, end):  # few: a token has no `\\`, CR or LF
        p = c.start()
        if p < last or p == at or data[p - 1] not in _TOKEN_SET:
            continue
        m = BREAK.match(data, p, end + 1)
        if m is None or m.end() >= len(data) or data[m.end()] not in _TOKEN_SET:
            continue
        parts.append(data[last:p])
        starts.append(size)
        origins.append(last)
        size += p - last
        last = m.end()
    parts.append(data[last:hi])
    starts.append(size)
    origins.append(last)
    return Mapped(b"".join(parts), starts, origins, set())


# ---- URL-encoded ------------------------------------------------------------------------

_URL_CH = rb"A-Za-z0-9._~+=:;@!$*'(),/&|-"
PERCENT_RUN = re2.compile(rb"(?:[" + _URL_CH + rb"]|%[0-9A-Fa-f]{2})*%(?:2[0-9A-Fa-f]|3[A-Fa-f]|"
                          rb"40|5[BDbd]|7[CEce])(?:[" + _URL_CH + rb"]|%[0-9A-Fa-f]{2})*", BYTES)


def percent_decode(data: bytes, s: int, e: int) -> Mapped:
    """data[s:e] with each `%XX` decoded (`+` stays: in a token it is a `+`)."""
    parts, starts, origins, coded, size, last = [], [], [], set(), 0, s
    i = data.find(b"%", s, e)
    while i != -1 and i + 3 <= e:
        try:
            byte = bytes([int(data[i + 1:i + 3], 16)])
        except ValueError:
            i = data.find(b"%", i + 1, e)
            continue
        if i > last:
            parts.append(data[last:i])
            starts.append(size)
            origins.append(last)
            size += i - last
        parts.append(byte)
        coded.add(len(starts))
        starts.append(size)
        origins.append(i)
        size += 1
        last = i + 3
        i = data.find(b"%", last, e)
    parts.append(data[last:e])
    starts.append(size)
    origins.append(last)
    return Mapped(b"".join(parts), starts, origins, coded)


# ---- base64 of text -----------------------------------------------------------------------

# Base64 of ASCII text: the first character of every 4 encodes a byte's top six bits, which
# for printable text (0x20-0x7e) and tabs or newlines is one of C..Z, a..f. Random base64
# passes that for 4 groups in a row once in ~20; text passes it always. Lines of a wrapped
# blob (76 characters, `base64`'s default) join on a whole group.
B64_TEXT = re2.compile(rb"(?:^|[^A-Za-z0-9+/\\]|\\[nrt])((?:[C-Za-f][A-Za-z0-9+/]{3}"
                       rb"(?:(?:\\+r|\r)?(?:\\+n|\n)(?:[ \t]|\\+t)*(?:[0-9]{1,7}"
                       rb"(?:\xe2\x86\x92|\\+u2192|\\+t|\t))?(?:[C-Za-f][A-Za-z0-9+/]{3}))?){5,}"
                       rb"(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?)", BYTES)
_NOT_B64 = re.compile(rb"[^A-Za-z0-9+/=]+")
_PRINTABLE = frozenset(range(0x20, 0x7F)) | {0x09, 0x0A, 0x0D}


def b64_text(blob: bytes) -> bytes | None:
    """The text a base64 blob encodes, or None when it does not decode to printable text."""
    raw = _NOT_B64.sub(b"", BREAK.sub(b"", blob))
    try:
        text = base64.b64decode(raw[: len(raw) // 4 * 4])
    except (binascii.Error, ValueError):
        return None
    if len(text) < 12:
        return None
    bad = sum(1 for c in text if c not in _PRINTABLE)
    return text if bad * 50 <= len(text) else None


def b64_text_blobs(data: bytes, lo: int, hi: int):
    """(start, end, decoded text) of each base64 blob in data[lo:hi] that encodes text."""
    for m in B64_TEXT.finditer(data, lo, hi):
        s, e = m.span(1)
        text = b64_text(data[s:e])
        if text is not None:
            yield s, e, text
