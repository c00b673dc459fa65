"""The CLI reads typed replies: a real daemon's answers to every verb the CLI prints decode
strictly into the Structs of protocol/replies/, field for field; the CLI's text comes from
those Structs; a reply of another shape is refused with the fix (restart the daemon)."""

import json

import msgspec
import pytest

from claude_autoharness.client import conn
from claude_autoharness.daemon.intents import IntentQueue
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol import paths
from claude_autoharness.protocol import replies as r
from harness import Daemon, ctl, hook, pre_tool
from marker_support import fixture_bytes
from promote_support import EVIDENCE, WINDOW, intent, land


def _strict(data, kind):
    """`data` is exactly `kind` encoded: it converts strictly and encodes back unchanged."""
    typed = msgspec.convert(data, kind, strict=True)
    assert msgspec.to_builtins(typed) == data
    return typed


def test_every_printed_reply_is_its_struct(env, home):
    """status, queue list/show, skills list/show/revert, flush, learn, curate and stop: each
    reply a real daemon sends is the Struct the CLI decodes it into, with nothing left over."""
    proj = str(env["proj"])
    land(env, intent("create", "typed-skill", body="First body.\n"))
    land(env, intent("update", "typed-skill", body="Second body.\n"))
    q = IntentQueue()
    q.load()
    [queued] = q.intake("job-typed", "sess-typed", "reflector",
                        [{"action": "create", "skill": "other-skill", "layer": "user",
                          "reason": "asked twice", "evidence": EVIDENCE,
                          "description": "Use when typing replies.", "body": "Type them.\n"}],
                        WINDOW, proj, max_intents=5)
    d = Daemon(home["home"])
    try:
        assert hook(pre_tool("sess-typed")).returncode == 0
        st = _strict(conn.call(m.Status()), r.Status)
        assert st.library.hand_written == 0 and st.batches.tokens == 0
        intents = _strict(conn.call(m.Queue(op="list")), list[r.Intent])
        assert queued.id in [i.id for i in intents]
        shown = _strict(conn.call(m.Queue(op="show", intent_id=queued.id)), r.Intent)
        assert shown.proposal is not None and shown.proposal.skill == "other-skill"
        skills = _strict(conn.call(m.Skills(op="list", project=proj)), list[r.SkillInfo])
        assert ("typed-skill", "project", 2) in [(s.name, s.layer, s.version) for s in skills]
        view = _strict(conn.call(m.Skills(op="show", name="typed-skill", project=proj)),
                       r.SkillView)
        assert view.info.owner == "autoharness" and "Second body." in view.skill_md
        out = _strict(conn.call(m.Skills(op="revert", name="typed-skill", project=proj)),
                      r.Outcome)
        assert (out.status, out.version) == ("landed", 3)
        flushed = _strict(conn.call(m.Flush(session_ids=["sess-typed", "nobody"])), r.Flushed)
        assert [j.session_id for j in flushed.jobs] == ["sess-typed"]
        assert flushed.unknown == ["nobody"]
        learned = _strict(conn.call(m.Learn(text="always type replies")), r.LearnQueued)
        assert learned.job
        curated = _strict(conn.call(m.Curate(layer="user")), r.CuratorQueued)
        assert [j.layer for j in curated.jobs] == ["user"]

        listed = ctl("skills", "list", "--project", proj)  # the CLI's text, from the Structs
        assert listed.returncode == 0 and "typed-skill" in listed.stdout, listed.stderr
        assert "probation" in listed.stdout
        queue = ctl("queue", "list")
        assert queue.returncode == 0 and queued.id in queue.stdout, queue.stderr
        status = ctl("status")
        assert status.returncode == 0 and "library: " in status.stdout, status.stderr

        stopping = _strict(conn.call(m.Stop()), r.Stopping)
        assert stopping.stopping and stopping.pid == d.proc.pid
    finally:
        d.stop()


def test_pause_capture_and_the_learnings_report_are_their_structs(env, home):
    """pause/resume, capture and the learnings report: each reply a real daemon sends is its
    Struct, with nothing left over, and the CLI's text and --json come from it."""
    proj = str(env["proj"])
    folder = home["claude"] / "projects" / paths.project_slug(proj)
    folder.mkdir(parents=True)
    transcript = folder / "t.jsonl"
    transcript.write_bytes(fixture_bytes())
    d = Daemon(home["home"])
    try:
        paused = _strict(conn.call(m.Pause(paused=True)), r.Paused)
        assert paused.paused and _strict(conn.call(m.Status()), r.Status).paused
        resumed = ctl("resume")
        assert resumed.returncode == 0 and "resumed" in resumed.stdout, resumed.stderr
        assert not _strict(conn.call(m.Status()), r.Status).paused

        packet = _strict(conn.call(m.Capture(transcript_path=str(transcript), start=0)), r.Packet)
        assert "auth-refresh" in packet.window and packet.size == len(fixture_bytes())
        shown = ctl("capture", "--transcript", str(transcript), "--json")
        assert shown.returncode == 0, shown.stderr
        assert _strict(json.loads(shown.stdout), r.Packet) == packet
        text = ctl("capture", "--transcript", str(transcript))
        assert text.returncode == 0 and "--- window ---" in text.stdout, text.stderr

        report = _strict(conn.call(m.Learnings(op="report", project=proj,
                                               transcripts=[str(transcript)])), r.LearningsReport)
        assert report.unprocessed == len(report.markers) == 5
        assert [mk.topic for mk in report.markers][:2] == ["auth-refresh", "legacy-strings"]
    finally:
        d.stop()


def test_a_reply_of_another_shape_says_to_restart_the_daemon():
    """A daemon of another version whose reply the client cannot read: the CLI's error names
    that daemon's version and the exact fix, instead of a traceback or a wrong figure."""
    other = {"version": "0.0.9", "protocol": 0, "pid": 7, "socket": "/s", "jobs": "many"}
    with pytest.raises(conn.DaemonError) as e:
        conn.typed(other, r.Status, m.Status())
    assert "0.0.9" in str(e.value) and "autoharnessctl restart" in str(e.value)
    # What `start` and `service` read is the head any version's status has.
    head = r.decode(other, r.Identity)
    assert (head.version, head.pid, head.socket) == ("0.0.9", 7, "/s")


def test_every_sub_operation_reaches_its_handler(env, home):
    """Each value of every request's `op` is served by a real daemon: answered with a reply or
    a refusal of its own (no such intent or skill, sync not set up), never with the internal
    error a value no `match` case took would raise (mypy holds each `match` exhaustive)."""
    proj = str(env["proj"])
    d = Daemon(home["home"])
    try:
        for kind, ops, extra in ((m.Queue, m.QueueOp, {"intent_id": "nope"}),
                                 (m.Skills, m.SkillsOp, {"name": "nope", "project": proj}),
                                 (m.Learnings, m.LearningsOp, {"project": proj, "dry_run": True}),
                                 (m.Batch, m.BatchOp, {}), (m.Sync, m.SyncOp, {})):
            for op in ops.__args__:
                try:
                    conn.call(kind(op=op, **extra))
                except conn.DaemonError as e:
                    assert e.code != "internal", (kind.__name__, op, e.message)
    finally:
        d.stop()
