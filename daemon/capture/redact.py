"""Redaction: secrets and PII become `[REDACTED:<kind>]`, `<private>…</private>` spans go whole.

Rules are data (`redact_rules.toml`, plus extra rules and allow patterns from config) compiled
once. One call makes one pass over the text (plus a local re-check around what it replaced):

1. `<private>` spans are replaced first (so removing one can never join two halves of a secret
   that a later pass would then find);
2. every rule runs its pattern only where one of its literal *needles* occurs (`bytes.find` is
   C-speed; a regex alternation of ~20 rules tried at every position is not). Needles are
   looked for in the UTF-8 bytes, in their ASCII-lowercased copy (case-insensitive keywords),
   or in a "shape" copy where every digit is `0` (so `000-00-0000` finds SSN-shaped text);
   rules without needles (only possible for extra rules from config) share one combined scan;
3. matches are validated (Luhn, SSN ranges…), filtered by the allow list, moved off the inside
   of JSON escapes (the text is often raw JSONL: `\\nghp_…` must become `\\n[REDACTED:…]`,
   never `\\[REDACTED…`), merged where they overlap, and replaced in one splice;
4. a marker changes its neighbours' context, so the regions around new markers are checked
   again until nothing more is found: `redact(redact(x)) == redact(x)`.

Over-redaction is the safe side. `redact` and `find` never raise: on an internal error the
whole text counts as one `redaction_error` finding (and `redact` returns only the marker).
"""

import functools
import re
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from importlib import resources

from claude_autoharness.daemon.capture.redact_checks import CHECKS, is_placeholder, luhn_ok
from claude_autoharness.daemon.capture.redact_scan import (
    LOWER,
    RUNS,
    RUNS_TABLE,
    SHAPE,
    SHAPE_TABLE,
    TEXT,
    occurrences,
    pool,
    scan_groups,
)

__all__ = ["Redactor", "default_redactor", "redactor_for", "find_secrets", "has_secret",
           "load_rule_data", "compile_rule", "is_placeholder", "luhn_ok", "MARK"]

MARK = "[REDACTED:{}]"
_MAX_PASSES = 4
ERROR_KIND = "redaction_error"
PRIVATE_KIND = "private"


def _suffix_group(m: re.Match[bytes], *, i: int) -> bytes:
    """`(?P<name>` → `(?P<name_r<i>>`: group names stay unique once rules are joined."""
    return b"(?P<%s_r%d>" % (m.group(1), i)


@dataclass(frozen=True)
class Rule:
    kind: str
    cls: str  # "secret" | "pii"
    rx: re.Pattern
    near: re.Pattern | None = None  # with `back`: rx after a lazy prefix of at most `back` bytes
    back_set: frozenset[int] | None = None  # with `back_chars`: the match starts where they end
    needles: tuple[bytes, ...] = ()
    hay: int = 0  # TEXT, LOWER (case-insensitive needles) or SHAPE (digits as '0')
    run: int = 0  # > 0: fires at each run of at least this many base64 characters
    back: int = 0
    span: int = 512
    group: str | None = None
    group2: str | None = None  # `<group>2`: the other alternative of the value (one takes part)
    check: Callable[[str], bool] | None = None


# ---- rule loading ---------------------------------------------------------------------------

_KIND_OK = re.compile(r"[^a-z0-9_]")
_LEADING_FLAGS = re.compile(rb"^\(\?([aiLmsux]+)\)")
_ESCAPE_LETTERS = frozenset(b"nrtbfu")
_AT = "at_"  # the group around a `back` rule's own match


def _flag(v) -> bool:
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


