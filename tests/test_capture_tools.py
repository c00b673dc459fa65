"""A window record's tool inputs and results are bounded tighter than its text: they keep their
beginning and end around a marker saying how much was cut, text is cut last (never more than
under the record's bound alone), a failed tool's result and a call whose input is the agent's
own words keep the record's bound, a role that repeats the type is not sent, and markers are
still the marker rule's, taken before any clip. Over real transcripts too."""

import json
import re

import pytest

from claude_autoharness.daemon.capture import records as rmod
from claude_autoharness.daemon.capture.packet import build_packet
from claude_autoharness.daemon.capture.redact import default_redactor
from claude_autoharness.daemon.capture.window import cut_window
from claude_autoharness.protocol.config import CaptureConfig
from conftest import REAL

HUGE = 10**9
CLIPPED = re.compile(r"\n\[autoharness: ([\d,]+) bytes clipped\]\n")
MARKER = ("<!-- learning\ntopic: migrate-first\nkind: convention\ndoc-impact: none\n"
          "body: Run make migrate before the integration tests.\n-->")


def _records(window: bytes) -> list[dict]:
    return [json.loads(x) for x in window.splitlines() if not x.startswith(b"[autoharness:")]


def _write(path, *records) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _kept_whole_ends(clipped: str, original: str) -> None:
    """`clipped` is `original` with one middle cut out, marked with the bytes it held."""
    m = CLIPPED.search(clipped)
    assert m, clipped[:200]
    head, tail = clipped[: m.start()], clipped[m.end():]
    assert original.startswith(head) and original.endswith(tail) and head and tail
    assert int(m.group(1).replace(",", "")) == len(original.encode()) - len(
        (head + tail).encode())


def _cut(path, **bounds):
    return cut_window(path, 0, max_window_bytes=HUGE, record_types=rmod.WORK_TYPES, slim=True,
                      **bounds)


def test_tool_input_and_result_keep_beginning_and_end_within_their_own_bound(short_tmp):
    """A Write's content and a Bash output, each far under the record's bound but over the
    tool bound, keep their beginning and end around a marker naming the bytes cut; the text
    beside the tool call in the same record (1.0.x writes both in one) is whole."""
    text = "I will write the config now. " * 40  # 1,160 bytes: over the tool bound
    body = "FIRST = 1\n" + "setting = value\n" * 150 + "LAST = 2\n"
    output = "collected 40 items\n" + "test_x.py::test_ok PASSED\n" * 100 + "1 failed, 39 passed"
    call = {"type": "assistant", "uuid": "a1", "message": {"role": "assistant", "content": [
        {"type": "text", "text": text},
        {"type": "tool_use", "id": "t1", "name": "Write",
         "input": {"file_path": "conf.ini", "content": body}}]}}
    result = {"type": "user", "uuid": "u1", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": output}]}}
    path = short_tmp / "t.jsonl"
    _write(path, call, result)
    w = _cut(path, max_record_bytes=4_000, max_tool_bytes=1_000)
    sent_call, sent_result = _records(w.data)
    said, tool = sent_call["message"]["content"]
    assert said == {"type": "text", "text": text}  # whole
    assert tool["name"] == "Write" and tool["input"]["file_path"] == "conf.ini"
    _kept_whole_ends(tool["input"]["content"], body)
    assert len(json.dumps(tool, separators=(",", ":"))) <= 1_000
    block = sent_result["message"]["content"][0]
    assert block["type"] == "tool_result"
    _kept_whole_ends(block["content"], output)
    assert w.clipped_records == 2
    # without a bound of their own (the record's), both records fit whole
    whole = _records(_cut(path, max_record_bytes=4_000).data)
    assert whole[0]["message"]["content"][1]["input"]["content"] == body
    assert whole[1]["message"]["content"][0]["content"] == output


def test_a_failed_tools_result_keeps_the_records_bound(short_tmp):
    """An error result is where a lesson most often starts: it is bounded like the record,
    while a result that did not fail is clipped to the tool bound."""
    trace = "Traceback (most recent call last):\n" + "  File \"app.py\", line 1\n" * 80
    failed = {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": trace, "is_error": True}]}}
    passed = {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t2", "content": trace}]}}
    path = short_tmp / "t.jsonl"
    _write(path, failed, passed)
    got_failed, got_passed = _records(_cut(path, max_record_bytes=4_000,
                                           max_tool_bytes=1_000).data)
    assert got_failed["message"]["content"][0] == {"type": "tool_result", "content": trace,
                                                  "is_error": True}
    _kept_whole_ends(got_passed["message"]["content"][0]["content"], trace)


def test_the_agents_words_in_a_tool_call_keep_the_records_bound(short_tmp):
    """A plan (`ExitPlanMode`), questions for the user and a subagent's brief are the agent's
    words: bounded like text, while a Write's content of the same length is clipped. The docs
    name those tools."""
    from conftest import REPO

    plan = "## Plan\n" + "1. Migrate the schema, then run the integration tests.\n" * 40
    calls = [{"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": f"t{i}", "name": name, "input": {key: plan}}]}}
        for i, (name, key) in enumerate([("ExitPlanMode", "plan"), ("Task", "prompt"),
                                         ("Write", "content")])]
    path = short_tmp / "t.jsonl"
    _write(path, *calls)
    got = [r["message"]["content"][0]["input"] for r in _records(
        _cut(path, max_record_bytes=4_000, max_tool_bytes=1_000).data)]
    assert got[0] == {"plan": plan} and got[1] == {"prompt": plan}
    _kept_whole_ends(got[2]["content"], plan)
    privacy = (REPO / "docs" / "privacy.md").read_text()
    assert all(f"`{name}`" in privacy for name in rmod.WORD_TOOLS)


