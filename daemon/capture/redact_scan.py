"""Finding where redaction rules must run: the copies of a text needles are looked for in, and
one C-level scan per group of needles sharing a copy and a first byte.

A rule's pattern only runs where one of its literal needles occurs. Looking for each needle
with `bytes.find` costs a pass over the text per needle (~40 of them); a compiled literal
byte followed by a lookahead of the needles' tails runs in C past every other byte, so needles
sharing a first byte cost about one pass together.
"""

import re

# digits become '0' and the usual separators (space, dot, dash) one '-': "4012 8888" and
# "4012-8888" are one needle, one scan
SHAPE_TABLE = bytes.maketrans(b"0123456789 .", b"0000000000--")
# base64 characters become 'a', everything else ' ': a run of N is one `find(b"a" * N)`
RUNS_TABLE = bytes(0x61 if (0x30 <= c <= 0x39 or 0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A
                       or c in b"+/") else 0x20 for c in range(256))
TEXT, LOWER, SHAPE, RUNS = 0, 1, 2, 3  # the haystacks needles are looked for in


def scan_groups(needles: dict[tuple[int, bytes], list[int]]) -> list[tuple]:
    """Needles grouped per haystack and first byte, each group one compiled scan.

    A scan for a literal first byte followed by a lookahead of the needles' tails runs in C
    past every other byte, so k needles sharing a first byte cost about one `find`, not k
    (and the zero-width match keeps overlapping occurrences). Runs are found with `find`.
    """
    by_first: dict[tuple[int, int], list[tuple[bytes, list[int]]]] = {}
    for (h, needle), idxs in needles.items():
        by_first.setdefault((h, needle[0]), []).append((needle, idxs))
    groups: list[tuple[int, re.Pattern[bytes] | None, list[tuple[bytes, list[int]]]]] = []
    for (h, first), members in by_first.items():
        members.sort(key=lambda m: -len(m[0]))
        if h == RUNS:
            for needle, idxs in members:
                groups.append((h, None, [(needle, idxs)]))
            continue
        head = re.escape(bytes([first]))
        tails = [re.escape(n[1:]) for n, _ in members if len(n) > 1]
        if len(tails) < len(members):  # a one-byte needle: every occurrence of the byte
            scan = re.compile(head)
        else:
            scan = re.compile(head + b"(?=" + b"|".join(tails) + b")")
        groups.append((h, scan, members))
    return groups


def pool(needles: dict[tuple[int, bytes], list[int]]) -> dict[tuple[int, bytes], list[int]]:
    """Case-sensitive needles moved to a copy where one of the same first byte is already
    looked for, so they share its scan: to the lowercased copy when lowercasing leaves them as
    they are (the rule's own pattern still checks case), or to the shape copy when it does (no
    digit, space, dot or dash: a dash there also stands for those)."""
    firsts = {(h, nd[0]) for h, nd in needles if h in (LOWER, SHAPE)}
    out: dict[tuple[int, bytes], list[int]] = {}
    for (h, nd), idxs in needles.items():
        if h == TEXT:
            if nd.lower() == nd and (LOWER, nd[0]) in firsts:
                h = LOWER
            elif nd.translate(SHAPE_TABLE) == nd and b"-" not in nd and (SHAPE, nd[0]) in firsts:
                h = SHAPE
        out.setdefault((h, nd), []).extend(idxs)
    return out


def occurrences(hay: bytes, scan, members):
    """(offset, needle length, rule indexes) for every occurrence of a group's needles; for
    runs, one per run of base64 characters at least as long as the needle, at its start."""
    if scan is None:
        needle, idxs = members[0]
        p = hay.find(needle)
        while p != -1:
            yield p, len(needle), idxs
            end = hay.find(b" ", p + len(needle))
            if end == -1:
                return
            p = hay.find(needle, end)
        return
    one = len(members) == 1
    for m in scan.finditer(hay):
        p = m.start()
        for needle, idxs in members:
            if one or hay.startswith(needle, p):
                yield p, len(needle), idxs
