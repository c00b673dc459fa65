"""The evidence packet: exactly what a model receives about a stretch of a session.

`build_packet` cuts the window, builds the digest of what came before it, and redacts both
before anything leaves capture. Records a reflector already had are left out (`reflected`), and
a turn's final answer the transcript does not hold yet is carried as the window's newest record
(`final_text`, already redacted: see `capture.final`). `format_packet` renders it for a person
(`autoharnessctl capture`), so a user can audit what would leave the machine.
"""

import os
from collections.abc import Container, Sequence

import msgspec

from ...protocol.replies import Packet
from ..persist import state as st
from .digest import build_digest
from .final import final_record
from .kind import check_transcript
from .records import WORK_TYPES
from .window import cut_window


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


def coverage(p: Packet) -> dict[str, int]:
    """One packet's span after the watermark, split by how the reflector sees it."""
    span = p.watermark_to - p.watermark_from
    return {"windows": 1, "bytes": span,
            "window_bytes": span - p.dropped_bytes - p.summarised_bytes,
            "summarised_bytes": p.summarised_bytes,
            "digest_bytes": p.dropped_bytes - p.unseen_bytes, "unseen_bytes": p.unseen_bytes}


def count_window(c: st.Capture, p: Packet, session_id: str = "") -> None:
    """A window cut, counted in the state's capture table (`status --json` → `capture`), and
    for its session (`seen`, the newest MAX_SEEN_SESSIONS kept) how much of what it spanned
    the reflector saw."""
    c.windows_cut += 1
    c.bytes_dropped += p.dropped_bytes
    c.fallbacks += p.fallback
    c.bookkeeping_records += p.bookkeeping_records
    c.bookkeeping_bytes += p.bookkeeping_bytes
    cov = coverage(p)
    c.bytes_digest_only += cov["digest_bytes"]
    c.bytes_unseen += cov["unseen_bytes"]
    _add(c.redactions, p.redactions)
    if session_id:
        mine = c.seen.pop(session_id, {})  # re-inserted: newest last
        _add(mine, cov)
        c.seen[session_id] = mine
        while len(c.seen) > MAX_SEEN_SESSIONS:
            del c.seen[next(iter(c.seen))]


def capture_summary(c: st.Capture) -> dict:
    """`status --json` → `capture`: every counter, without the sessions' `seen`."""
    out = msgspec.to_builtins(c)
    del out["seen"]
    return out
