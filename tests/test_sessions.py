"""The counter state machine, as plain values (no I/O)."""

import itertools

from claude_autoharness.daemon import sessions as sm


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
