"""The evidence packet: exactly what a model receives about a stretch of a session.

`build_packet` cuts the window, builds the digest of what came before it, and redacts both
before anything leaves capture. Records a reflector already had are left out (`reflected`), and
a turn's final answer the transcript does not hold yet is carried as the window's newest record
(`final_text`, already redacted: see `capture.final`). `format_packet` renders it for a person
(`autoharnessctl capture`), so a user can audit what would leave the machine.
"""

import os
from collections.abc import Container, Sequence

from claude_autoharness.daemon.capture.digest import build_digest
from claude_autoharness.daemon.capture.final import final_record
from claude_autoharness.daemon.capture.kind import check_transcript
from claude_autoharness.daemon.capture.records import WORK_TYPES
from claude_autoharness.daemon.capture.window import cut_window
from claude_autoharness.protocol.replies import Packet


def _add(into: dict[str, int], counts: dict[str, int]) -> None:
    for k, n in counts.items():
        into[k] = into.get(k, 0) + n


def build_packet(path: str | os.PathLike, start: int, capture_cfg, redactor, *,
                 expect_inode: int | None = None,
                 expect_size: int | None = None,
                 roots: Sequence[str] | None = None,
                 reflected: Container[str] | None = None,
                 final_text: str | None = None) -> Packet:
    """Window from watermark `start`, digest before it, both redacted with `redactor`.

    `reflected`: the uuids of records already handed to a reflector, left out of the window.
    `final_text`: the turn's final answer to carry as the newest record (the transcript does
    not hold it).

    The window carries the records that are work, each with only its work (`records`);
    bookkeeping records are left out before its byte cap and counted. What the cap dropped
    reaches the digest, built before the window's first record (not before the watermark), so
    only what even the digest could not hold goes unseen (`unseen_bytes`).

    A file that is not a Claude Code transcript with work in it is refused first
    (`kind.check_transcript`: TranscriptRefused naming what it looks like).

    Both are read through `source.open_transcript` beneath `roots` (None: only the file
    itself is checked, for a path the user named). `capture_cfg` is a `CaptureConfig`.
    Blocking file I/O: call it from a worker thread. Raises OSError if the transcript cannot be read.
    """
    check_transcript(path, roots)
    win = cut_window(path, start,
                     max_record_bytes=capture_cfg.max_record_bytes,
                     max_window_bytes=capture_cfg.max_window_bytes,
                     max_summary_bytes=capture_cfg.max_summary_bytes,
                     max_tool_bytes=capture_cfg.max_tool_bytes,
                     expect_inode=expect_inode, expect_size=expect_size,
                     record_types=WORK_TYPES, slim=True, roots=roots, reflected=reflected,
                     extra=final_record(final_text) if final_text else None)
    first = win.start + win.dropped_bytes  # what did not fit goes to the digest
    dig = build_digest(path, first, mark=win.start if win.dropped_bytes else None,
                       exchanges=capture_cfg.digest_exchanges,
                       max_chars=capture_cfg.digest_max_chars,
                       max_bytes=capture_cfg.digest_max_bytes,
                       max_scan_bytes=capture_cfg.digest_max_scan_bytes,
                       redactor=redactor, roots=roots)
    redactions: dict[str, int] = {}
    window_bytes, counts = redactor.redact_bytes(win.data)
    _add(redactions, counts)
    # the digest's entries were redacted one by one before clipping (dig.redactions); a second
    # pass over the joined text is cheap insurance and, redaction being idempotent, adds
    # nothing unless joining entries formed something new
    _add(redactions, dig.redactions)
    digest_text, counts = redactor.redact(dig.text)
    _add(redactions, counts)
    markers = [redactor.redact(raw)[0] for raw in win.markers]  # counted in the window already
    return Packet(
        window=window_bytes.decode("utf-8", "replace"),
        digest=digest_text,
        watermark_from=win.start,
        watermark_to=win.end,
        dropped_bytes=win.dropped_bytes,
        dropped_records=win.dropped_records,
        fallback=win.fallback,
        redactions=redactions,
        inode=win.inode,
        size=win.size,
        clipped_records=win.clipped_records,
        kept_records=win.kept_records,
        fallback_reason=win.fallback_reason,
        digest_records=dig.records,
        scanned_bytes=win.scanned_bytes + dig.scanned_bytes,
        bookkeeping_records=win.bookkeeping_records,
        bookkeeping_bytes=win.bookkeeping_bytes,
        bookkeeping_types=dict(win.bookkeeping_types),
        reflected_records=win.reflected_records,
        reflected_bytes=win.reflected_bytes,
        uuids=list(win.uuids),
        final_from_stop=win.extra,
        summarised_bytes=win.summarised_bytes,
        markers=markers,
        digest_from=dig.reach,
        unseen_bytes=max(0, min(dig.reach, first) - win.start),
    )


def format_packet(p: Packet) -> str:
    """The packet as a person reads it: what is sent, and what was dropped or redacted."""
    red = ", ".join(f"{k}={n}" for k, n in sorted(p.redactions.items())) or "none"
    kinds = ", ".join(f"{k}={n}" for k, n in sorted(p.bookkeeping_types.items()))
    head = [
        f"window: bytes {p.watermark_from}..{p.watermark_to} of {p.size} "
        f"({p.kept_records} records kept, {p.clipped_records} clipped, "
        f"{p.dropped_records} records / {p.dropped_bytes} bytes dropped)",
        f"bookkeeping left out: {p.bookkeeping_records} records / {p.bookkeeping_bytes} bytes"
        + (f" ({kinds})" if kinds else ""),
        *([f"already reflected, left out: {p.reflected_records} records / "
           f"{p.reflected_bytes} bytes"] if p.reflected_records else []),
        *(["final answer: from the Stop event (not in the transcript yet)"]
          if p.final_from_stop else []),
        f"seen: {seen_text(coverage(p))}",
        f"fallback: {p.fallback_reason or 'no'}",
        f"redactions: {red}",
        "",
        f"--- digest ({p.digest_records} records before the window) ---",
        p.digest,
        "",
        "--- window ---",
        p.window,
    ]
    return "\n".join(head)


