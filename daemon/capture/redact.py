"""Redaction: secrets and PII become `[REDACTED:<kind>]`, `<private>…</private>` spans go whole,
and the user's home directory becomes `~`.

Rules are data (`redact_rules.toml`, plus extra rules and allow patterns from config) compiled
once (`redact_compile`); the matching is `redact_engine`'s. One call is one pass over the text
plus a local re-check around what it replaced:

1. `<private>` spans are replaced first (so removing one can never join two halves of a secret
   that a later pass would then find);
2. the engine's spans are replaced in one splice;
3. a marker changes its neighbours' context, so the regions around new markers are checked
   again until nothing more is found: `redact(redact(x)) == redact(x)`;
4. in JSONL (`redact_bytes`), a record the pass changed keeps its keys and types
   (`redact_records`);
5. the home directory is written `~` (a path, not a finding: it is not counted).

Over-redaction is the safe side. `redact` and `find` never raise: on an internal error the
whole text counts as one `redaction_error` finding (and `redact` returns only the marker).
"""

import functools
import os
import re
from collections.abc import Iterable

from .redact_checks import is_placeholder, luhn_ok
from .redact_compile import (
    compile_allow,
    compile_rule,
    load_rule_data,
)
from .redact_engine import Engine
from .redact_records import keep_records

__all__ = ["Redactor", "default_redactor", "redactor_for", "find_secrets",
           "load_rule_data", "compile_rule", "is_placeholder", "luhn_ok", "MARK"]

MARK = "[REDACTED:{}]"
_MAX_PASSES = 4
ERROR_KIND = "redaction_error"
PRIVATE_KIND = "private"

# `<private>` … `</private>` (the closing tag may be JSON-escaped as `<\/private>`); an unclosed
# tag takes the rest of its line: the user asked for it to stay private, so err wide. A tag
# quoted in backticks is a tag being written about (docs, code), not one in use.
_PRIVATE_B = re.compile(rb"(?is)(?<!`)<private>(?:.*?<\\?/private>|[^\n]*)")

# A marker can only change what matches near it: later passes look for needles this close.
_NEAR = 1024
_CHUNK = 1 << 19  # a text longer than this is redacted in pieces of about this size


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


def _to_bytes(text) -> bytes:
    if isinstance(text, str):
        return text.encode("utf-8", "surrogatepass")
    if text is None:
        return b""
    return bytes(text)


