"""Window cutting (capture/window.py) over real transcripts copied to temp dirs."""

import hashlib
import json
import os
import random

import pytest

from claude_autoharness.daemon.capture import window as wmod
from claude_autoharness.daemon.capture.digest import build_digest
from claude_autoharness.daemon.capture.packet import build_packet
from claude_autoharness.daemon.capture.redact import default_redactor
from claude_autoharness.daemon.capture.window import cut_window
from claude_autoharness.protocol.config import CaptureConfig
from conftest import REAL, copy_corpus

BIG = "spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
OLD = "claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
HUGE = 10**9


def _lines(name: str) -> list[bytes]:
    return (REAL / name).read_bytes().splitlines(keepends=True)


def _append(path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


@pytest.mark.parametrize("name", [OLD, "spotter/subagent.jsonl", "fasthooks/sample_main_transcript.jsonl"])
def test_incremental_windows_have_no_gap_and_no_overlap(short_tmp, name):
    """A transcript grown line by line (sometimes half a line at a time) and cut after every
    write yields windows that tile the file exactly: each starts at the previous end, never
    includes a half-written line, and together they are the file byte for byte."""
    rng = random.Random(7)
    path = short_tmp / "t.jsonl"
    path.write_bytes(b"")
    mark, pieces = 0, []
    for line in _lines(name):
        if rng.random() < 0.3 and len(line) > 2:  # a record being written: first half only
            cut = rng.randrange(1, len(line) - 1)
            _append(path, line[:cut])
            w = cut_window(path, mark, max_record_bytes=HUGE, max_window_bytes=HUGE)
            assert w.end == mark and w.data == b""  # the partial line stays out
            _append(path, line[cut:])
        else:
            _append(path, line)
        w = cut_window(path, mark, max_record_bytes=HUGE, max_window_bytes=HUGE)
        assert w.start == mark and not w.fallback and w.dropped_bytes == 0
        assert w.end == os.path.getsize(path)
        pieces.append(w.data)
        mark = w.end
    assert b"".join(pieces) == (REAL / name).read_bytes()


def test_incremental_windows_with_default_caps_stay_contiguous(short_tmp):
    """With the default caps and appends in random batches, every window starts where the last
    ended and accounts for its span exactly: dropped bytes + raw bytes kept == end - start."""
    rng = random.Random(3)
    lines = _lines(BIG)
    path = short_tmp / "t.jsonl"
    path.write_bytes(b"")
    mark, i = 0, 0
    while i < len(lines):
        k = rng.randrange(1, 120)
        _append(path, b"".join(lines[i : i + k]))
        i += k
        w = cut_window(path, mark)
        assert w.start == mark and w.end == os.path.getsize(path)
        assert len(w.data) <= 200_000
        raw = path.read_bytes()[w.start + w.dropped_bytes : w.end]
        assert raw.count(b"\n") == w.kept_records
        if not w.clipped_records and not w.dropped_bytes:
            assert w.data == raw
        mark = w.end
    assert mark == (REAL / BIG).stat().st_size


def test_window_keeps_newest_records_with_a_drop_marker(short_tmp):
    """Over the cap, the newest whole records are kept and a leading marker line names the
    bytes and records dropped; the kept records are exactly the file's last lines."""
    path = copy_corpus(BIG, short_tmp)
    w = cut_window(path, 0, max_window_bytes=60_000, max_record_bytes=HUGE)
    assert len(w.data) <= 60_000
    first, rest = w.data.split(b"\n", 1)
    assert first.startswith(b"[autoharness: dropped %d bytes" % w.dropped_bytes)
    assert b"kept the newest %d records" % w.kept_records in first
    data = path.read_bytes()
    assert w.dropped_bytes > 0 and w.dropped_records >= 1
    assert data[w.dropped_bytes :] == rest  # whole records, newest, untouched
    assert data[w.dropped_bytes - 1 : w.dropped_bytes] == b"\n"


def test_long_raw_records_keep_their_head_and_end_with_a_visible_marker(short_tmp):
    """A raw record over max_record_bytes keeps its beginning and its end around a marker
    naming the sizes; it never splits a UTF-8 character; short records are untouched."""
    path = short_tmp / "t.jsonl"
    long_text = "HEADMARK" + "é" * 5000 + "TAILMARK"
    rec = json.dumps({"type": "user", "message": {"content": long_text}}, ensure_ascii=False)
    short = b'{"type":"user","message":{"content":"hi"}}\n'
    path.write_bytes(short + rec.encode() + b"\n" + short)
    w = cut_window(path, 0, max_record_bytes=1000)
    lines = w.data.splitlines(keepends=True)
    assert lines[0] == short and lines[2] == short
    clipped = lines[1]
    assert len(clipped) <= 1000 and w.clipped_records == 1
    assert b"[autoharness: record clipped," in clipped
    assert b"of %d bytes kept]" % (len(rec.encode()) + 1) in clipped
    assert b"HEADMARK" in clipped and clipped.endswith(b'TAILMARK"}}\n')
    clipped.decode("utf-8")  # no split character
    assert rec.encode().startswith(clipped[: clipped.index(b" [autoharness")])


def test_partial_final_line_is_left_for_the_next_window(short_tmp):
    """A final line without newline (still being written) is excluded; once finished, the next
    window starts at it and contains it whole."""
    lines = _lines("spotter/short.jsonl")
    path = short_tmp / "t.jsonl"
    path.write_bytes(b"".join(lines[:5]) + lines[5][:40])
    w = cut_window(path, 0)
    assert w.end == len(b"".join(lines[:5]))
    assert w.data == b"".join(lines[:5])
    _append(path, lines[5][40:])
    w2 = cut_window(path, w.end)
    assert w2.start == w.end and w2.data == lines[5]


def test_watermark_past_eof_falls_back_to_a_bounded_marked_tail(short_tmp):
    """A watermark past EOF re-reads at most fallback_bytes of the tail, in whole records, with
    a marker saying so."""
    path = copy_corpus("spotter/subagent.jsonl", short_tmp)
    size = path.stat().st_size
    w = cut_window(path, size + 100, fallback_bytes=50_000, max_record_bytes=HUGE)
    assert w.fallback and "past end of file" in w.fallback_reason
    assert w.data.startswith(b"[autoharness: fallback: watermark %d invalid" % (size + 100))
    assert w.start == size - 50_000 and w.end == size
    body = w.data.split(b"\n", 1)[1]
    assert len(body) <= 50_000 and path.read_bytes().endswith(body)
    for line in body.splitlines():
        json.loads(line)  # whole records only


def test_rewritten_shorter_file_falls_back(short_tmp):
    """A file that shrank below the size the watermark was taken at (compaction rewrite), or
    was replaced by another inode, falls back to a marked re-read of its tail."""
    path = copy_corpus("spotter/subagent.jsonl", short_tmp)
    first = cut_window(path, 0)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3].rsplit(b"\n", 1)[0] + b"\n")  # rewritten shorter
    w = cut_window(path, first.end - 10_000, expect_size=first.size, expect_inode=first.inode)
    assert w.fallback and "shrank" in w.fallback_reason and w.end == path.stat().st_size
    assert w.data.startswith(b"[autoharness: fallback:")
    other = short_tmp / "new.jsonl"
    other.write_bytes(data)
    os.replace(other, path)  # same size, new inode
    w = cut_window(path, first.end, expect_size=first.size, expect_inode=first.inode)
    assert w.fallback and "inode" in w.fallback_reason


