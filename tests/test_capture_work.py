"""The window carries the work, not the bookkeeping: slim records, clipped in the middle, the
past a compaction summarised left out, markers by the rule. Over real transcripts."""

import json
import sys

import pytest

from claude_autoharness.daemon.capture import records as rmod
from claude_autoharness.daemon.capture.packet import build_packet
from claude_autoharness.daemon.capture.redact import default_redactor
from claude_autoharness.daemon.capture.window import cut_window
from claude_autoharness.protocol.config import CaptureConfig
from conftest import CORPUS, REAL, REPO, copy_corpus

sys.path.insert(0, str(REPO / "bench"))
from conversation import conversation_bytes  # noqa: E402 (after the path insert)

HUGE = 10**9
BIG = "spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
CLI = CORPUS / "claude-code" / "transcripts"
FILES = [REAL / BIG, REAL / "claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
         REAL / "fasthooks/sample_main_transcript.jsonl", REAL / "spotter/tool_heavy.jsonl",
         REAL / "spotter/4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-a2898e3.jsonl",
         REAL / "claude-code-viewer/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",  # 1.0.108
         REAL / "fasthooks/sample_agent_sidechain.jsonl",  # 2.0.76 top-level agent file
         CLI / "resumed.jsonl", CLI / "subagent/subagents/agent-a710afd67bddaddef.jsonl",
         CLI / "queued-compact.jsonl"]
# bookkeeping keys no record sent may hold, at any depth
BOOKKEEPING = {"uuid", "parentUuid", "logicalParentUuid", "leafUuid", "sessionId", "timestamp",
               "version", "cwd", "gitBranch", "slug", "userType", "requestId", "usage", "model",
               "id", "tool_use_id", "signature", "toolUseResult", "originalFile", "promptId",
               "sourceToolAssistantUUID", "thinkingMetadata", "stop_reason", "data"}


def _keys(value, out: set) -> set:
    if isinstance(value, dict):
        out.update(value)
        for v in value.values():
            _keys(v, out)
    elif isinstance(value, list):
        for v in value:
            _keys(v, out)
    return out


def _records(window: bytes) -> list[dict]:
    return [json.loads(x) for x in window.splitlines() if not x.startswith(b"[autoharness:")]


def _wide(path):
    return cut_window(path, 0, max_record_bytes=HUGE, max_window_bytes=HUGE,
                      max_summary_bytes=HUGE, record_types=rmod.WORK_TYPES, slim=True)


@pytest.mark.parametrize("src", FILES, ids=lambda p: p.name[:24])
def test_records_keep_the_work_and_leave_out_the_bookkeeping(short_tmp, src):
    """Unbounded, the window is every record that carries work, in order, each with all of its
    conversation and action (text, thinking, tool names and inputs, tool results, summaries)
    and none of the bookkeeping keys; the records left out are counted by kind."""
    path = short_tmp / "t.jsonl"
    path.write_bytes(src.read_bytes())
    raw = [json.loads(x) for x in src.read_bytes().splitlines()]
    w = _wide(path)
    sent = _records(w.data)
    work = [r for r in raw if rmod.work_kind(r) is None]
    if w.summarised_bytes:  # before the compaction: only the records it kept verbatim
        boundary = max(i for i, r in enumerate(raw) if rmod.is_compact_boundary(r))
        kept = raw[boundary].get("compactMetadata", {}).get("preservedMessages", {})
        verbatim = set(kept.get("allUuids", []))
        work = [r for i, r in enumerate(raw) if rmod.work_kind(r) is None
                and (i >= boundary or r.get("uuid") in verbatim)]
    assert [r["type"] for r in sent] == [r["type"] for r in work]
    for got, orig in zip(sent, work, strict=True):
        assert conversation_bytes(got) == conversation_bytes(orig)
        assert not _keys(got, set()) & BOOKKEEPING, got
    if not w.summarised_bytes:
        assert w.bookkeeping_records == sum(1 for r in raw if rmod.work_kind(r) is not None)


