"""Bounded state: old and new state files load; pruning is journaled; `status` stays small;
a persist journals what changed."""

import json
import os
import shutil
import time
from pathlib import Path

import anyio
import pytest

from claude_autoharness.daemon.book import Book
from claude_autoharness.daemon.core import Daemon as Core
from claude_autoharness.daemon.persist import quarantine
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol import paths
from claude_autoharness.protocol.config import load as load_config
from harness import Daemon, ctl, hook, pre_tool, wait_for

FIXTURES = Path(__file__).parent / "fixtures"
SID = "c45af7b1-cb7c-4e51-93db-8cbb250a877a"
DAY = 86_400.0


def place(*files: tuple[str, str]) -> None:
    os.makedirs(paths.state_dir(), mode=0o700, exist_ok=True)
    for src, name in files:
        shutil.copyfile(FIXTURES / src, os.path.join(paths.state_dir(), name))


@pytest.mark.parametrize("with_snapshot", [True, False], ids=["snapshot", "snapshot-lost"])
def test_an_old_snapshot_and_journal_still_load(home, with_snapshot):
    """A version-1 snapshot and the single-file journal older versions wrote (its records
    after the snapshot, and the `carry` records a compaction kept): the records newer than the
    snapshot apply once; without the snapshot the carried job and session come back."""
    place(("journal_v1.jsonl", "journal.jsonl"))
    if with_snapshot:
        place(("snapshot_v1.json", "snapshot.json"))
    book = Book(clock=lambda: 1_790_000_010.0)
    book.load()
    st = book.state
    s = st.sessions[SID]
    assert (s.activity, s.tool_ids) == (13, ["toolu_01A"])
    [job] = st.jobs.values()
    assert (job.status, job.attempts, job.interrupted) == ("pending", 1, 1)  # it was running
    assert st.turns.user == 1 and st.turns.projects == {"/home/user/proj": 1}
    assert book.seen_before("a" * 32) and book.seen_before("b" * 32)
    if with_snapshot:
        assert (st.events.received, st.events.by_kind) == (102, {"PreToolUse": 81, "Stop": 19})
        assert (st.jobs_done, st.jobs_failed) == (3, 1)


@pytest.mark.parametrize("corrupt", [False, True], ids=["snapshot", "snapshot-corrupt"])
def test_the_segmented_journal_with_parts_and_forget_records_loads(home, corrupt):
    """Today's format: a snapshot, the previous one, a closed journal segment and the current
    file with "parts" (changed counters) and "forget" (pruned) records. A corrupt snapshot is
    quarantined and the previous one with the segments since it gives the same state."""
    for name in os.listdir(FIXTURES / "state_v2"):
        place((f"state_v2/{name}", name))
    if corrupt:
        with open(paths.snapshot_file(), "wb") as f:
            f.write(b'{"schema": 1, "sessions": {')
    book = Book(clock=lambda: 1_800_000_010.0)
    book.load()
    st = book.state
    assert sorted(st.sessions) == ["s-a"]  # s-b was forgotten
    s = st.sessions["s-a"]
    assert (s.activity, s.calls_hook, s.tool_ids) == (0, 3, ["toolu_1", "toolu_2", "toolu_3"])
    [job] = st.jobs.values()
    assert (job.kind, job.status) == ("threshold", "pending")
    ev = st.events
    assert (ev.received, ev.peer_rejected) == (6, 1)
    assert ev.by_kind == {"SessionStart": 2, "PreToolUse": 3, "Stop": 1}
    assert st.tokens == {"day:2027-01-15": 2000, "total": 2000} and st.turns.user == 1
    assert bool(quarantine.files()) is corrupt


@pytest.mark.anyio
async def test_pruning_is_journaled_and_expired_jobs_say_why(home, monkeypatch):
    """Past the retention: a quiet session whose count is spent is forgotten, one still
    counting is kept, and a job that never ran is ended with a reason `status` shows; the
    prune is journaled, so a restart without a snapshot does not bring any of it back."""
    monkeypatch.setenv("AUTOHARNESS_REFLECT_EVERY", "1")
    now = [1_800_000_000.0]
    clock = lambda: now[0]  # noqa: E731

    async def send(i: int, name: str, sid: str, **kw) -> None:
        p = {"session_id": sid, "hook_event_name": name, "cwd": "/tmp/p", **kw}
        await core.hooks.cmd_hook(m.Hook(payload=json.dumps(p).encode(), id=f"{i:032x}"))

    core = Core(load_config(), clock=clock)
    core.load()
    await send(1, "SessionStart", "quiet", source="startup")
    await send(2, "PreToolUse", "counting", tool_name="Bash")
    await send(3, "PreToolUse", "stuck", tool_name="Bash")
    await send(4, "Stop", "stuck")  # a job no reflector ever ran
    now[0] += 15 * DAY
    await send(5, "SessionStart", "fresh", source="startup")
    await core.book.persist()
    st = core.book.state
    assert sorted(st.sessions) == ["counting", "fresh"]
    [job] = st.jobs.values()
    assert job.status == "failed" and "expired" in job.last_error
    status = await core.status.status()
    assert "expired" in status.jobs.last_error.error and status.jobs.failed == 1
    core.book.close()  # a crash: no snapshot since
    core = Core(load_config(), clock=clock)
    core.load()
    try:
        assert sorted(core.book.state.sessions) == ["counting", "fresh"]
        assert [j.status for j in core.book.state.jobs.values()] == ["failed"]
    finally:
        core.book.close()