def seen_text(cov: dict[str, int]) -> str:
    """A `coverage` (one packet's, or a session's sum) for reading."""
    parts = [f"{cov.get('window_bytes', 0)} in window records"]
    if cov.get("summarised_bytes"):
        parts.append(f"{cov['summarised_bytes']} stood for by a compaction summary in it")
    if cov.get("digest_bytes") or cov.get("unseen_bytes"):
        parts.append(f"{cov.get('digest_bytes', 0)} only in the digest (text and tool names)")
        parts.append(f"{cov.get('unseen_bytes', 0)} not seen")
    return f"of {cov.get('bytes', 0)} bytes after the watermark, " + ", ".join(parts)


MAX_SEEN_SESSIONS = 1_000  # sessions whose coverage is kept (the oldest go first)
_SEEN_KEYS = ("windows", "bytes", "window_bytes", "summarised_bytes", "digest_bytes",
              "unseen_bytes")


def coverage(p: Packet) -> dict[str, int]:
    """One packet's span after the watermark, split by how the reflector sees it."""
    span = p.watermark_to - p.watermark_from
    return {"windows": 1, "bytes": span,
            "window_bytes": span - p.dropped_bytes - p.summarised_bytes,
            "summarised_bytes": p.summarised_bytes,
            "digest_bytes": p.dropped_bytes - p.unseen_bytes, "unseen_bytes": p.unseen_bytes}


class CaptureStats:
    """Counters for `status --json` → `capture: {windows_cut, bytes_dropped, fallbacks,
    bookkeeping_records, bookkeeping_bytes, bytes_digest_only, bytes_unseen, redactions}`, and
    per session (`seen_of`) how much of what its windows spanned the reflector saw."""

    def __init__(self):
        self.windows_cut = 0
        self.bytes_dropped = 0
        self.fallbacks = 0
        self.bookkeeping_records = 0
        self.bookkeeping_bytes = 0
        self.bytes_digest_only = 0
        self.bytes_unseen = 0
        self.redactions: dict[str, int] = {}
        self.refused = 0
        self.last_refused: dict | None = None  # {path, reason, at}
        self.seen: dict[str, dict[str, int]] = {}  # session id -> summed `coverage`

    def refuse(self, path: str, reason: str, now: float) -> None:
        """A transcript path that was not read (see `source.resolve`)."""
        self.refused += 1
        self.last_refused = {"path": path, "reason": reason, "at": now}

    def add(self, p: Packet, session_id: str = "") -> None:
        self.windows_cut += 1
        self.bytes_dropped += p.dropped_bytes
        self.fallbacks += p.fallback
        self.bookkeeping_records += p.bookkeeping_records
        self.bookkeeping_bytes += p.bookkeeping_bytes
        cov = coverage(p)
        self.bytes_digest_only += cov["digest_bytes"]
        self.bytes_unseen += cov["unseen_bytes"]
        _add(self.redactions, p.redactions)
        if session_id:
            mine = self.seen.pop(session_id, {})  # re-inserted: newest last
            _add(mine, cov)
            self.seen[session_id] = mine
            while len(self.seen) > MAX_SEEN_SESSIONS:
                del self.seen[next(iter(self.seen))]

    def seen_of(self, session_id: str) -> dict[str, int]:
        """The session's windows so far: bytes spanned, and how they were seen."""
        return dict(self.seen.get(session_id) or {})

    def to_dict(self) -> dict:
        return {"windows_cut": self.windows_cut, "bytes_dropped": self.bytes_dropped,
                "fallbacks": self.fallbacks, "bookkeeping_records": self.bookkeeping_records,
                "bookkeeping_bytes": self.bookkeeping_bytes,
                "bytes_digest_only": self.bytes_digest_only, "bytes_unseen": self.bytes_unseen,
                "redactions": dict(self.redactions),
                "refused": self.refused, "last_refused": self.last_refused}

    def to_state(self) -> dict:
        return {**self.to_dict(), "seen": {k: dict(v) for k, v in self.seen.items()}}

    def from_state(self, state: dict) -> None:
        if not isinstance(state, dict):
            return
        for key in ("windows_cut", "bytes_dropped", "fallbacks", "bookkeeping_records",
                    "bookkeeping_bytes", "bytes_digest_only", "bytes_unseen", "refused"):
            v = state.get(key)
            if isinstance(v, int) and not isinstance(v, bool):
                setattr(self, key, v)
        last = state.get("last_refused")
        if isinstance(last, dict):
            self.last_refused = last
        red = state.get("redactions")
        if isinstance(red, dict):
            self.redactions = {str(k): v for k, v in red.items() if isinstance(v, int)}
        seen = state.get("seen")
        if isinstance(seen, dict):
            self.seen = {str(k): {n: v[n] for n in _SEEN_KEYS if isinstance(v.get(n), int)}
                         for k, v in list(seen.items())[-MAX_SEEN_SESSIONS:]
                         if isinstance(v, dict)}