def test_system_records_are_kept_only_for_subtypes_that_carry_work(short_tmp):
    """`compact_boundary` and `local_command` are sent; `stop_hook_summary`, `turn_duration`
    and 1.0.x hook-status lines without a subtype are counted as bookkeeping."""
    lines = [
        {"type": "system", "subtype": "local_command", "content": "<command-name>/model"},
        {"type": "system", "subtype": "stop_hook_summary", "hookInfos": [{"command": "x"}]},
        {"type": "system", "subtype": "turn_duration", "durationMs": 1200},
        {"type": "system", "content": "Running PostToolUse:Edit...", "level": "info"},
        {"type": "system", "subtype": "away_summary", "content": "while you were away"},
        {"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted",
         "compactMetadata": {"trigger": "manual", "preTokens": 100}},
    ]
    path = short_tmp / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    w = _wide(path)
    assert [r.get("subtype") for r in _records(w.data)] == ["local_command", "compact_boundary"]
    assert w.bookkeeping_types == {"system/stop_hook_summary": 1, "system/turn_duration": 1,
                                   "system/(none)": 1, "system/away_summary": 1}


def test_a_long_record_keeps_its_contents_beginning_and_end(short_tmp):
    """An over-long record stays valid JSON and keeps the beginning and end of its long
    strings around a visible marker; its short strings (the tool's name, the type) are whole;
    a 2.x assistant record is never reduced to its thinking signature."""
    out = "FIRSTLINE\n" + "build output line\n" * 3000 + "LASTLINE: 3 failures"
    result = {"type": "user", "uuid": "u1", "toolUseResult": {"stdout": out},
              "message": {"role": "user", "content": [
                  {"type": "tool_result", "tool_use_id": "t1", "content": out}]}}
    thinking = {"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "THINK-START " + "hmm " * 2000 + " THINK-END",
         "signature": "EqQBCkYI" + "A" * 9000}]}}
    path = short_tmp / "t.jsonl"
    path.write_text(json.dumps(result) + "\n" + json.dumps(thinking) + "\n")
    w = cut_window(path, 0, max_record_bytes=2_000, record_types=rmod.WORK_TYPES, slim=True)
    lines = w.data.splitlines(keepends=True)
    assert w.clipped_records == 2 and all(len(x) <= 2_000 for x in lines)
    res, think = (json.loads(x) for x in lines)
    text = res["message"]["content"][0]["content"]
    assert text.startswith("FIRSTLINE") and text.endswith("LASTLINE: 3 failures")
    assert "bytes clipped]" in text and res["message"]["content"][0]["type"] == "tool_result"
    block = think["message"]["content"][0]
    assert block["thinking"].startswith("THINK-START") and block["thinking"].endswith("THINK-END")
    assert "signature" not in block


def test_a_compaction_summary_is_whole_and_what_it_summarised_is_not_sent(short_tmp):
    """On a real session that auto-compacted (2.1.38), a window from the start holds the
    boundary and the whole 16 KB summary, and none of the 2 MB of records the summary replaced;
    it says how many bytes the summary covers. Without its own bound the summary is clipped."""
    path = copy_corpus(BIG, short_tmp)
    raw = path.read_bytes()
    p = build_packet(path, 0, CaptureConfig(), default_redactor())
    recs = _records(p.window.encode())
    summary = next(r for r in recs if r.get("isCompactSummary"))
    orig = next(json.loads(x) for x in raw.splitlines() if b'"isCompactSummary":true' in x)
    assert summary["message"]["content"] == orig["message"]["content"]  # whole
    assert recs[0]["subtype"] == "compact_boundary"
    boundary = raw.index(b'"subtype":"compact_boundary"')
    boundary = raw.rindex(b"\n", 0, boundary) + 1
    assert p.summarised_bytes == boundary and p.dropped_bytes == 0
    assert "before the compaction in this window (its summary covers them)" in p.window
    after = [json.loads(x) for x in raw[boundary:].splitlines()]
    assert p.kept_records == sum(1 for r in after if rmod.work_kind(r) is None)
    small = build_packet(path, 0, CaptureConfig(max_summary_bytes=4_000), default_redactor())
    clipped = next(r for r in _records(small.window.encode()) if r.get("isCompactSummary"))
    assert "bytes clipped]" in json.dumps(clipped)


