"""A file that is not a Claude Code transcript is refused, naming what it looks like; one that
holds nothing but a title says so. Every real transcript of the corpus is let through."""

import json

import pytest

from claude_autoharness.daemon.capture.kind import HEAD_BYTES, transcript_problem
from claude_autoharness.daemon.capture.packet import build_packet
from claude_autoharness.daemon.capture.redact import default_redactor
from claude_autoharness.daemon.capture.source import TranscriptRefused
from claude_autoharness.protocol.config import CaptureConfig
from conftest import CORPUS, REAL

# The envelope a Codex CLI rollout writes (`~/.codex/sessions/.../rollout-*.jsonl`): a
# `session_meta` line, then `response_item` / `event_msg` lines, each `{timestamp, type, payload}`.
CODEX = [
    {"timestamp": "2026-11-30T10:00:00.000Z", "type": "session_meta",
     "payload": {"id": "0197-aa", "cwd": "/home/user/proj", "cli_version": "0.65.0"}},
    {"timestamp": "2026-11-30T10:00:01.000Z", "type": "response_item",
     "payload": {"type": "message", "role": "user",
                 "content": [{"type": "input_text", "text": "fix the build"}]}},
    {"timestamp": "2026-11-30T10:00:02.000Z", "type": "event_msg",
     "payload": {"type": "token_count", "info": None}},
]
CHAT = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]


def _write(tmp, name: str, lines) -> str:
    path = tmp / name
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) if isinstance(lines, list)
                    else lines)
    return path


def _refusal(path) -> str:
    with pytest.raises(TranscriptRefused) as e:
        build_packet(path, 0, CaptureConfig(), default_redactor())
    return e.value.reason


def test_other_files_are_refused_naming_what_they_look_like(short_tmp):
    """A Codex rollout, a hook's log (a real one), another tool's chat export, a Markdown
    history and a JSON document are each refused with what they look like."""
    assert "a Codex CLI rollout" in _refusal(_write(short_tmp, "rollout.jsonl", CODEX))
    hooks = (REAL / "fasthooks/sample_hook_logs.jsonl").read_text()
    assert "hook payloads" in _refusal(_write(short_tmp, "hooks.jsonl", hooks))
    assert "chat messages" in _refusal(_write(short_tmp, "chat.jsonl", CHAT))
    md = "# aider chat started at 2026-11-30\n\n#### fix the build\n"
    assert "Markdown" in _refusal(_write(short_tmp, "history.jsonl", md))
    doc = json.dumps({"messages": CHAT}, indent=2)
    assert "JSON document" in _refusal(_write(short_tmp, "doc.jsonl", doc))


def test_a_transcript_with_only_a_title_says_so(short_tmp):
    """A file holding only the 1.0.x `summary` title line of a real session is refused: it has
    no conversation; the same line at the head of a session is fine."""
    first = (REAL / "claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
             ).read_text().splitlines(keepends=True)
    assert json.loads(first[0])["type"] == "summary"
    reason = _refusal(_write(short_tmp, "title.jsonl", first[0]))
    assert "only a title" in reason
    build_packet(_write(short_tmp, "t.jsonl", "".join(first[:5])), 0, CaptureConfig(),
                 default_redactor())


def test_every_real_transcript_is_let_through():
    """No false refusal on the corpus: every transcript the real CLI or public projects wrote
    passes, the empty file too; the hook logs and payload files do not."""
    for p in sorted(CORPUS.rglob("*.jsonl")):
        data = p.read_bytes()
        problem = transcript_problem(data[:HEAD_BYTES], whole=len(data) <= HEAD_BYTES)
        if "hook" in p.name or "events" in p.name:
            assert "hook payloads" in problem, p
        else:
            assert problem == "", (p, problem)
    assert transcript_problem(b"", whole=True) == ""


def test_capture_refuses_a_codex_rollout_with_the_reason(home):
    """`autoharnessctl capture --transcript` on a Codex rollout exits non-zero and names it."""
    from harness import ctl

    path = _write(home["claude"] / "projects", "rollout.jsonl", CODEX)
    r = ctl("capture", "--transcript", str(path))
    assert r.returncode != 0
    assert "a Codex CLI rollout" in r.stderr and "not a Claude Code transcript" in r.stderr
