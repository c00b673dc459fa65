"""Redaction rules from their data (`redact_rules.toml`, config's `extra_rules`) to `Rule`s.

The packaged rules are compiled with Python's `re` (their lookbehinds and bounded
quantifiers are written and tested to run in linear time). A user's rules and allow patterns
are compiled with RE2, whose matching time is linear in the text whatever the pattern: a
pattern like `(a+)+$` cannot stall the daemon. RE2 has no lookaround and no backreference; a
user pattern that uses them is a config error that says so.
"""

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

import re2

from .redact_checks import CHECKS
from .redact_scan import (
    BYTES,
    LOWER,
    PATTERN,
    RUNS,
    SHAPE,
    SHAPE_TABLE,
    TEXT,
)

AT = "at_"  # the group around a `back` rule's own match
_KIND_OK = re.compile(r"[^a-z0-9_]")
_LEADING_FLAGS = re.compile(rb"^\(\?([aiLmsux]+)\)")


@dataclass(frozen=True)
class Rule:
    """One compiled rule. Groups are numbers (RE2's and re's match objects agree on those)."""
    kind: str
    cls: str  # "secret" | "pii" | "public" (material that is not a finding: see `generic`)
    rx: Any  # a compiled pattern with .match / .finditer (re, or re2 for a user's rule)
    near: Any = None  # with `back`: rx after a lazy prefix of at most `back` bytes
    back_set: bytes | None = None  # with `back_chars`: the match starts where they end
    needles: tuple[bytes, ...] = ()
    hay: int = TEXT  # TEXT, LOWER (case-insensitive needles) or SHAPE (digits as '0')
    run: int = 0  # > 0: fires at each run of at least this many base64 characters
    back: int = 0
    span: int = 512
    group: int = 0  # the group replaced (0: the whole match)
    group2: int | None = None  # `<group>2`: the other alternative of the value
    check: Callable[[str], bool] | None = None
    wrap: bool = False  # a token that may be wrapped over lines: matched again with breaks out
    user: bool = False  # from config: compiled with RE2
    generic: bool = False  # a rule without a prefix to go on: silent inside public material


def flag(v) -> bool:
    return v is True or (isinstance(v, str) and v.strip().lower() in ("1", "true", "yes", "on"))


def _kind(raw: str) -> str:
    return _KIND_OK.sub("_", str(raw).strip().lower())[:48] or "custom"


def load_rule_data(path: str | None = None) -> list[dict]:
    """The default rules (the packaged TOML), or those in `path`."""
    if path is None:
        raw = resources.files(__package__).joinpath("redact_rules.toml").read_bytes()
    else:
        with open(path, "rb") as f:
            raw = f.read()
    return list(tomllib.loads(raw.decode("utf-8")).get("rule", []))


def scoped(pattern: bytes) -> bytes:
    """A pattern usable inside an alternation: leading global flags become a scoped group."""
    m = _LEADING_FLAGS.match(pattern)
    if m:
        return b"(?" + m.group(1) + b":" + pattern[m.end():] + b")"
    return b"(?:" + pattern + b")"


def _compile(kind: str, pattern: bytes, user: bool):
    rx = re.compile(pattern)  # a syntax error is a re.error, named as a bad pattern
    if not user:
        return rx
    try:
        return re2.compile(pattern, BYTES)
    except re2.error:
        raise ValueError(
            f"redaction rule {kind!r}: pattern not supported. User rules run on a "
            "linear-time engine (RE2): no lookahead/lookbehind (`(?=`, `(?!`, `(?<=`, "
            "`(?<!`) and no backreferences (`\\1`); match the text itself instead") from None


def _groupindex(rx) -> dict[str, int]:
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in rx.groupindex.items()}


def _literal_needles(d: dict, hay: int) -> list[bytes]:
    raw = d.get("needles", ())
    if isinstance(raw, str):  # config values are strings: one needle, or a,b,c
        raw = raw.split(",")
    out = []
    for n in raw:
        n = str(n).encode("utf-8")
        if hay == LOWER:
            n = n.lower()
        elif hay == SHAPE:
            n = n.translate(SHAPE_TABLE)
        if n:
            out.append(n)
    return out


