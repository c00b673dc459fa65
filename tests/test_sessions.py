"""The counter state machine, as plain values (no I/O)."""

import itertools
import json

import msgspec
import pytest

from claude_autoharness.daemon import sessions as sm
from claude_autoharness.daemon.witness import tool_uses
from conftest import CORPUS


def ev(name, sid="s1", **kw):
    return sm.HookEvent(hook_event_name=name, session_id=sid, **kw)


def ids():
    c = itertools.count()
    return lambda: f"job{next(c)}"


def run(events, sessions=None, every=3, counting=True):
    sessions = {} if sessions is None else sessions
    make = ids()
    jobs = []
    for e in events:
        jobs += sm.apply_event(sessions, e, now=100.0, reflect_every=every, make_id=make,
                               counting=counting)
    return sessions, jobs


def test_pretooluse_counts_every_tool():
    """Every PreToolUse of a main session adds one, whatever the tool."""
    s, jobs = run([ev("PreToolUse", tool_name=t) for t in ("Bash", "Read", "Skill", "mcp__x__y")])
    assert s["s1"].activity == 4 and jobs == []


def test_chat_events_do_not_count():
    """Prompts, notifications, PostToolUse and subagent stops are not work units."""
    s, jobs = run([ev("SessionStart", source="startup"), ev("UserPromptSubmit"),
                   ev("PostToolUse"), ev("Notification"), ev("SubagentStop")])
    assert s["s1"].activity == 0 and jobs == []


def test_stop_below_threshold_does_nothing():
    """Stop with activity under reflect_every keeps the count and creates no job."""
    s, jobs = run([ev("PreToolUse"), ev("PreToolUse"), ev("Stop")])
    assert s["s1"].activity == 2 and jobs == []


def test_stop_at_threshold_resets_and_creates_threshold_job():
    """Stop at ≥ reflect_every resets to 0 and creates one threshold job with the window start."""
    sessions = {"s1": sm.Session(session_id="s1", watermark=1234, transcript_path="/t.jsonl")}
    s, jobs = run([ev("PreToolUse")] * 4 + [ev("Stop")], sessions)
    assert s["s1"].activity == 0
    assert len(jobs) == 1
    j = jobs[0]
    assert (j.kind, j.session_id, j.window_start, j.transcript_path, j.status) == \
        ("threshold", "s1", 1234, "/t.jsonl", "pending")


def test_session_end_with_tail_creates_job_and_forgets_counter():
    """SessionEnd with activity > 0 creates a session_end job and the counter is gone."""
    s, jobs = run([ev("PreToolUse"), ev("SessionEnd")])
    assert [j.kind for j in jobs] == ["session_end"]
    assert s["s1"].activity == 0 and s["s1"].ended_at is not None


def test_session_end_without_tail_creates_nothing():
    """SessionEnd right after a threshold reset (activity 0) creates no job."""
    s, jobs = run([ev("PreToolUse")] * 3 + [ev("Stop"), ev("SessionEnd")])
    assert [j.kind for j in jobs] == ["threshold"]


def test_not_counting_records_nothing():
    """Child/paused events (counting=False) neither count nor create sessions or jobs."""
    s, jobs = run([ev("PreToolUse")] * 5 + [ev("Stop"), ev("SessionEnd")], counting=False)
    assert s == {} and jobs == []


def test_sessions_are_independent():
    """Two sessions count separately."""
    s, _ = run([ev("PreToolUse", "a"), ev("PreToolUse", "b"), ev("PreToolUse", "a")])
    assert (s["a"].activity, s["b"].activity) == (2, 1)


def test_project_cwd_is_where_session_started():
    """The session's cwd is SessionStart's, not where later events ran."""
    s, _ = run([ev("SessionStart", cwd="/p/main", source="startup"),
                ev("PreToolUse", cwd="/p/main/sub")])
    assert s["s1"].cwd == "/p/main"
    s, _ = run([ev("PreToolUse", cwd="/first"), ev("PreToolUse", cwd="/second")])
    assert s["s1"].cwd == "/first"


def test_resumed_session_keeps_watermark():
    """A session that ended and comes back resumes from its old watermark."""
    sessions = {"s1": sm.Session(session_id="s1", watermark=500, ended_at=50.0)}
    s, _ = run([ev("SessionStart", source="resume"), ev("PreToolUse")], sessions)
    assert s["s1"].watermark == 500 and s["s1"].ended_at is None and s["s1"].activity == 1


def test_flush_only_sessions_with_activity():
    """flush() creates a job per named session with activity and resets it."""
    sessions = {"a": sm.Session(session_id="a", activity=2), "b": sm.Session(session_id="b")}
    jobs = sm.flush(sessions, ["a", "b", "zzz"], now=1.0, kind="flush", make_id=ids())
    assert [(j.session_id, j.kind) for j in jobs] == [("a", "flush")]
    assert sessions["a"].activity == 0