def compile_rule(d: dict) -> Rule:
    """One rule from its data; raises ValueError naming the rule when it is invalid.

    Patterns are compiled as bytes patterns: matching runs on the UTF-8 bytes, where word,
    space and case-insensitive classes are ASCII-only (secrets are ASCII) and `bytes.lower()`
    keeps offsets aligned (`str.lower()` can change a string's length).
    """
    kind = _kind(d.get("kind", ""))
    try:
        rx = re.compile(str(d["pattern"]).encode("utf-8"))
    except (KeyError, re.error, TypeError) as e:
        raise ValueError(f"redaction rule {kind!r}: bad pattern: {e}") from None
    cls = d.get("class", "secret")
    if cls not in ("secret", "pii"):
        raise ValueError(f"redaction rule {kind!r}: class must be 'secret' or 'pii'")
    check = d.get("check")
    if check is not None and check not in CHECKS:
        raise ValueError(f"redaction rule {kind!r}: unknown check {check!r}")
    group = d.get("group")
    if group is not None and group not in rx.groupindex:
        raise ValueError(f"redaction rule {kind!r}: pattern has no group {group!r}")
    hay = SHAPE if _flag(d.get("shape")) else LOWER if _flag(d.get("ci")) else TEXT
    run = int(d.get("run", 0))
    if run and not 16 <= run <= 256:
        raise ValueError(f"redaction rule {kind!r}: run must be between 16 and 256")
    raw_needles = () if run else d.get("needles", ())
    if isinstance(raw_needles, str):  # config values are strings: one needle, or a,b,c
        raw_needles = raw_needles.split(",")
    needles = []
    for n in raw_needles:
        n = str(n).encode("utf-8")
        if hay == LOWER:
            n = n.lower()
        elif hay == SHAPE:
            n = n.translate(SHAPE_TABLE)
        if n:
            needles.append(n)
    if run:
        hay, needles = RUNS, [b"a" * run]
    group2 = f"{group}2" if group and f"{group}2" in rx.groupindex else None
    back = int(d.get("back", 0))
    near = back_set = None
    if d.get("back_chars"):
        try:
            chars = re.compile(b"[" + str(d["back_chars"]).encode() + b"]")
        except re.error as e:
            raise ValueError(f"redaction rule {kind!r}: bad back_chars: {e}") from None
        back_set = frozenset(c for c in range(256) if chars.match(bytes([c])))
    elif back > 0 and needles:
        near = re.compile(b"(?s:.{0,%d}?)(?P<%s>" % (back, _AT.encode()) + _scoped(rx.pattern) + b")")
    return Rule(kind=kind, cls=cls, rx=rx, near=near, back_set=back_set, needles=tuple(needles),
                hay=hay, run=run,
                back=back, span=int(d.get("span", 512)), group=group,
                group2=group2,
                check=CHECKS[check] if check else None)


def _scoped(pattern: bytes) -> bytes:
    """A pattern usable inside an alternation: leading global flags become a scoped group."""
    m = _LEADING_FLAGS.match(pattern)
    if m:
        return b"(?" + m.group(1) + b":" + pattern[m.end():] + b")"
    return b"(?:" + pattern + b")"


# ---- JSON-escape and UTF-8 safety -----------------------------------------------------------

_BS = 0x5C  # backslash
_HEX = frozenset(b"0123456789abcdefABCDEF")


def _unicode_escape_end(data: bytes, i: int) -> int:
    """If offset `i` falls inside the hex digits of a `\\uXXXX` escape, the escape's end; else 0."""
    for k in range(1, 5):  # i is k characters after the 'u'
        u = i - k
        if u < 1 or data[u] != 0x75 or data[u - 1] != _BS:
            continue
        end = u + 5
        if end <= len(data) and all(c in _HEX for c in data[u + 1 : end]):
            return end
    return 0


def _safe_span(data: bytes, s: int, e: int) -> tuple[int, int]:
    """Move a span's edges off the inside of escapes and UTF-8 sequences.

    Raw JSONL often nests JSON in JSON strings (tool output), where an escape is a *run* of
    backslashes and the parity at one level says nothing about the next. So whatever the run,
    an edge is never placed right after a backslash nor inside `\\uXXXX`: the start moves
    forward (at worst an escaped letter stays visible), the end moves forward (the span grows).
    """
    n = len(data)
    while s < e:
        if s > 0 and data[s - 1] == _BS:
            s += 1
        elif (u := _unicode_escape_end(data, s)):
            s = u
        elif (data[s] & 0xC0) == 0x80:  # a UTF-8 continuation byte
            s += 1
        else:
            break
    while e < n:
        if data[e - 1] == _BS:
            e += 1
        elif (u := _unicode_escape_end(data, e)):
            e = u
        elif (data[e] & 0xC0) == 0x80:
            e += 1
        else:
            break
    return s, e