def test_markers_are_the_rules_and_the_answer_is_not_cut_for_the_tool(short_tmp):
    """A long answer with its marker at the end, beside a long Write whose content quotes a
    marker, in one record over its bound: the clip takes the Write's middle (the quoted marker
    with it), the answer and its marker stay whole, and the packet's markers are the rule's."""
    quoted = MARKER.replace("migrate-first", "quoted-in-a-file")
    answer = "Here is what I found. " * 100 + MARKER
    record = {"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "text", "text": answer},
        {"type": "tool_use", "id": "t1", "name": "Write", "input": {
            "file_path": "NOTES.md", "content": "# Notes\n" + "line\n" * 200 + quoted
            + "\nend line\n" * 300}}]}}
    path = short_tmp / "t.jsonl"
    _write(path, record)
    p = build_packet(path, 0, CaptureConfig(max_record_bytes=4_000), default_redactor())
    (sent,) = _records(p.window.encode())
    assert p.markers == [MARKER] and sent["message"]["content"][0]["text"] == answer
    assert "quoted-in-a-file" not in p.window and p.clipped_records == 1


def test_a_role_that_is_the_records_type_is_not_sent_twice(short_tmp):
    """`message.role` is left out where it repeats the record's type, kept where it differs."""
    path = short_tmp / "t.jsonl"
    _write(path, {"type": "user", "message": {"role": "user", "content": "hi"}},
           {"type": "assistant", "message": {"role": "user", "content": "odd"}})
    same, other = _records(_cut(path).data)
    assert same == {"type": "user", "message": {"content": "hi"}}
    assert other["message"] == {"role": "user", "content": "odd"}


def _texts(record: dict) -> list[str]:
    """The text and thinking of a record, and a user's string prompt (never a tool's part)."""
    content = (record.get("message") or {}).get("content")
    if isinstance(content, str):
        return [content]
    return [b.get("text") or b.get("thinking") or "" for b in content or []
            if isinstance(b, dict) and b.get("type") in ("text", "thinking")]


@pytest.mark.parametrize("name", [
    "spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
    "claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
    "spotter/4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-a2898e3.jsonl",
    "spotter/tool_heavy.jsonl"], ids=lambda n: n.split("/")[-1][:24])
def test_real_records_keep_their_text_and_clip_tools_visibly(short_tmp, name):
    """On real transcripts, every record sent with the default bounds holds its text and
    thinking at least as long as under the record's bound alone, fits the record's bound,
    and each tool string it cut keeps its beginning and end around a marker; some tool blocks
    are cut further than under the record's bound alone."""
    path = short_tmp / "t.jsonl"
    path.write_bytes((REAL / name).read_bytes())
    cfg = CaptureConfig()
    lines = _cut(path, max_record_bytes=cfg.max_record_bytes,
                 max_tool_bytes=cfg.max_tool_bytes).data.splitlines(keepends=True)
    lines = [x for x in lines if not x.startswith(b"[autoharness:")]
    tight = _records(b"".join(lines))
    loose = _records(_cut(path, max_record_bytes=cfg.max_record_bytes).data)
    full = _records(_cut(path, max_record_bytes=HUGE, max_summary_bytes=HUGE).data)
    assert len(tight) == len(loose) == len(full) == len(lines)
    cut = tighter = 0
    for line, t, lo, orig in zip(lines, tight, loose, full, strict=True):
        assert len(line) <= (cfg.max_summary_bytes if t.get("isCompactSummary")
                             else cfg.max_record_bytes)
        kept, before = _texts(t), _texts(lo)
        assert len(kept) == len(before) and all(map(_at_least, kept, before))
        for got, was, loose_got in zip(rmod.tool_blocks(t), rmod.tool_blocks(orig),
                                       rmod.tool_blocks(lo), strict=True):
            cut += _ends_of_strings(got, was)
            tighter += len(json.dumps(got)) < len(json.dumps(loose_got))
    assert cut > 0 and tighter > 0


def _at_least(kept: str, before: str) -> bool:
    return len(kept) >= len(before)


def _ends_of_strings(got, was) -> int:
    """How many strings of a tool block were cut, each `was` around one marked cut."""
    if isinstance(got, str):
        if got == was:
            return 0
        _kept_whole_ends(got, was)
        return 1
    if isinstance(got, dict):
        assert got.keys() == was.keys()
        return sum(_ends_of_strings(got[k], was[k]) for k in got)
    if isinstance(got, list):
        return sum(_ends_of_strings(a, b) for a, b in zip(got, was, strict=True))
    assert got == was
    return 0
