"""The matching core: compiled rules in, merged spans (start, end, kind) out.

1. one linear scan finds every needle of every rule (`redact_scan`), and runs of base64
   characters for `run` rules; a rule's pattern runs only there, anchored (a rule that may
   start before its needle walks back over `back_chars`, or matches once after a bounded lazy
   prefix), never a search running on to the end of its span;
2. a `wrap` rule whose token runs into a line break is matched again on a copy with the breaks
   inside tokens taken out (`redact_views.joined`: from the needle, or from the start of the
   value a match stopped at the break), and its span mapped back;
3. URL-encoded runs and base64 blobs that encode text are decoded and the rules run on what
   they say (one level deep); a finding there replaces the encoded run it came from;
4. matches are validated (`check`), filtered by the allow list, moved off the inside of JSON
   escapes and UTF-8 sequences (`safe_span`), and merged where they overlap.
"""

from .redact_compile import Rule
from .redact_scan import RUNS_TABLE, NeedleScan
from .redact_views import (
    PERCENT_RUN,
    b64_text_blobs,
    continues_after_break,
    joined,
    percent_decode,
)

_BS = 0x5C  # backslash
_HEX = frozenset(b"0123456789abcdefABCDEF")
_ESCAPE_LETTERS = frozenset(b"nrtbfu")
_DECODE_DEPTH = 2  # decoded views of decoded views, no deeper


def _unicode_escape_end(data: bytes, i: int) -> int:
    """If offset `i` falls inside the hex digits of a `\\uXXXX` escape, the escape's end; else 0."""
    for k in range(1, 5):  # i is k characters after the 'u'
        u = i - k
        if u < 1 or data[u] != 0x75 or data[u - 1] != _BS:
            continue
        end = u + 5
        if end <= len(data) and all(c in _HEX for c in data[u + 1: end]):
            return end
    return 0


def safe_span(data: bytes, s: int, e: int) -> tuple[int, int]:
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


