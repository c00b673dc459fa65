"""Idle flush with an injected clock (in-process daemon core), and the offline learnings CLI."""

import json

import msgspec
import pytest

from harness import Daemon, ctl, hook
from autoharness.daemon.core import Daemon as Core
from autoharness.daemon.learnings.context import rule_text
from autoharness.protocol import messages as m
from autoharness.protocol import paths
from autoharness.protocol.config import load as load_config

MARKER = ("<!-- learning\ntopic: cache-keys\nkind: bug-fix\ndoc-impact: docs\n"
          "body: Cache keys must include the locale, because two users saw each other's pages.\n-->")


def hook_req(**ev) -> m.Hook:
    return m.Hook(payload=msgspec.Raw(json.dumps(ev).encode()))


@pytest.mark.anyio
async def test_idle_session_is_flushed_by_the_clock(home):
    """A session with activity whose events and transcript stay quiet for idle_flush_after_s
    gets an `idle` job; transcript growth postpones it; no sleeping, the clock is injected."""
    now = [1_000.0]
    core = Core(load_config(), clock=lambda: now[0])
    core.load()
    t = str(home["claude"] / "projects" / "-p" / "s.jsonl")
    try:
        await core.cmd_hook(hook_req(session_id="idle-1", hook_event_name="PreToolUse",
                                     transcript_path=t, cwd="/tmp", tool_name="Bash"))
        now[0] += 1_799
        assert await core.idle_check(core.last_growth) == []
        core.transcripts.feed(t, 0, b"{}\n")  # the transcript grew: not idle yet
        now[0] += 1_000
        assert await core.idle_check(core.last_growth) == []
        now[0] += 800
        jobs = await core.idle_check(core.last_growth)
        assert [(j.kind, j.session_id) for j in jobs] == [("idle", "idle-1")]
        assert core.state.sessions["idle-1"].activity == 0
        assert await core.idle_check(core.last_growth) == []  # once
    finally:
        core.journal.close()


def write_transcript(home, project, marker=MARKER):
    slug_dir = home["claude"] / "projects" / paths.project_slug(str(project))
    slug_dir.mkdir(parents=True, exist_ok=True)
    t = slug_dir / "sess-cli.jsonl"
    rec = {"type": "assistant", "timestamp": "2026-11-30T09:00:00Z",
           "message": {"role": "assistant", "content": [{"type": "text", "text": "ok " + marker}]}}
    t.write_text(json.dumps(rec) + "\n")
    return t


def test_report_single_transcript_lists_markers(home):
    """--transcript-path lists each marker as `[kind] topic (doc-impact: x)`."""
    t = write_transcript(home, home["tmp"])
    r = ctl("learnings", "report", "--transcript-path", str(t))
    assert r.returncode == 0
    assert "[bug-fix] cache-keys (doc-impact: docs)" in r.stdout


def test_report_hook_mode_reads_stdin_and_never_fails(home):
    """With no mode the report reads a hook payload from stdin; bad input still exits 0."""
    project = home["tmp"] / "p1"
    project.mkdir()
    t = write_transcript(home, project)
    payload = json.dumps({"transcript_path": str(t), "cwd": str(project)}).encode()
    r = ctl("learnings", "report", input=payload)
    assert r.returncode == 0 and b"1 unprocessed marker" in r.stdout
    r = ctl("learnings", "report", input=b"\xff not json")
    assert r.returncode == 0 and r.stderr
    other = json.dumps({"transcript_path": str(home["tmp"] / "none" / "x.jsonl"),
                        "cwd": str(home["tmp"])}).encode()
    r = ctl("learnings", "report", "--silent-if-empty", input=other)
    assert r.returncode == 0 and r.stdout == b""


def test_offline_save_then_previous_transcripts_is_silent(home):
    """Offline (no daemon) save writes the journal and wiki; the next report has nothing."""
    project = home["tmp"] / "p2"
    project.mkdir()
    write_transcript(home, project)
    r = ctl("learnings", "report", "--previous-transcripts", "--project", str(project))
    assert "1 unprocessed marker" in r.stdout
    r = ctl("learnings", "save", "--project", str(project))
    assert r.returncode == 0 and "saved 1 markers" in r.stdout
    assert list((project / ".claude" / "journal").glob("*.md"))
    assert (project / ".claude" / "wiki" / "cache-keys.md").exists()
    r = ctl("learnings", "report", "--previous-transcripts", "--project", str(project),
            "--silent-if-empty")
    assert r.returncode == 0 and r.stdout == ""


def test_printed_rule_is_the_injected_rule(home):
    """`learnings rule` prints exactly the text injected at SessionStart."""
    d = Daemon(home["home"])
    try:
        out = hook({"session_id": "rule-1", "hook_event_name": "SessionStart",
                    "source": "startup", "cwd": str(home["tmp"])})
        ctx = json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
    finally:
        d.stop()
    printed = ctl("learnings", "rule").stdout.strip()
    assert printed == rule_text() and printed in ctx


def test_disabled_project_gets_no_context(home):
    """A project with enabled = false gets nothing injected at SessionStart."""
    project = home["tmp"] / "off"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "autoharness.toml").write_text("enabled = false\n")
    d = Daemon(home["home"])
    try:
        out = hook({"session_id": "off-1", "hook_event_name": "SessionStart",
                    "source": "startup", "cwd": str(project)})
        assert out.returncode == 0 and out.stdout == b""
    finally:
        d.stop()
