"""Idle flush with an injected clock (in-process daemon core), and the offline learnings CLI."""

import json
import os
import socket
import subprocess
import threading

import msgspec
import pytest

from claude_autoharness.daemon.core import Daemon as Core
from claude_autoharness.daemon.learnings.context import rule_text
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol import paths
from claude_autoharness.protocol.config import load as load_config
from harness import CTL, Daemon, ctl, hook

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
        await core.hooks.cmd_hook(hook_req(session_id="idle-1", hook_event_name="PreToolUse",
                                     transcript_path=t, cwd="/tmp", tool_name="Bash"))
        now[0] += 1_799
        assert await core.jobs.idle_check(core.jobs.last_growth) == []
        core.transcripts.feed(t, 0, b"{}\n")  # the transcript grew: not idle yet
        now[0] += 1_000
        assert await core.jobs.idle_check(core.jobs.last_growth) == []
        now[0] += 800
        jobs = await core.jobs.idle_check(core.jobs.last_growth)
        assert [(j.kind, j.session_id) for j in jobs] == [("idle", "idle-1")]
        assert core.book.state.sessions["idle-1"].activity == 0
        assert await core.jobs.idle_check(core.jobs.last_growth) == []  # once
    finally:
        core.book.close()


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
    assert r.returncode == 0 and "saved 1 marker (" in r.stdout
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


def test_report_transcript_path_uses_the_transcripts_project(home):
    """`report --transcript-path P` takes the processed ids of P's own project (the directory P
    sits in under projects/), not of the directory the command runs from: after a save, the
    saved marker is not listed again, wherever the report runs."""
    project = home["tmp"] / "p4"
    project.mkdir()
    t = write_transcript(home, project)
    elsewhere = home["tmp"] / "elsewhere"
    elsewhere.mkdir()
    r = ctl("learnings", "save", "--project", str(project))
    assert r.returncode == 0 and "saved 1 marker (" in r.stdout
    for cwd in (elsewhere, project):
        r = subprocess.run([CTL, "learnings", "report", "--transcript-path", str(t), "--json"],
                           capture_output=True, text=True, timeout=60, cwd=cwd)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["unprocessed"] == 0, (cwd, r.stdout)


def test_save_does_not_go_offline_when_the_daemon_took_the_request(home):
    """A daemon that accepts the request but does not answer may still be saving: `learnings
    save` reports the error (exit 1) and does not run a second, offline save beside it. Only a
    daemon that is not running at all (no socket) makes it save offline."""
    project = home["tmp"] / "p5"
    project.mkdir()
    write_transcript(home, project)
    sock_path = paths.socket_path()
    os.makedirs(os.path.dirname(sock_path), mode=0o700, exist_ok=True)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    srv.listen(4)
    got = []

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                got.append(conn.recv(65536))  # take the request, then hang up unanswered

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    try:
        r = ctl("learnings", "save", "--project", str(project), timeout=60)
    finally:
        srv.close()
        os.unlink(sock_path)
    assert got and got[0], "the request never reached the socket"
    assert r.returncode == 1 and "did not answer" in r.stderr, (r.stdout, r.stderr)
    assert not (project / ".claude").exists()
    r = ctl("learnings", "save", "--project", str(project))  # no socket: offline
    assert r.returncode == 0 and "saved 1 marker (" in r.stdout


def test_offline_save_refuses_a_dot_claude_outside_the_project(home):
    """Offline, a `.claude` symlinked out of the project is a clear error (exit 1), no
    traceback, and nothing is written through the link."""
    project = home["tmp"] / "p6"
    project.mkdir()
    outside = home["tmp"] / "outside"
    outside.mkdir()
    (project / ".claude").symlink_to(outside)
    write_transcript(home, project)
    r = ctl("learnings", "save", "--project", str(project))
    assert r.returncode == 1 and "outside the project" in r.stderr
    assert "Traceback" not in r.stderr and list(outside.iterdir()) == []


def test_offline_save_redacts_with_the_configured_rules(home):
    """The offline save redacts marker text with the configured redaction (an extra rule from
    config.toml here) before writing the journal and wiki."""
    (home["home"] / "config.toml").write_text(
        '[[redaction.extra_rules]]\nkind = "codename"\npattern = "Bluebird"\n')
    project = home["tmp"] / "p7"
    project.mkdir()
    write_transcript(home, project, MARKER.replace("the locale", "the Bluebird locale"))
    r = ctl("learnings", "save", "--project", str(project))
    assert r.returncode == 0, r.stderr
    text = "".join(p.read_text() for p in (project / ".claude").rglob("*.md"))
    assert "locale" in text and "Bluebird" not in text and "[REDACTED:" in text


@pytest.mark.anyio
async def test_old_job_windows_are_pruned_unless_an_intent_needs_them(home):
    """Stored windows older than a week go, except those of jobs with queued or held intents."""
    import os

    now = [10 * 86_400.0]
    core = Core(load_config(), clock=lambda: now[0])
    core.load()
    try:
        os.makedirs(paths.windows_dir(), mode=0o700)
        window = "the user said: run the linter before pushing"
        core.intents.intake("jobheld", "s", "reflector", [{
            "action": "create", "skill": "lint-first", "layer": "project", "reason": "r",
            "evidence": "run the linter before pushing", "description": "Use when pushing.",
            "body": "Lint first."}], window, None, 3)
        for job_id in ("jobheld", "jobdone"):
            p = os.path.join(paths.windows_dir(), f"{job_id}.txt")
            with open(p, "w") as f:
                f.write(window)
            os.utime(p, (0, 0))  # written long ago
        assert core.review.prune_windows() == 1
        assert sorted(os.listdir(paths.windows_dir())) == ["jobheld.txt"]
    finally:
        core.book.close()