def test_idle_sessions_need_quiet_events_and_transcript():
    """A session is idle only when neither events nor transcript growth happened recently."""
    sessions = {"a": sm.Session(session_id="a", activity=1, last_event_at=0.0),
                "b": sm.Session(session_id="b", activity=1, last_event_at=0.0),
                "c": sm.Session(session_id="c", activity=0, last_event_at=0.0)}
    growth = {"a": 0.0, "b": 950.0, "c": 0.0}
    out = sm.idle_sessions(sessions, now=1000.0, idle_after=100.0,
                           last_growth=lambda s: growth[s.session_id])
    assert out == ["a"]


def test_session_id_validation():
    """Only ^[A-Za-z0-9_-]{1,128}$ is a session id."""
    assert sm.valid_session_id("c45af7b1-cb7c-4e51-93db-8cbb250a877a")
    for bad in ("", "a/b", "../x", "x" * 129, "a b", "é", None, 12):
        assert not sm.valid_session_id(bad)


def payload(line: int) -> dict:
    """One of Claude Code 2.1.328's own hook payloads (tests/corpus/claude-code)."""
    path = CORPUS / "claude-code" / "hook-payloads.jsonl"
    return json.loads(path.read_text().splitlines()[line - 1])


def test_subagent_calls_are_tallied_apart_and_never_reach_the_threshold():
    """PreToolUse with an `agent_id` (a subagent's call, Claude Code's own payload) adds to
    `subagent_calls`, not to activity: 3 subagent calls and 1 main call are activity 1, and a
    Stop with reflect_every=2 makes no job."""
    sessions: dict[str, sm.Session] = {}
    sub = msgspec.json.decode(json.dumps(payload(8)).encode(), type=sm.HookEvent)
    main = msgspec.json.decode(json.dumps(payload(7)).encode(), type=sm.HookEvent)
    assert sub.agent_id and not main.agent_id
    for i in range(3):
        e = msgspec.structs.replace(sub, tool_use_id=f"toolu_sub{i}")
        assert sm.apply_event(sessions, e, now=1.0, reflect_every=2, make_id=ids()) == []
    sm.apply_event(sessions, main, now=2.0, reflect_every=2, make_id=ids())
    s = sessions[main.session_id]
    assert (s.activity, s.calls_hook, s.subagent_calls) == (1, 1, 3)
    stop = msgspec.json.decode(json.dumps(payload(5)).encode(), type=sm.HookEvent)
    stop = msgspec.structs.replace(stop, session_id=main.session_id)
    assert sm.apply_event(sessions, stop, now=3.0, reflect_every=2, make_id=ids()) == []
    assert s.tool_ids == [main.tool_use_id]  # subagent ids never enter the main chain's memory


def test_old_sessions_and_jobs_load_with_the_new_fields_defaulted():
    """A session and a job journaled before these fields existed decode with
    `subagent_calls` 0 and no final text."""
    s = msgspec.json.decode(b'{"session_id":"s1","activity":3,"calls_hook":3}', type=sm.Session)
    j = msgspec.json.decode(b'{"id":"j","session_id":"s1","kind":"threshold","created_at":1}',
                            type=sm.Job)
    assert s.subagent_calls == 0 and j.final_text is None and j.prompt_id is None


@pytest.mark.parametrize("command,own", [
    ("autoharnessctl learn --session abc - <<'AUTOHARNESS_LESSON_abc'\nx\nAUTOHARNESS_LESSON_abc",
     True),
    ("  /home/u/.venv/bin/autoharnessctl learn \"run make check\"", True),
    ("autoharnessctl status", False),
    ("echo autoharnessctl learn", False),
    ("autoharnessctl-learn x", False),
    ("", False),
])
def test_learn_command_recognised(command, own):
    """Only a command that runs `autoharnessctl learn` (by name or path) is the /learn call."""
    assert sm.is_learn_command(command) is own
    raw = msgspec.json.encode({"command": command})
    assert sm.is_learn_call("Bash", raw) is own
    assert sm.is_learn_call("Read", raw) is False