def _to_bytes(text) -> bytes:
    if isinstance(text, str):
        return text.encode("utf-8", "surrogatepass")
    if text is None:
        return b""
    return bytes(text)


def _to_str(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


# `<private>` … `</private>` (the closing tag may be JSON-escaped as `<\/private>`); an unclosed
# tag takes the rest of its line: the user asked for it to stay private, so err wide.
_PRIVATE_B = re.compile(rb"(?is)<private>(?:.*?<\\?/private>|[^\n]*)")


# A marker can only change what matches near it: later passes look for needles this close.
_NEAR = 1024


def _around(marks: list[tuple[int, int]], n: int) -> list[tuple[int, int]]:
    """Merged regions within `_NEAR` bytes of each marker."""
    out: list[list[int]] = []
    for s, e in marks:
        lo, hi = max(0, s - _NEAR), min(n, e + _NEAR)
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(lo, hi) for lo, hi in out]


# ---- the redactor ---------------------------------------------------------------------------

class Redactor:
    """Compiled rules. `secret_kinds` / `pii_kinds` say which class each kind belongs to."""

    def __init__(self, extra_rules: Iterable[dict] = (), allow: Iterable[str] = (), *,
                 rules: list[dict] | None = None):
        data = list(rules if rules is not None else load_rule_data())
        data += [dict(r) for r in extra_rules]
        self.rules = [compile_rule(d) for d in data]
        self.secret_kinds = frozenset(
            {r.kind for r in self.rules if r.cls == "secret"} | {PRIVATE_KIND, ERROR_KIND})
        self.pii_kinds = frozenset(r.kind for r in self.rules if r.cls == "pii")
        allow = [str(a) for a in allow if a]
        try:
            self._allow = (re.compile(b"|".join(b"(?:" + a.encode() + b")" for a in allow))
                           if allow else None)
        except re.error as e:
            raise ValueError(f"redaction allow pattern invalid: {e}") from None
        # needle -> the rules that use it, per haystack: each needle is searched for once
        self._needles: dict[tuple[int, bytes], list[int]] = {}
        for i, r in enumerate(self.rules):
            for n in r.needles:
                self._needles.setdefault((r.hay, n), []).append(i)
        self._needles = pool(self._needles)
        self._uses = {h for h, _ in self._needles}
        self._groups = scan_groups(self._needles)
        # Rules without needles share one scan; their groups are renamed to stay unique.
        plain = [(i, r) for i, r in enumerate(self.rules) if not r.needles]
        self._plain_rules = {f"r{i}": (i, r) for i, r in plain}
        parts = []
        for i, r in plain:
            pat = re.sub(rb"\(\?P<(\w+)>", partial(_suffix_group, i=i), r.rx.pattern)
            parts.append(b"(?P<r%d>" % i + _scoped(pat) + b")")
        self._plain = re.compile(b"|".join(parts)) if parts else None

    # -- matching --

    def _haystacks(self, view: bytes) -> dict[int, bytes]:
        """The copies of `view` needles are looked for in (same length, same offsets)."""
        hays = {TEXT: view}
        if LOWER in self._uses:
            hays[LOWER] = view.lower()
        if SHAPE in self._uses:
            hays[SHAPE] = view.translate(SHAPE_TABLE)
        if RUNS in self._uses:
            hays[RUNS] = view.translate(RUNS_TABLE)
        return hays

    def _hits(self, data: bytes, regions=None) -> list[tuple[int, int, int, str]]:
        """Candidate spans (start, end, rule index, kind): validated, allow-filtered, safe.

        `regions` ([(lo, hi)]) limits where needles are looked for (patterns still see the
        whole text around them); None = everywhere.
        """
        hits = []
        n = len(data)
        full = regions is None
        regions = [(0, n)] if regions is None else regions

        def add(i: int, rule: Rule, m: re.Match, group, group2=None) -> None:
            s, e = m.span(group)
            if s < 0 and group2:
                s, e = m.span(group2)
            if e <= s:
                return
            piece = data[s:e]
            if b"[REDACTED:" in piece:  # already redacted: keeps redaction idempotent
                return
            if rule.check is not None and not rule.check(piece.decode("latin-1")):
                return
            if self._allow is not None and self._allow.search(
                    m.group(_AT) if rule.near is not None else m.group(0)):
                return
            s, e = _safe_span(data, s, e)
            if e > s:
                hits.append((s, e, i, rule.kind))

        views = [(0, data)] if full else [(lo, data[lo:hi]) for lo, hi in regions]
        for base, view in views:
            hays = self._haystacks(view)
            for h, scan, members in self._groups:
                hay = hays[h]
                done: dict[int, int] = {}  # rule -> end of its last match: skip inside it
                for p, needle_len, idxs in occurrences(hay, scan, members):
                    at = base + p
                    if h == RUNS and at > 0 and data[at - 1] == _BS and \
                            data[at] in _ESCAPE_LETTERS:  # a run starting with `\n…`
                        at += 5 if data[at] == 0x75 else 1
                    for i in idxs:
                        if at < done.get(i, -1):
                            continue
                        rule = self.rules[i]
                        endpos = min(n, at + needle_len + rule.span)
                        if rule.back_set is not None:
                            # back over the characters a match may start with, then match once
                            start, lo = at, max(0, at - rule.back)
                            while start > lo and data[start - 1] in rule.back_set and \
                                    not (start > 1 and data[start - 2] == _BS):  # `\n…`
                                start -= 1
                            m = rule.rx.match(data, start, endpos)
                            if m is not None and m.end() <= at:
                                m = None
                        elif rule.near is not None:
                            # the leftmost match starting in [at - back, at] that reaches past
                            # `at`: one anchored match, never a search running on to `endpos`
                            start = max(0, at - rule.back)
                            m = rule.near.match(data, start, endpos)
                            while m is not None and m.end() <= at:
                                start = m.start(_AT) + 1
                                m = rule.near.match(data, start, endpos) if start <= at else None
                        else:
                            m = rule.rx.match(data, at, endpos)
                        if m is not None:
                            add(i, rule, m, rule.group or (_AT if rule.near else 0), rule.group2)
                            done[i] = m.end()
        if self._plain is not None:
            for lo, hi in regions:
                for m in self._plain.finditer(data, lo, hi):
                    i, rule = self._plain_rules[m.lastgroup or ""]
                    add(i, rule, m, f"{rule.group}_r{i}" if rule.group else m.lastgroup,
                        f"{rule.group2}_r{i}" if rule.group2 else None)
        return hits

    def _spans(self, data: bytes, regions=None) -> list[tuple[int, int, str]]:
        """Merged, non-overlapping spans (start, end, kind), in order. Overlapping hits become
        one wider span of the first kind — but a secret kind wins over PII (`ghp_…@github.com`
        is a token, not an address, for the promoter too)."""
        hits = self._hits(data, regions)
        hits.sort(key=lambda h: (h[0], -h[1], h[2]))
        out: list[list] = []
        for s, e, _, kind in hits:
            if out and s < out[-1][1]:
                out[-1][1] = max(out[-1][1], e)
                if out[-1][2] in self.pii_kinds and kind not in self.pii_kinds:
                    out[-1][2] = kind
            else:
                out.append([s, e, kind])
        return [(s, e, k) for s, e, k in out]

    def _redact(self, data: bytes) -> tuple[bytes, dict[str, int]]:
        counts: dict[str, int] = {}
        if b"<" in data and b"<private>" in data.lower():
            data, k = _PRIVATE_B.subn(MARK.format(PRIVATE_KIND).encode(), data)
            if k:
                counts[PRIVATE_KIND] = k
        # A marker changes its neighbours' context (`4012…1881(415) 555-2671`: the phone's left
        # boundary fails on '1' but holds on ']'), so repeat while a pass finds something: the
        # result is a fixed point and redacting it again changes nothing.
        regions = None  # first pass: everywhere; later passes: around the new markers
        for _ in range(_MAX_PASSES):
            spans = self._spans(data, regions)
            if not spans:
                break
            parts, last, size, marks = [], 0, 0, []
            for s, e, kind in spans:
                parts.append(data[last:s])
                size += s - last
                mark = MARK.format(kind).encode()
                marks.append((size, size + len(mark)))
                parts.append(mark)
                size += len(mark)
                counts[kind] = counts.get(kind, 0) + 1
                last = e
            parts.append(data[last:])
            data = b"".join(parts)
            regions = _around(marks, len(data))
        return data, counts

    # -- public --

    def redact(self, text: str) -> tuple[str, dict[str, int]]:
        """The text with every finding replaced, and how many of each kind. Never raises."""
        try:
            out, counts = self._redact(_to_bytes(text))
            return _to_str(out), counts
        except Exception:  # never let a secret through because a rule misbehaved
            return MARK.format(ERROR_KIND), {ERROR_KIND: 1}

    def redact_bytes(self, data: bytes) -> tuple[bytes, dict[str, int]]:
        """`redact` for UTF-8 bytes (a window as read). Never raises."""
        try:
            return self._redact(_to_bytes(data))
        except Exception:
            return MARK.format(ERROR_KIND).encode(), {ERROR_KIND: 1}

    def find(self, text: str, *, allow_placeholders: bool = False) -> list[tuple[str, int, int]]:
        """Findings as (kind, start, end) character offsets into `text` as given.

        `<private>` spans are findings of kind "private". With `allow_placeholders`, PII that is
        an obvious placeholder (user@example.com, 555-01xx…) is left out. Never raises: on an
        internal error the whole text is one `redaction_error` finding.
        """
        try:
            if not isinstance(text, str):
                text = _to_bytes(text).decode("utf-8", "replace")
            data = _to_bytes(text)
            found = [(PRIVATE_KIND, m.start(), m.end()) for m in _PRIVATE_B.finditer(data)]
            for s, e, kind in self._spans(data):
                if any(ps <= s < pe for _, ps, pe in found):
                    continue
                if allow_placeholders and kind in self.pii_kinds and \
                        is_placeholder(kind, _to_str(data[s:e])):
                    continue
                found.append((kind, s, e))
            found.sort(key=lambda f: f[1])
            if data.isascii():
                return found
            # byte offsets -> character offsets
            return [(k, len(_to_str(data[:s])), len(_to_str(data[:e]))) for k, s, e in found]
        except Exception:
            return [(ERROR_KIND, 0, len(text) if isinstance(text, str) else 0)]