@pytest.mark.anyio
async def test_a_quiet_daemon_prunes_and_expires_on_its_own_clock(home, monkeypatch):
    """No event, no job change, nothing dirty: the persist loop alone, once the daemon's clock
    is past the retention, forgets the quiet sessions and ends the job that never ran (and
    journals it, so a restart does not bring them back)."""
    monkeypatch.setenv("AUTOHARNESS_REFLECT_EVERY", "1")
    monkeypatch.setenv("AUTOHARNESS_PERSIST_INTERVAL_S", "0.01")
    now = [1_800_000_000.0]
    core = Core(load_config(), clock=lambda: now[0])
    core.load()
    for i, (name, sid) in enumerate([("SessionStart", "quiet"), ("PreToolUse", "stuck"),
                                     ("Stop", "stuck")]):
        p = {"session_id": sid, "hook_event_name": name, "cwd": "/tmp/p", "source": "startup",
             "tool_name": "Bash"}
        await core.hooks.cmd_hook(m.Hook(payload=json.dumps(p).encode(), id=f"{i:032x}"))
    await core.book.persist()
    await core.book.persist()  # the first one's own records marked the book dirty
    assert core.book.dirty is False and len(core.book.state.sessions) == 2
    assert [j.status for j in core.book.state.jobs.values()] == ["pending"]
    now[0] += 15 * DAY  # quiet from here on: only the clock moves
    async with anyio.create_task_group() as tg:
        tg.start_soon(core.persist_loop)
        with anyio.fail_after(30):
            while core.book.state.sessions:
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    [job] = core.book.state.jobs.values()
    assert job.status == "failed" and "expired" in job.last_error
    core.book.close()  # a crash: no snapshot since
    core = Core(load_config(), clock=lambda: now[0])
    core.load()
    try:
        assert core.book.state.sessions == {}
        assert [j.status for j in core.book.state.jobs.values()] == ["failed"]
    finally:
        core.book.close()


def test_status_shows_the_newest_sessions_and_a_count(home):
    """With 120 live sessions in state, `status` lists the newest 50 and says how many there
    are; `--limit`/`--offset` page; `--all --json` lists every one."""
    base = 1_800_000_000.0
    sessions = {f"s-{i:03d}": {"session_id": f"s-{i:03d}", "activity": 1,
                               "last_event_at": base + i} for i in range(120)}
    os.makedirs(paths.state_dir(), mode=0o700, exist_ok=True)
    with open(paths.snapshot_file(), "w") as f:
        json.dump({"schema": 1, "journal_seq": 0, "sessions": sessions}, f)
    d = Daemon(home["home"], env={"AUTOHARNESS_WATCH": "0"})
    try:
        st = d.status()
        assert st["sessions_total"] == 120 and len(st["sessions"]) == 50
        assert [s["session_id"] for s in st["sessions"]][:2] == ["s-119", "s-118"]
        page = json.loads(ctl("status", "--json", "--limit", "10", "--offset", "115").stdout)
        assert [s["session_id"] for s in page["sessions"]] == [f"s-{i:03d}" for i in range(4, -1, -1)]
        every = json.loads(ctl("status", "--all", "--json").stdout)
        assert sorted(s["session_id"] for s in every["sessions"]) == sorted(sessions)
        text = ctl("status").stdout
        assert "50 of 120 shown" in text and "--all" in text
        assert len(ctl("status", "--all").stdout.splitlines()) > 120
    finally:
        d.stop()


def test_a_persist_rewrites_no_snapshot_however_large_the_state(home):
    """With 5,000 sessions in state, hooks and persists append a few hundred bytes each to the
    journal and leave the snapshot alone (it is rewritten only once the journal has grown as
    large as it)."""
    sessions = {f"s-{i:04d}": {"session_id": f"s-{i:04d}", "activity": 1,
                               "last_event_at": time.time()} for i in range(5000)}
    os.makedirs(paths.state_dir(), mode=0o700, exist_ok=True)
    with open(paths.snapshot_file(), "w") as f:
        json.dump({"schema": 1, "journal_seq": 0, "sessions": sessions}, f)
    env = {"AUTOHARNESS_WATCH": "0", "AUTOHARNESS_PERSIST_INTERVAL_S": "0.05"}
    d = Daemon(home["home"], env=env)
    try:
        before = os.stat(paths.snapshot_file())
        for i in range(10):
            hook(pre_tool("s-0001", tool_use_id=f"toolu_{i}"), env=env)
        wait_for(lambda: b'"PreToolUse"],10]' in open(paths.journal_file(), "rb").read(),
                 what="the counters journaled")
        after = os.stat(paths.snapshot_file())
        assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
        assert os.path.getsize(paths.journal_file()) < 20 * 1024
    finally:
        d.kill9()


@pytest.mark.anyio
async def test_changed_and_removed_entries_replay_from_the_journal(home):
    """A persist journals only the entries that changed, removals included: after a crash with
    no snapshot since, the counters, a table's new entry and the entry taken out of it are as
    they were (the tokens of a past day are dropped when a new day is charged)."""
    core = Core(load_config())
    core.load()
    book = core.book
    book.add_tokens("day:2027-01-01", 100)
    book.event_rejected()
    book.event_rejected()
    await book.persist()
    book.add_tokens("day:2027-01-02", 50)  # drops day 1
    book.mark_project_seen("/p", 12.5)
    await book.persist()
    core.book.close()
    core = Core(load_config())
    core.load()
    try:
        st = core.book.state
        assert st.tokens == {"day:2027-01-02": 50, "total": 150}
        assert st.events.rejected == 2 and st.project_marks == {"/p": 12.5}
    finally:
        core.book.close()
