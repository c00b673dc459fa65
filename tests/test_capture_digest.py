"""The digest (capture/digest.py): what it keeps, what it never shows, and its bounds."""

import json
import os

from claude_autoharness.daemon.capture.digest import build_digest
from claude_autoharness.daemon.capture.redact import default_redactor
from conftest import REAL, copy_corpus

BIG = "spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
OLD = "claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"


def _rec(kind: str, content, **extra) -> bytes:
    role = "user" if kind == "user" else "assistant"
    rec = {"type": kind, "isSidechain": False, "message": {"role": role, "content": content}}
    rec.update(extra)
    return json.dumps(rec).encode() + b"\n"


def _tool_strings(path) -> set[str]:
    """Distinctive strings from tool inputs and tool results of a transcript."""
    found = set()

    def walk(v):
        if isinstance(v, str):
            if len(v) >= 30:
                found.add(v[:60])
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for line in open(path, "rb"):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        message = rec.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            for block in content:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use":
                    walk(block.get("input"))
                elif block.get("type") == "tool_result":
                    walk(block.get("content"))
        walk(rec.get("toolUseResult"))
    return found


def test_tool_inputs_and_outputs_never_appear(short_tmp):
    """Tool uses show as `[tool: Name]`; their inputs, their results and `toolUseResult`
    payloads never reach the digest, while the people's words do."""
    path = short_tmp / "t.jsonl"
    path.write_bytes(
        _rec("user", "please fix the parser")
        + _rec("assistant", [{"type": "text", "text": "Looking at it."},
                             {"type": "tool_use", "id": "t1", "name": "Bash",
                              "input": {"command": "cat SENTINEL_INPUT"}}])
        + _rec("user", [{"type": "tool_result", "tool_use_id": "t1",
                         "content": "SENTINEL_OUTPUT"}], toolUseResult={"stdout": "SENTINEL_TUR"})
        + _rec("assistant", [{"type": "thinking", "thinking": "SENTINEL_THINKING"}])
        + _rec("assistant", [{"type": "text", "text": "Fixed."}]))
    d = build_digest(path, path.stat().st_size)
    assert d.text.splitlines() == [
        "user: please fix the parser",
        "assistant: Looking at it. [tool: Bash]",
        "assistant: Fixed.",
    ]
    assert "SENTINEL" not in d.text
    assert d.exchanges == 1


def test_real_transcripts_leak_no_tool_payloads():
    """On every real transcript, no tool input or tool result string shows up in the digest."""
    for path in sorted(REAL.rglob("*.jsonl")):
        d = build_digest(path, path.stat().st_size, exchanges=1000, max_bytes=10**7)
        for s in _tool_strings(path):
            assert s not in d.text, (path.name, s)


def test_bounds_hold_on_the_3mb_transcript(short_tmp):
    """On the 3 MB real transcript: at most `exchanges` prompts, `max_bytes` of text,
    `max_chars` per entry, and never more than `max_scan_bytes` read."""
    path = copy_corpus(BIG, short_tmp)
    size = path.stat().st_size
    d = build_digest(path, size)
    assert 0 < len(d.text.encode()) <= 20_000 and d.exchanges <= 20
    assert d.scanned_bytes <= 4 * 1024 * 1024
    for line in d.text.splitlines():
        role, _, text = line.partition(": ")
        assert role in ("user", "assistant") or line == "[context compacted]"
        assert len(text) <= 200 or text.startswith("[tool:")
    small = build_digest(path, size, exchanges=3, max_chars=50, max_bytes=1_000,
                         max_scan_bytes=256 * 1024)
    assert small.scanned_bytes <= 256 * 1024
    assert len(small.text.encode()) <= 1_000 and small.exchanges <= 3
    assert all(len(line) <= len("assistant: ") + 50 or "[tool:" in line
               for line in small.text.splitlines())


def test_garbage_non_utf8_and_over_long_lines_are_skipped(short_tmp):
    """Garbage lines, truncated JSON, non-UTF-8 bytes and an over-long line are skipped (and
    counted); the records around them still make it."""
    path = short_tmp / "t.jsonl"
    path.write_bytes(
        _rec("user", "first prompt")
        + b"this is not json\n"
        + b'{"type":"user","message":{"content":"broken\n'
        + b'{"type":"user","message":{"role":"user","content":"bad \xff\xfe bytes"}}\n'
        + _rec("user", "x" * 300_000)
        + b"\n"
        + _rec("assistant", [{"type": "text", "text": "second answer"}]))
    d = build_digest(path, path.stat().st_size, max_line_bytes=100_000)
    assert d.text.splitlines() == ["user: first prompt", "assistant: second answer"]
    assert d.skipped_lines == 4


def test_sidechains_summaries_and_meta_are_left_out():
    """Old-format transcripts: the `summary` line, inline sidechain (subagent) records and meta
    messages are not in the digest; the main conversation is, in chronological order."""
    path = REAL / OLD
    d = build_digest(path, path.stat().st_size, exchanges=100, max_bytes=10**6)
    side, main = set(), []
    for line in open(path, "rb"):
        rec = json.loads(line)
        content = (rec.get("message") or {}).get("content")
        if rec.get("type") != "assistant" or not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "text" and len(block["text"].strip()) > 20:
                text = " ".join(block["text"].split())[:60]
                (side.add(text) if rec.get("isSidechain") else main.append(text))
    assert side and main
    assert not [t for t in side if t in d.text and t not in main]
    positions = [d.text.find(t) for t in main]
    assert all(p >= 0 for p in positions) and positions == sorted(positions)
    assert "Empty Repo Setup" not in d.text  # the summary line


def test_new_format_compaction_and_subagent_files():
    """New-format transcripts: a compact boundary shows as a note, the compaction summary is
    not repeated, and a subagent transcript (all sidechain) gives an empty digest."""
    path = REAL / BIG
    d = build_digest(path, path.stat().st_size, exchanges=1000, max_bytes=10**7,
                     max_scan_bytes=10**8)
    assert "[context compacted]" in d.text.splitlines()
    assert "This session is being continued" not in d.text
    sub = REAL / "spotter/4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-a2898e3.jsonl"
    assert build_digest(sub, sub.stat().st_size).text == ""


def test_digest_stops_at_before_and_ignores_a_partial_line(short_tmp):
    """Only records that end before `before` are used: a record cut by `before` (it belongs to
    the window) is not in the digest."""
    path = short_tmp / "t.jsonl"
    a, b = _rec("user", "early prompt"), _rec("user", "late prompt")
    path.write_bytes(a + b)
    assert build_digest(path, len(a) + 10).text == "user: early prompt"
    assert build_digest(path, len(a)).text == "user: early prompt"
    assert build_digest(path, 0).text == ""
    assert build_digest(path, 10**9).text == "user: early prompt\nuser: late prompt"


def test_digest_entries_are_redacted_before_clipping(short_tmp):
    """With a redactor, each entry is redacted before it is clipped, so a secret straddling the
    clip point is still removed, and the counts are reported."""
    token = "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"
    path = short_tmp / "t.jsonl"
    path.write_bytes(_rec("user", "a" * 30 + " " + token + " and more words"))
    d = build_digest(path, os.path.getsize(path), max_chars=40, redactor=default_redactor())
    assert "ghp_" not in d.text and d.redactions == {"github_token": 1}
