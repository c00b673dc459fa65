"""Nothing dropped in silence: what a full window cannot hold reaches the digest, and `capture`
and `status` say how much of a session the reflector saw. Over real transcripts."""

import json
import os

import msgspec

from claude_autoharness.client.verbs.status import seen_share
from claude_autoharness.daemon.capture.digest import MARK_NOTE
from claude_autoharness.daemon.capture.packet import build_packet, capture_summary, count_window, coverage
from claude_autoharness.daemon.capture.redact import default_redactor
from claude_autoharness.daemon.persist import state as st
from claude_autoharness.protocol.config import CaptureConfig
from conftest import CORPUS, REAL

OLD = REAL / "claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"  # 1.0.98, 774 KB
CLI = CORPUS / "claude-code" / "transcripts"


def _tools_in(raw: bytes, lo: int, hi: int) -> list[str]:
    names = []
    for line in raw[lo:hi].splitlines():
        rec = json.loads(line)
        content = (rec.get("message") or {}).get("content")
        if rec.get("type") == "assistant" and not rec.get("isSidechain") \
                and isinstance(content, list):
            names += [b["name"] for b in content if b.get("type") == "tool_use"]
    return names


def test_what_the_window_drops_reaches_the_digest(short_tmp):
    """A window too small for the work since the watermark keeps the newest records; the
    digest is built before the first of them, so the prompts and tool names of the dropped
    span are in it, after a note where the earlier windows ended. Before, the digest began at
    the watermark and those were in neither."""
    raw = OLD.read_bytes()
    path = short_tmp / "t.jsonl"
    path.write_bytes(raw)
    mark = raw.index(b"\n", len(raw) // 3) + 1
    p = build_packet(path, mark, CaptureConfig(max_window_bytes=40_000), default_redactor())
    first = mark + p.dropped_bytes
    assert p.dropped_bytes > 100_000
    dropped_tools = _tools_in(raw, mark, first)
    assert dropped_tools and all(f"[tool: {t}]" in p.digest for t in set(dropped_tools))
    lines = p.digest.splitlines()
    assert MARK_NOTE in lines and lines.index(MARK_NOTE) > 0  # older entries come first
    cov = coverage(p)
    assert cov["bytes"] == p.watermark_to - mark
    assert cov["window_bytes"] + cov["digest_bytes"] + cov["unseen_bytes"] == cov["bytes"]
    assert p.unseen_bytes == max(0, p.digest_from - mark) and p.digest_from < first


def test_a_digest_too_small_for_the_drop_says_what_was_not_seen(short_tmp):
    """With a digest cap far below the dropped span, the bytes it could not reach are counted
    as unseen, and `capture` prints the split."""
    from claude_autoharness.daemon.capture.packet import format_packet

    path = short_tmp / "t.jsonl"
    path.write_bytes(OLD.read_bytes())
    p = build_packet(path, 0, CaptureConfig(max_window_bytes=30_000, digest_max_bytes=600),
                     default_redactor())
    assert p.unseen_bytes > 0 and p.digest_from == p.unseen_bytes
    text = format_packet(p)
    line = next(x for x in text.splitlines() if x.startswith("seen: "))
    assert f"{p.unseen_bytes} not seen" in line and f"of {p.watermark_to} bytes" in line


def test_capture_shows_the_slim_records_and_how_much_was_seen(home, short_tmp):
    """`autoharnessctl capture --transcript` (no daemon) prints the bookkeeping left out by
    kind, how much of the span was seen, and a window whose records hold no bookkeeping."""
    from harness import ctl

    path = home["claude"] / "projects" / "t.jsonl"  # transcripts are read only there
    path.write_bytes((CLI / "markers.jsonl").read_bytes())
    r = ctl("capture", "--transcript", str(path))
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    left = next(x for x in out if x.startswith("bookkeeping left out: "))
    assert "api-request-shape=1" in left and "attachment/skill_listing=" in left
    assert "system/stop_hook_summary=" in left
    seen = next(x for x in out if x.startswith("seen: "))
    assert f"of {path.stat().st_size} bytes after the watermark" in seen
    window = r.stdout.split("--- window ---\n", 1)[1]
    for key in ('"uuid"', '"timestamp"', '"sessionId"', '"cwd"', '"usage"', '"toolUseResult"',
                '"requestId"', '"version"'):
        assert key not in window
    assert '"type":"assistant"' in window and '"name":"Bash"' in window
    env = dict(os.environ, AUTOHARNESS_CAPTURE_MAX_WINDOW_BYTES="1000")
    r = ctl("capture", "--transcript", str(path), "--json", env=env)
    packet = json.loads(r.stdout)
    assert packet["dropped_bytes"] > 0 and packet["digest_from"] <= packet["dropped_bytes"]


def test_status_counts_per_session_how_much_was_seen(short_tmp):
    """The capture counters keep, per session, the bytes its windows spanned and how they were
    seen; they survive a restart and `status` shows them as window/digest shares."""
    path = short_tmp / "t.jsonl"
    path.write_bytes(OLD.read_bytes())
    stats = st.Capture()
    small = build_packet(path, 0, CaptureConfig(max_window_bytes=40_000), default_redactor())
    whole = build_packet(path, small.watermark_to, CaptureConfig(), default_redactor())
    count_window(stats, small, "s1")
    count_window(stats, whole, "s1")
    seen = stats.seen["s1"]
    assert seen["windows"] == 2 and seen["bytes"] == path.stat().st_size
    assert seen["digest_bytes"] == small.dropped_bytes - small.unseen_bytes > 0
    again = msgspec.json.decode(msgspec.json.encode(stats), type=st.Capture)  # a snapshot's
    assert again.seen["s1"] == seen and capture_summary(again) == capture_summary(stats)
    assert capture_summary(stats)["bytes_digest_only"] == seen["digest_bytes"]
    share = seen_share(seen)
    sent = 100 * seen["window_bytes"] // seen["bytes"]
    assert share == f"{sent}%/{100 * seen['digest_bytes'] // seen['bytes']}%" and sent < 100
    assert seen_share({}) == "-"


def test_status_shows_how_much_of_a_session_its_window_saw(home, monkeypatch):
    """A real daemon reflects a real 774 KB session through a 40 KB window (the fake Anthropic
    server answering): `status --json` gives the session's bytes seen as records and as the
    digest, and the text status shows the shares."""
    from claude_autoharness.protocol import paths
    from fake_anthropic import FakeAnthropic, tool_reply
    from harness import Daemon, ctl, hook, wait_for

    project = home["tmp"] / "proj"
    project.mkdir()
    slug = home["claude"] / "projects" / paths.project_slug(str(project))
    slug.mkdir(parents=True)
    t = slug / "old.jsonl"
    t.write_bytes(OLD.read_bytes())
    with FakeAnthropic() as fake:
        fake.push(tool_reply({"proposals": []}))
        for k, v in {"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": fake.base_url,
                     "AUTOHARNESS_REFLECT_EVERY": "1",
                     "AUTOHARNESS_CAPTURE_MAX_WINDOW_BYTES": "40000"}.items():
            monkeypatch.setenv(k, v)
        d = Daemon(home["home"])
        try:
            base = {"session_id": "old", "transcript_path": str(t), "cwd": str(project)}
            hook(dict(base, hook_event_name="PreToolUse", tool_name="Bash"))
            hook(dict(base, hook_event_name="Stop"))
            wait_for(lambda: d.status()["jobs"]["done"] == 1, timeout=60, what="job")
            st = d.status()
            [s] = [x for x in st["sessions"] if x["session_id"] == "old"]
            seen = s["seen"]
            assert seen["windows"] == 1 and seen["bytes"] == t.stat().st_size
            assert seen["digest_bytes"] > 0 and seen["window_bytes"] < seen["bytes"]
            assert st["capture"]["bytes_digest_only"] == seen["digest_bytes"]
            text = ctl("status").stdout
            assert "SEEN WINDOW/DIGEST" in text and seen_share(seen) in text
        finally:
            d.stop()