def _to_str(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


def _home_pattern(home: str | None) -> re.Pattern[bytes] | None:
    """The home directory as a whole path (not `/home/al` inside `/home/alice`)."""
    home = (home or "").rstrip("/")
    if len(home) < 2:
        return None
    return re.compile(re.escape(home.encode("utf-8", "surrogatepass")) + rb"(?![A-Za-z0-9._-])")


class Redactor(Engine):
    """Compiled rules. `secret_kinds` / `pii_kinds` say which class each kind belongs to.

    `home`: the directory written `~` in what `redact` returns (default: the user's)."""

    def __init__(self, extra_rules: Iterable[dict] = (), allow: Iterable[str] = (), *,
                 home: str | None = None):
        compiled = [compile_rule(d) for d in load_rule_data()]
        compiled += [compile_rule(dict(r), user=True) for r in extra_rules]
        super().__init__(compiled, compile_allow(list(allow)),
                         always_secret=(PRIVATE_KIND, ERROR_KIND))
        self._home = _home_pattern(os.path.expanduser("~") if home is None else home)

    def _redact(self, data: bytes, *, records: bool = False) -> tuple[bytes, dict[str, int]]:
        """Every finding replaced. With `records` (JSONL), a record whose structure a finding
        changed is redone value by value (`redact_records`)."""
        # a large text goes in pieces cut between JSONL records (no finding spans two
        # records), each small enough to stay in cache through the passes over it
        parts: list[bytes] = []
        counts: dict[str, int] = {}
        start = 0
        while start < len(data):
            cut = data.find(b"\n{", start + _CHUNK) + 1 if start + _CHUNK < len(data) else 0
            end = cut if cut > 0 else len(data)
            piece = data[start:end]
            out, found, quoted = self._redact_piece(piece)
            if records and quoted:  # only a replaced quote can change a record's structure
                out, found = keep_records(piece, out, found, self.redact)
            parts.append(out)
            for k, n in found.items():
                counts[k] = counts.get(k, 0) + n
            start = end
        return b"".join(parts), counts

    def _redact_piece(self, data: bytes) -> tuple[bytes, dict[str, int], bool]:
        """The piece redacted, its counts, and whether any replaced text held a quote."""
        counts: dict[str, int] = {}
        quoted = False
        if b"<" in data and b"<private>" in data.lower():
            data, k = _PRIVATE_B.subn(MARK.format(PRIVATE_KIND).encode(), data)
            if k:
                counts[PRIVATE_KIND] = k
                quoted = True  # an unclosed tag takes the rest of its line
        # A marker changes its neighbours' context (`4012…1881(415) 555-2671`: the phone's left
        # boundary fails on '1' but holds on ']'), so repeat while a pass finds something: the
        # result is a fixed point and redacting it again changes nothing.
        regions = None  # first pass: everywhere; later passes: around the new markers
        for _ in range(_MAX_PASSES):
            # an address at a reserved domain (example.com…) is nobody's: not redacted
            spans = [sp for sp in self.spans(data, regions) if sp[2] != "email"
                     or not is_placeholder("email", _to_str(data[sp[0]:sp[1]]))]
            if not spans:
                break
            parts, last, size, marks = [], 0, 0, []
            for s, e, kind in spans:
                parts.append(data[last:s])
                quoted = quoted or data.find(b'"', s, e) != -1
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
        return data, counts, quoted

    def _tilde(self, data: bytes) -> bytes:
        return self._home.sub(b"~", data) if self._home is not None else data

    # -- public --

    def redact(self, text: str) -> tuple[str, dict[str, int]]:
        """The text with every finding replaced, and how many of each kind. Never raises."""
        try:
            out, counts = self._redact(_to_bytes(text))
            return _to_str(self._tilde(out)), counts
        except Exception:  # never let a secret through because a rule misbehaved
            return MARK.format(ERROR_KIND), {ERROR_KIND: 1}

    def redact_bytes(self, data: bytes) -> tuple[bytes, dict[str, int]]:
        """`redact` for UTF-8 bytes (a window as read: JSONL, whose records keep their
        structure, `redact_records`). Never raises."""
        try:
            out, counts = self._redact(_to_bytes(data), records=True)
            return self._tilde(out), counts
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
            for s, e, kind in self.spans(data):
                if any(ps <= s < pe for _, ps, pe in found):
                    continue
                if allow_placeholders and kind in self.pii_kinds and \
                        is_placeholder(kind, _to_str(data[s:e])):
                    continue
                found.append((kind, s, e))
            found.sort(key=lambda f: f[1])
            if data.isascii():
                return found
            # byte offsets -> character offsets, counted once along the text
            edges = sorted({x for _, s, e in found for x in (s, e)})
            chars, at, pos = {}, 0, 0
            for b in edges:
                pos += len(data[at:b].decode("utf-8", "surrogatepass"))
                chars[b], at = pos, b
            return [(k, chars[s], chars[e]) for k, s, e in found]
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
    feedback quote, a provenance record, the wiki, the journal): (kind, start, end) of every
    secret the redaction rules find in it — and with `pii`, of PII that is not an obvious
    placeholder. The same rules capture redacts with, in the same encodings (wrapped,
    URL-encoded, base64), so what capture would have removed is refused here too. Offsets are
    in characters; the text itself is never in the result (findings get logged)."""
    r = redactor if redactor is not None else default_redactor()
    return [f for f in r.find(text, allow_placeholders=True)
            if f[0] not in r.pii_kinds or pii]
