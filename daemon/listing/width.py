"""The width Claude Code counts a listing line in: terminal columns, not code points.

Claude Code measures each `- name: description` line with its terminal width function: most
characters take one column, wide East Asian ones two, control characters (a description's
line breaks), combining marks and zero-width characters none. Pure.
"""

import unicodedata


def width(text: str) -> int:
    """Columns `text` takes in a terminal (ASCII: its length)."""
    if text.isascii():
        return sum(1 for c in text if c >= " " and c != "\x7f")
    n = 0
    for c in text:
        o = ord(c)
        if o < 0x20 or 0x7F <= o < 0xA0 or o in (0x200B, 0x200C, 0x200D, 0xFEFF):
            continue
        if unicodedata.combining(c) or unicodedata.category(c) in ("Mn", "Me", "Cf"):
            continue
        n += 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1
    return n
