"""The edges of a real session, unit by unit: the turn's final answer Claude Code writes after
Stop, subagent calls in the transcript, a forked session's copied history.

The pure parts are checked directly on Claude Code 2.1.328's own records (tests/corpus/
claude-code); the state machine's side (subagent calls, the /learn call) is in
tests/test_sessions.py, the daemon-level checks are in tests/test_edges_daemon.py.
"""

import json
import os
import stat
import uuid as uuidlib
from pathlib import Path

from claude_autoharness.daemon.capture.final import (
    MAX_FINAL_CHARS,
    final_answer_text,
    final_answer_written,
    final_record,
    matches,
)
from claude_autoharness.daemon.capture.packet import build_packet, format_packet
from claude_autoharness.daemon.capture.records import WORK_TYPES
from claude_autoharness.daemon.capture.redact import default_redactor
from claude_autoharness.daemon.capture.sniff import record_uuid_from_tail
from claude_autoharness.daemon.capture.window import cut_window
from claude_autoharness.daemon.persist.dirs import write_private
from claude_autoharness.daemon.reflected import ReflectedRecords
from claude_autoharness.daemon.witness import tool_uses
from claude_autoharness.protocol.config import CaptureConfig
from conftest import CORPUS

CC = CORPUS / "claude-code"
RESUMED = CC / "transcripts" / "resumed.jsonl"
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def payload(line: int) -> dict:
    return json.loads((CC / "hook-payloads.jsonl").read_text().splitlines()[line - 1])


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def test_subagent_records_are_not_main_chain_calls_in_the_transcript():
    """The transcript witness and the hook agree: the real subagent transcript's calls (its
    own file under subagents/) and sidechain records are no main-chain calls; the main
    transcript's one call is the Agent call itself."""
    main = (CC / "transcripts" / "subagent.jsonl").read_bytes()
    calls = tool_uses(main, default_time=0.0)
    agent_ids = [b["id"] for line in main.splitlines() for b in
                 ((json.loads(line).get("message") or {}).get("content") or [])
                 if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") == "Agent"]
    assert [i for i, _ in calls] == agent_ids and len(agent_ids) == 1
    sidechain = json.dumps({"type": "assistant", "isSidechain": True, "message": {"content": [
        {"type": "tool_use", "id": "toolu_side", "name": "Bash", "input": {}}]}}).encode()
    assert tool_uses(sidechain + b"\n", default_time=0.0) == []


# ---- the turn's final answer ------------------------------------------------------------------

def _transcript(tmp: Path, data: bytes) -> Path:
    p = tmp / "t.jsonl"
    p.write_bytes(data)
    return p


def test_final_answer_found_only_once_its_record_is_written(short_tmp):
    """On the real stream-json transcript whose Stop payload is corpus line 5: before the
    final assistant record is appended the answer is not found (the scan stops at the turn's
    own records: `promptId`), once it is, it is; a half-written last line is not enough."""
    red = default_redactor()
    stop = payload(5)
    final = final_answer_text(stop["last_assistant_message"], red)
    lines = lines_of(RESUMED)
    i = next(n for n, ln in enumerate(lines) if b"Done: all three steps ran" in ln)
    before = _transcript(short_tmp, b"".join(lines[:i]))
    assert not final_answer_written(before, final, stop["prompt_id"], red)
    with open(before, "ab") as f:
        f.write(lines[i][:-40])  # Claude Code is still writing it
    assert not final_answer_written(before, final, stop["prompt_id"], red)
    with open(before, "ab") as f:
        f.write(lines[i][-40:] + b"".join(lines[i + 1:]))
    assert final_answer_written(before, final, stop["prompt_id"], red)
    assert final_answer_written(before, final, None, red)  # older payloads: text alone


def test_final_answer_of_an_earlier_turn_does_not_count(short_tmp):
    """The same words answered an earlier turn: they are not this turn's final answer (the
    backward scan stops at this turn's prompt record)."""
    red = default_redactor()
    text = "All done, the build is green."

    def rec(kind, **kw):
        return json.dumps({"type": kind, "uuid": str(uuidlib.uuid4()), **kw}).encode() + b"\n"
    data = (rec("user", promptId="p1", message={"role": "user", "content": "first"})
            + rec("assistant", message={"content": [{"type": "text", "text": text}]})
            + rec("user", promptId="p2", message={"role": "user", "content": "second"}))
    p = _transcript(short_tmp, data)
    assert not final_answer_written(p, final_answer_text(text, red), "p2", red)
    assert final_answer_written(p, final_answer_text(text, red), "p1", red)


def test_final_text_is_redacted_clipped_and_matches_its_own_record():
    """What a job keeps of a Stop's text is redacted (a token never reaches the journal) and
    clipped; it still matches the record it came from (matching compares redacted texts),
    the last of several text blocks, and a clipped long text."""
    red = default_redactor()
    raw = f"Pushed with {SECRET}. " + "x" * 20 + "\n\nDone and done, everything is in."
    kept = final_answer_text(raw, red)
    assert SECRET not in kept and "[REDACTED" in kept
    assert matches(red.redact(raw)[0], kept)
    assert matches("Done and done, everything is in, truly.", "Step. Done and done, everything is in, truly.")
    long = "word " * 10_000
    assert len(final_answer_text(long, red)) == MAX_FINAL_CHARS
    assert matches(long, final_answer_text(long, red))
    assert not matches("ok", "not ok at all")
    assert not matches("", "x")


def test_stand_in_record_ends_the_window_redacted(short_tmp):
    """When the transcript never gets the final answer, the packet ends with it as an
    assistant record (marked as coming from the Stop event), redacted, and says so."""
    red = default_redactor()
    lines = lines_of(RESUMED)
    p = _transcript(short_tmp, b"".join(lines[:38]))
    final = final_answer_text(payload(5)["last_assistant_message"] + f" token {SECRET}", red)
    packet = build_packet(p, 0, CaptureConfig(), red, final_text=final)
    last = packet.window.splitlines()[-1]
    rec = json.loads(last)
    assert rec["type"] == "assistant" and "Stop event" in rec["autoharness"]
    assert "<!-- learning\ntopic: run-tests-first" in rec["message"]["content"][0]["text"]
    assert SECRET not in packet.window and packet.final_from_stop
    assert "final answer: from the Stop event" in format_packet(packet)
    assert final_record("x").endswith(b"\n")


# ---- records already reflected ----------------------------------------------------------------

def _fork(parent: Path, dest: Path, new_sid: str, extra: list[bytes]) -> Path:
    """A fork's transcript as Claude Code writes it: the parent's records copied with a new
    `sessionId` (same `uuid`, same `timestamp`), then its own records."""
    out = []
    for ln in lines_of(parent):
        rec = json.loads(ln)
        if "sessionId" in rec:
            rec["sessionId"] = new_sid
        out.append(json.dumps(rec, separators=(",", ":")).encode() + b"\n")
    dest.write_bytes(b"".join(out + extra))
    return dest


def test_uuid_read_from_the_records_end():
    """The top-level `uuid` of Claude Code's records (written after the message), not a
    nested one and not `parentUuid`."""
    for ln in lines_of(RESUMED):
        rec = json.loads(ln)
        assert record_uuid_from_tail(ln) == rec.get("uuid")
    nested = b'{"type":"user","message":{"content":[{"uuid":"inner"}]},"parentUuid":"p"}\n'
    assert record_uuid_from_tail(nested) is None


def test_a_forks_copied_records_are_left_out(short_tmp):
    """Once the parent's window is reflected, the fork's window leaves every copied record out
    (counted, with a marker) and keeps only the fork's own; the uuids returned are the kept
    records'. Without the set, the copies are all there."""
    parent = RESUMED
    first = cut_window(parent, 0, record_types=WORK_TYPES, slim=True, reflected=())
    assert len(first.uuids) == first.kept_records > 10
    seen = set(first.uuids)
    own = json.dumps({"type": "user", "uuid": "fork-own-1", "sessionId": "fork",
                      "message": {"role": "user", "content": "FORKED PROMPT"}}).encode() + b"\n"
    fork = _fork(parent, short_tmp / "fork.jsonl", "fork", [own])
    win = cut_window(fork, 0, record_types=WORK_TYPES, slim=True, reflected=seen)
    assert win.uuids == ["fork-own-1"] and win.reflected_records == first.kept_records
    assert b"FORKED PROMPT" in win.data and b"SCENARIO=CAP" not in win.data
    assert b"already had" in win.data.splitlines()[0]
    plain = cut_window(fork, 0, record_types=WORK_TYPES, slim=True)
    assert b"SCENARIO=CAP" in plain.data and plain.reflected_records == 0


def test_reflected_records_are_durable_bounded_and_private(short_tmp):
    """The set survives a restart (load), keeps the newest `max_kept`, its file is 0600 and
    stays under twice the bound, and a torn last key (a crash mid-append) loses only itself."""
    path = str(short_tmp / "reflected.bin")
    r = ReflectedRecords(path, max_kept=100)
    assert r.add([f"u{i}" for i in range(60)]) == 60
    assert r.add(["u1", "u2"]) == 0
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    again = ReflectedRecords(path, max_kept=100)
    again.load()
    assert "u0" in again and "u59" in again and "v" not in again
    for k in range(10):
        again.add([f"w{k}-{i}" for i in range(30)])
    assert len(again) == 100 and "w9-29" in again and "u0" not in again
    assert os.path.getsize(path) <= 2 * 100 * 8
    with open(path, "ab") as f:
        f.write(b"\x01\x02\x03")  # torn
    torn = ReflectedRecords(path, max_kept=100)
    torn.load()
    assert "w9-29" in torn
    torn.add(["after-tear"])
    later = ReflectedRecords(path, max_kept=100)
    later.load()
    assert "after-tear" in later and "w9-29" in later
    assert os.path.getsize(path) % 8 == 0
    write_private(path, b"")  # an empty file is an empty set
    empty = ReflectedRecords(path)
    empty.load()
    assert len(empty) == 0