class Engine:
    """Compiled rules and the scan over their needles. `secret_kinds` / `pii_kinds` say which
    class each kind belongs to."""

    def __init__(self, rules: list[Rule], allow=None, *, always_secret=()):
        self.rules = rules
        self.secret_kinds = frozenset({r.kind for r in rules if r.cls == "secret"}
                                      | set(always_secret))
        self.pii_kinds = frozenset(r.kind for r in rules if r.cls == "pii")
        self._allow = allow
        needles: dict[tuple[int, bytes], list[int]] = {}
        for i, r in enumerate(rules):
            for n in r.needles:
                needles.setdefault((r.hay, n), []).append(i)
        self._scan = NeedleScan(needles)
        self._plain = [(i, r) for i, r in enumerate(rules) if not r.needles]
        self._kind_rule = {r.kind: i for i, r in reversed(list(enumerate(rules)))}

    # -- one rule at one needle --

    def _match_at(self, rule: Rule, data: bytes, at: int, needle_len: int):
        n = len(data)
        endpos = min(n, at + needle_len + rule.span)
        if rule.back_set is not None:
            # back over the characters a match may start with, then match once
            lo = max(0, at - rule.back)
            start = lo + len(data[lo:at].rstrip(rule.back_set))  # C-speed walk back
            if start > 0 and data[start - 1] == _BS:
                start += 1  # never onto the letter of an escape (`\n…`)
            m = rule.rx.match(data, start, endpos)
            return None if m is not None and m.end() <= at else m
        if rule.near is not None:
            # the leftmost match starting in [at - back, at] that reaches past `at`: one
            # anchored match, never a search running on to `endpos`
            start = max(0, at - rule.back)
            m = rule.near.match(data, start, endpos)
            while m is not None and m.end() <= at:
                start = m.start(1) + 1
                m = rule.near.match(data, start, endpos) if start <= at else None
            return m
        return rule.rx.match(data, at, endpos)

    @staticmethod
    def _span_of(rule: Rule, m) -> tuple[int, int]:
        shift = 1 if rule.near is not None else 0  # `near` puts the pattern in group 1
        s, e = m.span(rule.group + shift) if rule.group else m.span(shift)
        if s < 0 and rule.group2 is not None:
            s, e = m.span(rule.group2 + shift)
        return s, e

    @staticmethod
    def _whole(rule: Rule, m) -> bytes:
        return m.group(1 if rule.near is not None else 0)

    def _accept(self, rule: Rule, data: bytes, s: int, e: int, whole: bytes) -> bool:
        if e <= s:
            return False
        piece = data[s:e]
        if b"[REDACTED:" in piece:  # already redacted: keeps redaction idempotent
            return False
        if rule.check is not None and not rule.check(piece.decode("latin-1")):
            return False
        return self._allow is None or self._allow.search(whole) is None

    def _wrapped(self, rule: Rule, data: bytes, at: int, needle_len: int, join_at: int):
        """The rule matched on the token with its line breaks out, as an original span; the
        token joined is the one starting at `join_at` (the needle, or a value's start)."""
        lo = max(0, at - rule.back)
        view = joined(data, lo, min(len(data), at + needle_len + rule.span + 256), join_at)
        m = self._match_at(rule, view.text, at - lo, needle_len)
        if m is None:
            return None
        s, e = self._span_of(rule, m)
        if not self._accept(rule, view.text, s, e, self._whole(rule, m)):
            return None
        return view.span(s, e)

    def _at_needle(self, i: int, data: bytes, at: int, needle_len: int):
        """Rule `i` at one needle: (spans found, end of its match or -1)."""
        rule = self.rules[i]
        m = self._match_at(rule, data, at, needle_len)
        found, end, join_at = [], -1, at
        if m is not None:
            s, e = self._span_of(rule, m)
            if self._accept(rule, data, s, e, self._whole(rule, m)):
                found.append(safe_span(data, s, e))
            end = m.end()
            # a match that stops at a line break the token goes on after: join from its value
            if not (rule.wrap and continues_after_break(data, end - 1, generated=True)):
                return found, end
            join_at = max(s, at)
        elif not (rule.wrap and continues_after_break(data, at + needle_len)):
            return found, end
        span = self._wrapped(rule, data, at, needle_len, join_at)
        if span is not None:
            found.append(safe_span(data, *span))
            end = max(end, found[-1][1])
        return found, end

    # -- all rules --

    def hits(self, data: bytes, regions=None, depth: int = 0) -> list[tuple[int, int, int, str]]:
        """Candidate spans (start, end, rule index, kind): validated, allow-filtered, safe.

        `regions` ([(lo, hi)]) limits where needles are looked for (patterns still see the
        whole text around them); None = everywhere.
        """
        out = []
        n = len(data)
        regions = [(0, n)] if regions is None else regions
        for lo, hi in regions:
            done: dict[int, int] = {}  # rule -> end of its last match: skip inside it
            for at, needle_len, idxs in self._occurrences(data, lo, hi):
                for i in idxs:
                    if at < done.get(i, -1):
                        continue
                    found, end = self._at_needle(i, data, at, needle_len)
                    out += [(s, e, i, self.rules[i].kind) for s, e in found]
                    if end >= 0:
                        done[i] = end
            for i, rule in self._plain:
                for m in rule.rx.finditer(data, lo, hi):
                    s, e = self._span_of(rule, m)
                    if self._accept(rule, data, s, e, self._whole(rule, m)):
                        s, e = safe_span(data, s, e)
                        out.append((s, e, i, rule.kind))
            if depth < _DECODE_DEPTH:
                out += self._decoded(data, lo, hi, depth)
        return out

    def _occurrences(self, data: bytes, lo: int, hi: int):
        """Needle occurrences and run starts in data[lo:hi], in order of offset."""
        found = list(self._scan.occurrences(data, lo, hi))
        if self._scan.runs:
            runs_hay = data[lo:hi].translate(RUNS_TABLE)
            for at, size, idxs in self._scan.run_starts(runs_hay, lo):
                if at > 0 and data[at - 1] == _BS and data[at] in _ESCAPE_LETTERS:
                    at += 5 if data[at] == 0x75 else 1  # a run starting with `\n…`
                found.append((at, size, idxs))
            found.sort(key=lambda f: f[0])
        return found

    def _decoded(self, data: bytes, lo: int, hi: int, depth: int) -> list[tuple[int, int, int, str]]:
        """Findings in what URL-encoded runs and base64 text blobs of data[lo:hi] decode to
        (and what that decodes to: URL-encoded twice, base64 of a URL-encoded form)."""
        out = []
        if b"%" in data[lo:hi]:
            for m in PERCENT_RUN.finditer(data, lo, hi):
                s, e = m.span()
                view = percent_decode(data, s, e)
                for ds, de, kind in self.spans(view.text, depth=depth + 1):
                    out.append((*view.span(ds, de), self._kind_rule[kind], kind))
        for s, e, text in b64_text_blobs(data, lo, hi):
            kinds = [k for _s, _e, k in self.spans(text, depth=depth + 1) if k in self.secret_kinds]
            if kinds:  # the whole blob: what it encodes is the secret's context too
                out.append((s, e, self._kind_rule[kinds[0]], kinds[0]))
        return out

    def spans(self, data: bytes, regions=None, depth: int = 0) -> list[tuple[int, int, str]]:
        """Merged, non-overlapping spans (start, end, kind), in order. Overlapping hits become
        one wider span of the first kind — but a secret kind wins over PII (`ghp_…@github.com`
        is a token, not an address, for the promoter too)."""
        hits = self.hits(data, regions, depth)
        public = [(s, e) for s, e, i, _ in hits if self.rules[i].cls == "public"]
        if public:
            hits = [h for h in hits if self.rules[h[2]].cls != "public" and not (
                self.rules[h[2]].generic and any(ps <= h[0] and h[1] <= pe for ps, pe in public))]
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