def test_capture_never_changes_the_transcript(short_tmp):
    """Cutting windows, digests and packets leaves the transcript's bytes and mtime unchanged,
    and works on a read-only file (it is only ever opened O_RDONLY)."""
    path = copy_corpus(BIG, short_tmp)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    mtime = path.stat().st_mtime_ns
    os.chmod(path, 0o400)
    for start in (0, 1_000_000, path.stat().st_size, path.stat().st_size + 5):
        cut_window(path, start)
        build_digest(path, start)
        build_packet(path, start, CaptureConfig(), default_redactor())
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert path.stat().st_mtime_ns == mtime


def test_window_never_reads_before_the_watermark_and_reads_O_window(short_tmp, monkeypatch):
    """Every read is at or after the watermark, and a cut over a huge span reads about one
    window plus a chunk, not the span: the cost is O(window), not O(file)."""
    path = copy_corpus(BIG, short_tmp)
    reads = []
    real = os.pread

    def spy(fd, n, off):
        reads.append((off, n))
        return real(fd, n, off)

    monkeypatch.setattr(wmod.os, "pread", spy)
    start = 123_457
    start = path.read_bytes().index(b"\n", start) + 1
    w = cut_window(path, start, max_window_bytes=30_000, max_record_bytes=HUGE)
    assert reads and min(off for off, _ in reads) >= start
    total = sum(n for _, n in reads)
    assert total == w.scanned_bytes
    assert total <= 30_000 + 80_000 + 2 * wmod.CHUNK  # a window, the longest record, a chunk


