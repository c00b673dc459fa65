"""Is a proposal's evidence really a quote from the window it came from?

The window is raw JSONL, so the text a model read is JSON-escaped there (`\\n`, `\\"`,
`\\u00e9`). A model quotes what it reads, not the escaping, so the evidence is looked for in
the window both as raw bytes-as-text and with JSON string escapes undone; both sides are
whitespace-normalised because models reflow quotes.
"""

import re

_SIMPLE = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
# A surrogate pair first, so an astral character (emoji) decodes to itself, not to two halves.
_ESCAPE = re.compile(
    r"\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})"
    r"|\\u([0-9a-fA-F]{4})"
    r'|\\(["\\/bfnrt])'
)


def _unescape(m: re.Match) -> str:
    hi, lo, single, simple = m.groups()
    if hi:
        return chr(0x10000 + ((int(hi, 16) - 0xD800) << 10) + (int(lo, 16) - 0xDC00))
    if single:
        code = int(single, 16)
        # A lone surrogate cannot be a str that survives encoding; it matches nothing anyway.
        return "\ufffd" if 0xD800 <= code <= 0xDFFF else chr(code)
    return _SIMPLE[simple]


def decode_escapes(text: str) -> str:
    """Undo JSON string escapes wherever they occur; everything else is left as it is."""
    if "\\" not in text:
        return text
    return _ESCAPE.sub(_unescape, text)


def normalize(text: str) -> str:
    """Collapse every run of whitespace (any Unicode space, newline, tab) into one space."""
    return " ".join(text.split())


def evidence_in_window(evidence: str, window: str) -> bool:
    """True when `evidence` occurs verbatim in `window`, raw or decoded, modulo whitespace."""
    quote = normalize(evidence)
    if not quote:
        return False
    return quote in normalize(window) or quote in normalize(decode_escapes(window))