@functools.lru_cache(maxsize=1)
def default_redactor() -> Redactor:
    """The packaged rules, compiled once per process."""
    return Redactor()


@functools.lru_cache(maxsize=8)
def _configured(extra: tuple, allow: tuple) -> Redactor:
    return Redactor([dict(r) for r in extra], list(allow))


def redactor_for(cfg) -> Redactor:
    """The redactor for a `RedactionConfig` (cached per distinct config)."""
    extra = tuple(tuple(sorted(r.items())) for r in (cfg.extra_rules or ()))
    allow = tuple(cfg.allow or ())
    if not extra and not allow:
        return default_redactor()
    return _configured(extra, allow)


def find_secrets(text: str, redactor: Redactor | None = None, *,
                 pii: bool = False) -> list[tuple[str, int, int]]:
    """What keeps a text from landing anywhere durable (a skill, a history entry, a commit, a
    feedback quote, a provenance record): (kind, start, end) of every secret the redaction
    rules find in it — and with `pii`, of PII that is not an obvious placeholder. The same
    rules capture redacts with, so what capture would have removed is refused here too.
    Offsets are in characters; the text itself is never in the result (findings get logged)."""
    r = redactor if redactor is not None else default_redactor()
    return [f for f in r.find(text, allow_placeholders=True)
            if f[0] not in r.pii_kinds or pii]


def has_secret(text: str, redactor: Redactor | None = None) -> bool:
    """Whether `find_secrets` finds anything."""
    return bool(find_secrets(text, redactor))