def test_over_long_line_is_not_buffered_and_scan_is_bounded(short_tmp):
    """A multi-MiB final record is clipped from its head while scanning back to its start;
    with a small scan budget the cut stops reading and reports the drop instead."""
    path = short_tmp / "t.jsonl"
    small = b'{"type":"user","message":{"content":"before"}}\n'
    huge = b'{"type":"user","message":{"content":"' + b"x" * (6 * 1024 * 1024) + b'"}}\n'
    path.write_bytes(small + huge)
    w = cut_window(path, 0)
    assert w.data.startswith(small) and w.clipped_records == 1 and len(w.data) < 5_000
    w = cut_window(path, 0, max_scan_bytes=1024 * 1024)
    assert w.scanned_bytes <= 1024 * 1024 + wmod.CHUNK
    assert w.kept_records == 0 and w.dropped_bytes == len(small) + len(huge)
    assert w.data.startswith(b"[autoharness: dropped")


def test_empty_and_caught_up_windows(short_tmp):
    """A caught-up watermark gives an empty window that does not move; an empty file too."""
    path = copy_corpus("spotter/short.jsonl", short_tmp)
    size = path.stat().st_size
    w = cut_window(path, size)
    assert (w.data, w.start, w.end, w.fallback) == (b"", size, size, False)
    empty = short_tmp / "e.jsonl"
    empty.write_bytes(b"")
    w = cut_window(empty, 0)
    assert (w.data, w.end, w.fallback) == (b"", 0, False)


def test_packet_is_redacted_window_plus_digest(short_tmp):
    """build_packet: the window (from the watermark) and the digest (before it) both come out
    redacted with the redactions counted; the watermarks are the window's; the packet encodes
    to JSON, renders for a person, and feeds the capture status counters."""
    import msgspec

    from claude_autoharness.daemon.capture.packet import (
        Packet,
        capture_summary,
        count_window,
        format_packet,
    )
    from claude_autoharness.daemon.persist.state import Capture

    token = "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"
    path = short_tmp / "t.jsonl"
    early = json.dumps({"type": "user", "message": {"role": "user",
                        "content": f"my email is alice.smith@corp.io, token {token}"}})
    late = json.dumps({"type": "user", "message": {"role": "user",
                       "content": f"use {token} for the push"}})
    path.write_bytes(early.encode() + b"\n" + late.encode() + b"\n")
    mark = len(early) + 1
    p = build_packet(path, mark, CaptureConfig(), default_redactor())
    assert (p.watermark_from, p.watermark_to, p.fallback) == (mark, path.stat().st_size, False)
    assert token not in p.window and "[REDACTED:github_token]" in p.window
    json.loads(p.window)  # the single record is still valid JSON
    assert "alice.smith" not in p.digest and "[REDACTED:email]" in p.digest
    assert p.redactions == {"github_token": 2, "email": 1}
    assert msgspec.json.decode(msgspec.json.encode(p), type=Packet) == p
    text = format_packet(p)
    assert "--- digest" in text and "--- window ---" in text and "github_token=2" in text
    stats = Capture()
    count_window(stats, p)
    count_window(stats, build_packet(path, path.stat().st_size + 1, CaptureConfig(),
                                     default_redactor()))
    d = capture_summary(stats)
    assert d["windows_cut"] == 2 and d["fallbacks"] == 1 and d["redactions"]["github_token"] >= 2
    assert msgspec.json.decode(msgspec.json.encode(stats), type=Capture) == stats


def test_tail_start_is_a_line_start_near_the_end(short_tmp):
    """tail_start gives a record boundary about n bytes before EOF (0 for a short file), so a
    "recent past" window never begins mid-record."""
    from claude_autoharness.daemon.capture.window import tail_start

    path = copy_corpus("spotter/subagent.jsonl", short_tmp)
    data = path.read_bytes()
    s = tail_start(path, 50_000)
    assert len(data) - 50_000 <= s < len(data) and data[s - 1 : s] == b"\n"
    assert tail_start(path, 10**9) == 0
    lines = data.splitlines(keepends=True)
    exact = len(data) - len(lines[-1])
    assert tail_start(path, len(lines[-1])) == exact  # already on a boundary: kept


