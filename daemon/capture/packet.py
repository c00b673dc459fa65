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
from claude_autoharness.daemon.capture.window import CONVERSATION_TYPES, cut_window
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

    The window carries conversation records only (`CONVERSATION_TYPES`); bookkeeping records
    are left out before its byte cap and counted.

    Both are read through `source.open_transcript` beneath `roots` (None: only the file
    itself is checked, for a path the user named). `capture_cfg` is a `CaptureConfig`.
    Blocking file I/O: call it from a worker thread. Raises OSError if the transcript cannot be read.
    """
    win = cut_window(path, start,
                     max_record_bytes=capture_cfg.max_record_bytes,
                     max_window_bytes=capture_cfg.max_window_bytes,
                     expect_inode=expect_inode, expect_size=expect_size,
                     record_types=CONVERSATION_TYPES, roots=roots, reflected=reflected,
                     extra=final_record(final_text) if final_text else None)
    dig = build_digest(path, win.start,
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


class CaptureStats:
    """Counters for `status --json` → `capture: {windows_cut, bytes_dropped, fallbacks,
    bookkeeping_records, bookkeeping_bytes, redactions}`."""

    def __init__(self):
        self.windows_cut = 0
        self.bytes_dropped = 0
        self.fallbacks = 0
        self.bookkeeping_records = 0
        self.bookkeeping_bytes = 0
        self.redactions: dict[str, int] = {}
        self.refused = 0
        self.last_refused: dict | None = None  # {path, reason, at}

    def refuse(self, path: str, reason: str, now: float) -> None:
        """A transcript path that was not read (see `source.resolve`)."""
        self.refused += 1
        self.last_refused = {"path": path, "reason": reason, "at": now}

    def add(self, p: Packet) -> None:
        self.windows_cut += 1
        self.bytes_dropped += p.dropped_bytes
        self.fallbacks += p.fallback
        self.bookkeeping_records += p.bookkeeping_records
        self.bookkeeping_bytes += p.bookkeeping_bytes
        _add(self.redactions, p.redactions)

    def to_dict(self) -> dict:
        return {"windows_cut": self.windows_cut, "bytes_dropped": self.bytes_dropped,
                "fallbacks": self.fallbacks, "bookkeeping_records": self.bookkeeping_records,
                "bookkeeping_bytes": self.bookkeeping_bytes,
                "redactions": dict(self.redactions),
                "refused": self.refused, "last_refused": self.last_refused}

    def to_state(self) -> dict:
        return self.to_dict()

    def from_state(self, state: dict) -> None:
        if not isinstance(state, dict):
            return
        for key in ("windows_cut", "bytes_dropped", "fallbacks", "bookkeeping_records",
                    "bookkeeping_bytes", "refused"):
            v = state.get(key)
            if isinstance(v, int) and not isinstance(v, bool):
                setattr(self, key, v)
        last = state.get("last_refused")
        if isinstance(last, dict):
            self.last_refused = last
        red = state.get("redactions")
        if isinstance(red, dict):
            self.redactions = {str(k): v for k, v in red.items() if isinstance(v, int)}