def test_markers_are_taken_by_the_rule_before_the_clip(short_tmp):
    """The packet's markers are the assistant text's, whole, even when the clip takes them
    out of the record (a marker in the middle of a long answer); a marker quoted in a tool
    result or a user prompt is not one."""
    marker = ("<!-- learning\ntopic: run-tests-first\nkind: convention\ndoc-impact: none\n"
              "body: Run the test suite before committing.\n-->")
    quoted = marker.replace("run-tests-first", "quoted-in-a-file")
    answer = {"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "text", "text": "Done." + " Details." * 400 + marker + " More." * 400}]}}
    tool = {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": "notes.txt:\n" + quoted}]}}
    prompt = {"type": "user", "message": {"role": "user", "content": "echo " + quoted}}
    path = short_tmp / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in (prompt, tool, answer)))
    p = build_packet(path, 0, CaptureConfig(max_record_bytes=2_000), default_redactor())
    assert p.markers == [marker]
    assert p.clipped_records == 1 and "run-tests-first" not in p.window  # clipped out of the text


def test_real_cli_markers_skip_the_one_quoted_in_a_tool_result(short_tmp):
    """The real CLI's transcript: the marker in the assistant's text is the packet's only one;
    the one its Read of notes.txt returned is not."""
    path = short_tmp / "t.jsonl"
    path.write_bytes((CLI / "markers.jsonl").read_bytes())
    p = build_packet(path, 0, CaptureConfig(), default_redactor())
    assert "quoted" in p.window or "discovery" in p.window  # the quoted one is in the window
    assert len(p.markers) == 1 and "kind: discovery" not in p.markers[0]


QUEUED = CLI / "queued-compact.jsonl"  # 2.1.328: two prompts queued mid-tool, then /compact


def _before_compaction(tmp) -> bytes:
    lines = QUEUED.read_bytes().splitlines(keepends=True)
    cut = next(i for i, x in enumerate(lines) if b'"subtype":"compact_boundary"' in x)
    path = tmp / "t.jsonl"
    path.write_bytes(b"".join(lines[:cut]))
    return path


def test_prompts_queued_while_the_agent_worked_are_user_text(short_tmp):
    """The real CLI records prompts typed while a tool ran as `attachment`/`queued_command`:
    the window keeps them (an image's data left out) and the digest counts them as user text;
    the other attachments stay out."""
    from claude_autoharness.daemon.capture.digest import build_digest

    path = _before_compaction(short_tmp)
    p = build_packet(path, 0, CaptureConfig(), default_redactor())
    queued = [r["attachment"] for r in _records(p.window.encode()) if r["type"] == "attachment"]
    assert queued[0] == {"type": "queued_command",
                         "prompt": "QUEUED-PROMPT and also print the date when done"}
    assert queued[1] == {"type": "queued_command", "prompt": [
        {"type": "text", "text": "QUEUED-IMAGE what is in this image?"}, {"type": "image"}]}
    assert len(queued) == 2 and "iVBOR" not in p.window
    assert p.bookkeeping_types["attachment/skill_listing"] == 1
    digest = build_digest(path, path.stat().st_size).text.splitlines()
    assert "user: QUEUED-PROMPT and also print the date when done" in digest
    assert "user: QUEUED-IMAGE what is in this image? [image]" in digest