def test_learn_call_is_remembered_not_counted_by_either_witness():
    """The /learn Bash call counts as no activity: the hook remembers its id (so the
    transcript does not count it) and the transcript witness leaves it out on its own."""
    cmd = "autoharnessctl learn --session s1 - <<'END'\nlesson\nEND"
    sessions: dict[str, sm.Session] = {}
    e = ev("PreToolUse", tool_name="Bash", tool_use_id="toolu_learn",
           tool_input=msgspec.Raw(msgspec.json.encode({"command": cmd})))
    sm.apply_event(sessions, e, now=5.0, reflect_every=50, make_id=ids())
    s = sessions["s1"]
    assert s.activity == 0 and s.calls_hook == 0 and "toolu_learn" in s.tool_ids
    assert sm.transcript_calls(s, [("toolu_learn", 6.0)]) == []
    rec = {"type": "assistant", "timestamp": "2026-12-01T10:00:00Z", "message": {"content": [
        {"type": "tool_use", "id": "toolu_learn", "name": "Bash", "input": {"command": cmd}},
        {"type": "tool_use", "id": "toolu_work", "name": "Bash", "input": {"command": "ls"}}]}}
    data = json.dumps(rec).encode() + b"\n"
    assert [i for i, _ in tool_uses(data, default_time=0.0)] == ["toolu_work"]


DAY = 86_400.0


def test_sessions_quiet_past_the_retention_are_pruned_once_their_count_is_spent():
    """A session quiet past the retention is dropped only when its count is spent (activity 0)
    and no job needs it; an ended one after the shorter keep; a recent one stays."""
    now = 100 * DAY
    sessions = {
        "old": sm.Session(session_id="old", last_event_at=now - 15 * DAY),
        "old-counting": sm.Session(session_id="old-counting", activity=2,
                                   last_event_at=now - 15 * DAY),
        "old-busy": sm.Session(session_id="old-busy", last_event_at=now - 15 * DAY),
        "ended": sm.Session(session_id="ended", last_event_at=now - 8 * DAY,
                            ended_at=now - 8 * DAY),
        "recent": sm.Session(session_id="recent", last_event_at=now - 13 * DAY),
    }
    gone = sm.prune_sessions(sessions, now=now, keep_ended_s=7 * DAY, retention_s=14 * DAY,
                             busy={"old-busy"})
    assert sorted(gone) == ["ended", "old"]
    assert sorted(sessions) == ["old-busy", "old-counting", "recent"]


def test_unfinished_jobs_older_than_the_bound_end_with_the_reason():
    """A pending (or stuck running) job past the bound is failed, saying it expired and what
    its last error was; a younger one and a finished one are left alone."""
    now = 100 * DAY
    jobs = [sm.Job(id="a", session_id="s", kind="idle", created_at=now - 15 * DAY,
                   last_error="no reflector backend"),
            sm.Job(id="b", session_id="s", kind="idle", created_at=now - DAY),
            sm.Job(id="c", session_id="s", kind="idle", created_at=now - 30 * DAY,
                   status="done")]
    [ended] = sm.expire_jobs(jobs, now=now, max_age_s=14 * DAY, why="session_retention_days")
    assert ended.id == "a" and ended.status == "failed" and ended.finished_at == now
    assert "expired" in ended.last_error and "no reflector backend" in ended.last_error
    assert [j.status for j in jobs] == ["failed", "pending", "done"]


def test_an_interrupted_job_runs_again_and_is_parked_past_the_bound():
    """Each interruption sets the job pending again without touching its attempts; past the
    bound it waits the backoff for the times over, with the reason."""
    job = sm.Job(id="a", session_id="s", kind="threshold", created_at=0.0, status="running",
                 attempts=1)
    waits = []
    for n in range(1, 6):
        job.status = "running"
        sm.resume_interrupted(job, now=1000.0, park_after=3,
                              wait=lambda k: waits.append(k) or 10.0 * k)
        assert job.status == "pending" and job.attempts == 1 and job.interrupted == n
        assert (job.next_attempt_at > 1000.0) is (n > 3)
    assert waits == [1, 2] and job.next_attempt_at == 1020.0
    assert "interrupted 5 times" in job.last_error and "parked" in job.last_error


def test_calls_replayed_in_one_batch_leave_the_memory_the_calls_one_by_one_left():
    """A journal replay remembers a session's calls in one batch: past the memory's bound, with
    ids it already holds among them (skipped), its ids, their times and `forgotten_until` end
    as `remember_call` one call at a time leaves them."""
    calls = [(f"toolu_{i:04d}", 1000.0 + i) for i in range(sm.KEEP_TOOL_IDS * 2 + 7)]
    calls += calls[-5:]  # already remembered: counted once
    one = sm.Session(session_id="one", tool_ids=["toolu_old"], tool_at=[])
    batch = msgspec.structs.replace(one, tool_ids=list(one.tool_ids), tool_at=[])
    added = [c for c, at in calls if sm.remember_call(one, c, at)]
    sm.replay_calls(batch, calls)
    assert len(added) == sm.KEEP_TOOL_IDS * 2 + 7
    assert (batch.tool_ids, batch.tool_at, batch.forgotten_until) == \
        (one.tool_ids, one.tool_at, one.forgotten_until)
    assert len(batch.tool_ids) == sm.KEEP_TOOL_IDS
    assert batch.forgotten_until == calls[-sm.KEEP_TOOL_IDS - 6][1]