def _needles(kind: str, d: dict, user: bool) -> tuple[int, list[bytes], int]:
    """(hay, needles, run) of a rule: literal needles as the hay reads them, a `run` of base64
    characters, or a `needle_pattern`."""
    run = int(d.get("run", 0))
    if run:
        if not 16 <= run <= 256:
            raise ValueError(f"redaction rule {kind!r}: run must be between 16 and 256")
        return RUNS, [b"a" * run], run
    if d.get("needle_pattern"):
        if user:
            raise ValueError(f"redaction rule {kind!r}: needle_pattern is not for config rules; "
                             "give needles (literal strings) instead")
        return PATTERN, [str(d["needle_pattern"]).encode()], 0
    hay = SHAPE if flag(d.get("shape")) else LOWER if flag(d.get("ci")) else TEXT
    return hay, _literal_needles(d, hay), 0


def _back(kind: str, d: dict, pattern: bytes, needles: list[bytes], user: bool):
    """(near, back_set): how a match may start before its needle (see `Rule`)."""
    if d.get("back_chars"):
        try:
            chars = re.compile(b"[" + str(d["back_chars"]).encode() + b"]")
        except re.error as e:
            raise ValueError(f"redaction rule {kind!r}: bad back_chars: {e}") from None
        return None, bytes(c for c in range(256) if chars.match(bytes([c])))
    back = int(d.get("back", 0))
    if back > 0 and needles:
        return _compile(kind, b"(?s:.{0,%d}?)(?P<%s>" % (back, AT.encode()) + scoped(pattern)
                        + b")", user), None
    return None, None


def _checked(kind: str, d: dict, groups: dict[str, int]) -> tuple[str, str | None, str | None]:
    """(class, check, group name) of a rule, each validated."""
    cls = d.get("class", "secret")
    if cls not in ("secret", "pii", "public"):
        raise ValueError(f"redaction rule {kind!r}: class must be 'secret', 'pii' or 'public'")
    check = d.get("check")
    if check is not None and check not in CHECKS:
        raise ValueError(f"redaction rule {kind!r}: unknown check {check!r}")
    name = d.get("group")
    if name is not None and name not in groups:
        raise ValueError(f"redaction rule {kind!r}: pattern has no group {name!r}")
    return cls, check, name


def compile_rule(d: dict, *, user: bool = False) -> Rule:
    """One rule from its data; raises ValueError naming the rule when it is invalid.

    Patterns are compiled as bytes patterns: matching runs on the UTF-8 bytes, where word,
    space and case-insensitive classes are ASCII-only (secrets are ASCII) and `bytes.lower()`
    keeps offsets aligned (`str.lower()` can change a string's length). `user` rules (from
    config) are compiled with RE2.
    """
    kind = _kind(d.get("kind", ""))
    try:
        pattern = str(d["pattern"]).encode("utf-8")
        rx = _compile(kind, pattern, user)
    except (KeyError, re.error, TypeError) as e:
        raise ValueError(f"redaction rule {kind!r}: bad pattern: {e}") from None
    groups = _groupindex(rx)
    cls, check, name = _checked(kind, d, groups)
    hay, needles, run = _needles(kind, d, user)
    near, back_set = _back(kind, d, pattern, needles, user)
    return Rule(kind=kind, cls=cls, rx=rx, near=near, back_set=back_set, needles=tuple(needles),
                hay=hay, run=run, back=int(d.get("back", 0)), span=int(d.get("span", 512)),
                group=groups[name] if name else 0,
                group2=groups.get(f"{name}2") if name else None,
                check=CHECKS[check] if check else None, wrap=flag(d.get("wrap")), user=user,
                generic=flag(d.get("generic")))


def compile_allow(allow: list[str]):
    """The allow patterns as one RE2 pattern (they come from config: linear time), or None."""
    allow = [str(a) for a in allow if a]
    if not allow:
        return None
    try:
        joined = b"|".join(b"(?:" + a.encode() + b")" for a in allow)
        re.compile(joined)
        return re2.compile(joined, BYTES)
    except (re.error, re2.error) as e:
        raise ValueError(f"redaction allow pattern invalid: {e} (allow patterns run on RE2: "
                         "no lookaround, no backreferences)") from None
