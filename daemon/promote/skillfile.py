"""SKILL.md: YAML frontmatter followed by a markdown body.

The frontmatter parser accepts a strict subset of YAML — one `key: scalar` per line, scalars
plain, single- or double-quoted — which is everything `render` produces. Anything richer
(block scalars, lists, nesting) is refused rather than guessed at, so what we validate is
exactly what Claude Code will read. No YAML dependency: the subset is small and a full YAML
loader would accept far more than we want to vouch for.
"""

import re

FENCE = "---"
_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
_LINE = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_-]*):(?:[ \t]+(.*))?")
# Plain scalars we emit: start with a letter and use no character YAML gives a meaning to.
_PLAIN_OUT = re.compile(r"[A-Za-z][A-Za-z0-9 _.,;()/'+-]*")
# Plain scalars YAML would not read as strings (bool/null words; numbers and dates are
# excluded by _PLAIN_OUT's leading letter but can appear in files we read).
_TYPED_WORDS = {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~", ""}
_TYPED = re.compile(r"[-+]?(\.?[0-9][0-9_.:eE+-]*|\.inf|\.nan|0x[0-9a-fA-F_]+|0o[0-7_]+)", re.I)
_PLAIN_BAD_START = set("[]{}#&*!|>'\"%@`,")
_DQ_ESCAPES = {
    "0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f",
    "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85",
    "_": "\xa0", "L": "\u2028", "P": "\u2029",
}
_HEX_LEN = {"x": 2, "u": 4, "U": 8}
_HEX_DIGITS = set("0123456789abcdefABCDEF")


class SkillFormatError(ValueError):
    """The text is not a SKILL.md in the subset we read."""


def parse(text: str) -> tuple[dict[str, str], str]:
    """Split a SKILL.md into its frontmatter (ordered key → string) and its body."""
    text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != FENCE:
        raise SkillFormatError("SKILL.md must start with a `---` frontmatter line")
    fields: dict[str, str] = {}
    for i, line in enumerate(lines[1:], start=2):
        if line.rstrip() == FENCE:
            body = "\n".join(lines[i:]).lstrip("\n")
            return fields, body
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _LINE.fullmatch(line.rstrip())
        if not m:
            raise SkillFormatError(f"line {i}: expected `key: value` (no nesting or indentation)")
        key, raw = m.group(1), (m.group(2) or "")
        if key in fields:
            raise SkillFormatError(f"line {i}: duplicate key `{key}`")
        try:
            fields[key] = _scalar_in(raw)
        except SkillFormatError as e:
            raise SkillFormatError(f"line {i} (`{key}`): {e}") from None
    raise SkillFormatError("frontmatter is not closed by a `---` line")


def description(text: str | bytes | None) -> str:
    """The description a SKILL.md states; "" when it states none, is not UTF-8 or does not
    parse."""
    try:
        data = text.decode("utf-8") if isinstance(text, bytes) else text or ""
        return str(parse(data)[0].get("description") or "")
    except (UnicodeDecodeError, SkillFormatError):
        return ""


def render(fields: dict[str, str], body: str) -> str:
    """The SKILL.md text for these frontmatter fields (in order) and body."""
    out = [FENCE]
    for key, value in fields.items():
        if not _KEY.fullmatch(key):
            raise ValueError(f"not a frontmatter key we write: {key!r}")
        out.append(f"{key}: {_scalar_out(value)}")
    out.append(FENCE)
    return "\n".join(out) + "\n\n" + body.strip("\n") + "\n"


def _scalar_out(value: str) -> str:
    if _PLAIN_OUT.fullmatch(value) and value.lower() not in _TYPED_WORDS and value[-1] != " ":
        return value
    out = ['"']
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def _scalar_in(raw: str) -> str:
    raw = raw.strip()
    if raw.startswith('"'):
        value, rest = _double_quoted(raw)
    elif raw.startswith("'"):
        value, rest = _single_quoted(raw)
    else:
        return _plain(raw)
    if rest.strip() and not rest.lstrip().startswith("#"):
        raise SkillFormatError("text after the closing quote")
    return value


def _plain(raw: str) -> str:
    if not raw:
        raise SkillFormatError("empty value")
    if raw[0] in _PLAIN_BAD_START or raw[:2] in ("- ", "? ", ": ") or raw in ("-", "?", ":"):
        raise SkillFormatError("unsupported YAML value (block scalar, list, map or tag): quote it")
    if ": " in raw or raw.endswith(":"):
        raise SkillFormatError("`: ` in an unquoted value: quote it")
    cut = raw.find(" #")
    value = (raw if cut < 0 else raw[:cut]).rstrip()
    if value.lower() in _TYPED_WORDS or _TYPED.fullmatch(value):
        raise SkillFormatError(f"{value!r} is not a string in YAML: quote it")
    return value


def _single_quoted(raw: str) -> tuple[str, str]:
    out: list[str] = []
    i = 1
    while i < len(raw):
        if raw[i] == "'":
            if raw[i + 1:i + 2] == "'":
                out.append("'")
                i += 2
                continue
            return "".join(out), raw[i + 1:]
        out.append(raw[i])
        i += 1
    raise SkillFormatError("unterminated single-quoted value")


def _double_quoted(raw: str) -> tuple[str, str]:
    out: list[str] = []
    i = 1
    while i < len(raw):
        ch = raw[i]
        if ch == '"':
            return "".join(out), raw[i + 1:]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        esc = raw[i + 1:i + 2]
        if esc in _DQ_ESCAPES:
            out.append(_DQ_ESCAPES[esc])
            i += 2
        elif esc in _HEX_LEN:
            digits = raw[i + 2:i + 2 + _HEX_LEN[esc]]
            if len(digits) != _HEX_LEN[esc] or not all(c in _HEX_DIGITS for c in digits):
                raise SkillFormatError(f"bad \\{esc} escape")
            code = int(digits, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise SkillFormatError(f"\\{esc}{digits} is not a character")
            out.append(chr(code))
            i += 2 + len(digits)
        else:
            raise SkillFormatError(f"unknown escape \\{esc}")
    raise SkillFormatError("unterminated double-quoted value")