def test_a_compaction_sends_the_records_it_kept_verbatim(short_tmp):
    """2.1.328 keeps the newest messages verbatim after its summary (`preservedMessages`):
    those records, before the boundary in the file, are still sent; the ones the summary
    stands for are not."""
    path = short_tmp / "t.jsonl"
    path.write_bytes(QUEUED.read_bytes())
    p = build_packet(path, 0, CaptureConfig(), default_redactor())
    recs = _records(p.window.encode())
    assert recs[0]["message"]["content"][0]["text"] == "The build passed."  # preserved
    assert recs[1]["subtype"] == "compact_boundary" and recs[2].get("isCompactSummary")
    assert "SCENARIO=QUEUE" not in p.window and "QUEUED-PROMPT" not in p.window
    assert "SCENARIO=AFTER" in p.window and p.summarised_bytes > 100_000
    assert p.dropped_bytes == 0


def test_the_docs_list_what_a_record_keeps():
    """docs/privacy.md names exactly the keys the code keeps, the `system` subtypes that are
    work, and the bookkeeping keys this file checks no record sent holds."""
    import re

    from conftest import REPO

    text = (REPO / "docs" / "privacy.md").read_text()
    section = text.split("### What a window record keeps", 1)[1].split("`capture` does not", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 2 and cells[1].startswith("`"):
            rows[cells[0]] = set(re.findall(r"`([A-Za-z_]+)`", cells[1]))
    assert rows["record"] == set(rmod.RECORD_KEYS) | set(rmod.FLAG_KEYS)
    assert rows["`message`"] == set(rmod.MESSAGE_KEYS)
    assert rows["content block (nested `tool_result` content too)"] == set(rmod.BLOCK_KEYS)
    assert rows["`attachment`"] == set(rmod.ATTACHMENT_KEYS)
    named = set(re.findall(r"`([A-Za-z_.]+)`", section))
    assert set(rmod.WORK_SUBTYPES) | set(rmod.WORK_ATTACHMENTS) <= named
    assert BOOKKEEPING - {"id", "data", "usage", "model", "stop_reason", "signature"} <= named


def test_a_record_too_long_to_decode_keeps_its_raw_beginning_and_end(short_tmp):
    """A record past the decode bound (a 6 MiB tool output) is not read whole: it is sent as
    its raw beginning and end around a marker, bounded like any record."""
    from claude_autoharness.daemon.capture.window import MAX_DECODE_BYTES

    path = short_tmp / "t.jsonl"
    body = "START " + "x" * (MAX_DECODE_BYTES + 2 * 1024 * 1024) + " THE-END"
    huge = json.dumps({"type": "user", "message": {"role": "user", "content": body}})
    path.write_text('{"type":"user","message":{"content":"before"}}\n' + huge + "\n")
    w = cut_window(path, 0, record_types=rmod.WORK_TYPES, slim=True)
    first, second = w.data.splitlines(keepends=True)
    assert json.loads(first) == {"type": "user", "message": {"content": "before"}}
    assert len(second) <= 4_000 and w.clipped_records == 1
    assert second.startswith(b'{"type": "user"') and second.endswith(b'THE-END"}}\n')
    assert b"[autoharness: record clipped," in second
    assert w.scanned_bytes < len(huge) + 2 * 1024 * 1024  # read once, not twice


def test_a_marker_clipped_out_of_the_window_is_still_evidence(short_tmp):
    """What a proposal may quote (kept as the job's window) holds the window's markers whole,
    so a lesson the agent flagged in the middle of a long answer is grounded."""
    from claude_autoharness.daemon.reflect.pipeline import evidence_of

    marker = ("<!-- learning\ntopic: reset-the-db\nkind: convention\ndoc-impact: none\n"
              "body: Reset the test database with make db-reset.\n-->")
    answer = {"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "text", "text": "Done." + " Details." * 400 + marker + " More." * 400}]}}
    path = short_tmp / "t.jsonl"
    path.write_text(json.dumps(answer) + "\n")
    p = build_packet(path, 0, CaptureConfig(max_record_bytes=2_000), default_redactor())
    assert "make db-reset" not in p.window
    assert "Reset the test database with make db-reset." in evidence_of(p)
    assert evidence_of(None) == ""
