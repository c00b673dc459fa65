"""Finding where redaction rules must run: one linear pass for every rule's needles.

A rule's pattern only runs where one of its literal needles occurs. The needles of all rules —
case-sensitive, case-insensitive (`ci`) and digit-shaped (`shape`: `000-00-0000`) — are one
RE2 alternation, a DFA that reads each byte once however many needles there are, so adding a
rule costs no further pass over the text. At each place the scan stops, the needles that
start there are read off a short slice (lowercased or shaped as each needle needs).

Runs of base64 characters (`run` rules: key bodies, generated tokens) are found in a copy of
the text where every base64 character is `a`, with `bytes.find`.
"""

import re

import re2

# digits become '0' and the usual separators (space, dot, dash) one '-': "4012 8888" and
# "4012-8888" are one needle
SHAPE_TABLE = bytes.maketrans(b"0123456789 .", b"0000000000--")
# base64 characters become 'a', everything else ' ': a run of N is one `find(b"a" * N)`
RUNS_TABLE = bytes(0x61 if (0x30 <= c <= 0x39 or 0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A
                       or c in b"+/") else 0x20 for c in range(256))
TEXT, LOWER, SHAPE, RUNS, PATTERN = 0, 1, 2, 3, 4  # how a needle is compared with the text
# (PATTERN: the needle is a small regex, for a needle no literal is selective enough for)

# RE2 on bytes: each byte one character (not UTF-8 text), errors raised and not logged
BYTES = re2.Options()
BYTES.encoding = re2.Options.Encoding.LATIN1
BYTES.log_errors = False
_SHAPE_CLASS = {ord("0"): b"[0-9]", ord("-"): b"[-. ]"}


def _alternative(hay: int, needle: bytes) -> bytes:
    if hay == PATTERN:
        return b"(?:" + needle + b")"
    if hay == LOWER:
        return b"(?i:" + re2.escape(needle) + b")"
    if hay == SHAPE:
        return b"".join(_SHAPE_CLASS.get(c) or re2.escape(bytes([c])) for c in needle)
    return re2.escape(needle)


def _norm(hay: int, piece: bytes) -> bytes:
    if hay == LOWER:
        return piece.lower()
    if hay == SHAPE:
        return piece.translate(SHAPE_TABLE)
    return piece


class NeedleScan:
    """Every occurrence of every needle, in one pass: `occurrences(data, lo, hi)` yields
    (offset, needle length, rule indexes), overlapping occurrences included."""

    def __init__(self, needles: dict[tuple[int, bytes], list[int]]):
        self.runs = sorted(((len(n), idxs) for (h, n), idxs in needles.items() if h == RUNS),
                           key=lambda x: x[0])
        literal = [(h, n, idxs) for (h, n), idxs in needles.items() if h not in (RUNS, PATTERN)]
        self._patterns = [(re.compile(n), idxs) for (h, n), idxs in needles.items() if h == PATTERN]
        # needles by the first byte they start with (as the text's byte reads in each hay),
        # then by length, longest first: one dict lookup per length, however many needles
        grouped: dict[tuple[int, int], dict[int, dict[bytes, list[int]]]] = {}
        for h, n, idxs in literal:
            grouped.setdefault((h, n[0]), {}).setdefault(len(n), {})[n] = idxs
        self._by_first = {k: sorted(by_len.items(), reverse=True) for k, by_len in grouped.items()}
        self._longest = max((len(n) for _, n, _ in literal), default=1)
        self._firsts = tuple(frozenset(f for (h, f) in self._by_first if h == hay)
                             for hay in (TEXT, LOWER, SHAPE))
        alts = [_alternative(h, n) for h, n, _ in literal]
        alts += [_alternative(PATTERN, rx.pattern) for rx, _ in self._patterns]
        self._rx = re2.compile(b"|".join(alts), BYTES) if alts else None

    def occurrences(self, data: bytes, lo: int = 0, hi: int | None = None):
        hi = len(data) if hi is None else hi
        if self._rx is None:
            return
        # the binding's own matcher: spans only, no match object (this loop is the hot path)
        match, unanchored = self._rx._regexp.Match, re2._Anchor.UNANCHORED
        by_first, longest, pos = self._by_first, self._longest, lo
        patterns = self._patterns
        while pos < hi:
            p = match(unanchored, data, pos, hi)[0][0]
            if p < 0:
                return
            for rx, idxs in patterns:
                if (pm := rx.match(data, p)) is not None:
                    yield p, pm.end() - p, idxs
            c = data[p]
            piece = None
            for hay, key in ((TEXT, c), (LOWER, c | 0x20 if 0x41 <= c <= 0x5A else c),
                             (SHAPE, SHAPE_TABLE[c])):
                if key not in self._firsts[hay]:
                    continue
                if piece is None:
                    piece = data[p:p + longest]
                seg = _norm(hay, piece)
                for size, table in by_first[(hay, key)]:
                    if (found := table.get(seg[:size])) is not None:
                        yield p, size, found
            pos = p + 1

    def run_starts(self, runs_hay: bytes, base: int = 0):
        """(offset, run length needle, rule indexes) at the start of each run of base64
        characters at least as long as a `run` rule asks, in `runs_hay` (the text through
        `RUNS_TABLE`)."""
        for size, idxs in self.runs:
            needle = b"a" * size
            p = runs_hay.find(needle)
            while p != -1:
                yield base + p, size, idxs
                end = runs_hay.find(b" ", p + size)
                if end == -1:
                    break
                p = runs_hay.find(needle, end)
