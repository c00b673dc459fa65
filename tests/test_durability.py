"""Durability: an acknowledged event is never lost, an undelivered one is always spooled, nothing
counts twice, and jobs survive crashes without being failed by them."""

import json
import os
import resource
import shutil
import signal
import subprocess
import time
from pathlib import Path

import anyio
import pytest

from claude_autoharness.daemon.core import Daemon as Core
from claude_autoharness.daemon.persist import dirs, quarantine
from claude_autoharness.daemon.persist import state as st
from claude_autoharness.daemon.persist.dirs import write_private
from claude_autoharness.daemon.persist.journal import Journal
from claude_autoharness.protocol import paths
from claude_autoharness.protocol.config import load as load_config
from conftest import CORPUS
from harness import (
    HOOK,
    Daemon,
    ctl,
    event,
    fill_disk_midway,
    frame,
    hook,
    pre_tool,
    send_raw,
    wait_for,
)

CC = CORPUS / "claude-code"


def session(st: dict, sid: str) -> dict:
    return next(s for s in st["sessions"] if s["session_id"] == sid)


def envelope(payload: dict, eid: str, ts: float = 1.0) -> bytes:
    return b'{"type":"hook","v":1,"id":"%s","ts":%.6f,"payload":%b}' % (
        eid.encode(), ts, json.dumps(payload).encode())


def spool_record(payload: dict, eid: str, n: int) -> str:
    """A record as the hook spools it: `<state>/spool/<time>.<id>`."""
    os.makedirs(paths.spool_dir(), mode=0o700, exist_ok=True)
    name = f"{n:020d}.{eid}"
    with open(os.path.join(paths.spool_dir(), name), "wb") as f:
        f.write(envelope(payload, eid))
    return name


def load_hook():
    """The hook client's module (what the installed `autoharness-hook` script runs)."""
    from claude_autoharness.client import hook as mod

    return mod


def test_kill9_right_after_an_acknowledged_burst_loses_nothing(home):
    """Every event the daemon answered survives a kill -9 sent right after the last answer,
    with no snapshot in between (the journal holds them), and none is counted twice."""
    env = {"AUTOHARNESS_PERSIST_INTERVAL_S": "3600", "AUTOHARNESS_WATCH": "0"}
    d = Daemon(home["home"], env=env)
    for i in range(40):
        reply = send_raw(d.sock, frame(envelope(pre_tool("burst"), f"{i:032x}")))
        assert b'"type":"hook_reply"' in reply  # acknowledged
    d.kill9()
    d2 = Daemon(home["home"], env=env)
    try:
        s = session(d2.status(), "burst")
        assert s["activity"] == 40 and s["calls"] == {"hook": 40, "transcript": 0}
    finally:
        d2.stop()


def test_frozen_daemon_then_sigkill_all_five_hooks_counted_after_restart(home):
    """Five hooks against a SIGSTOP'd daemon get no answer, spool their events, and after a
    SIGKILL and a restart all five are counted, once."""
    env = {"AUTOHARNESS_WATCH": "0"}
    d = Daemon(home["home"], env=env)
    os.kill(d.proc.pid, signal.SIGSTOP)
    try:
        procs = [subprocess.Popen([HOOK], stdin=subprocess.PIPE) for _ in range(5)]
        for p in procs:
            p.communicate(json.dumps(pre_tool("frozen")).encode(), timeout=90)
            assert p.returncode == 0
    finally:
        d.kill9()
    assert len(os.listdir(paths.spool_dir())) == 5
    d2 = Daemon(home["home"], env=env)
    try:
        st = d2.status()
        assert session(st, "frozen")["activity"] == 5
        assert st["spool"] == {"replayed": 5, "pending": 0, "lost": 0}
    finally:
        d2.stop()


def test_a_repeated_event_counts_once_and_a_repeated_stop_makes_one_job(home):
    """The same event id sent twice (a reply lost, then the spooled copy) counts once; a Stop
    repeated after its threshold job makes no second job."""
    env = {"AUTOHARNESS_REFLECT_EVERY": "2", "AUTOHARNESS_WATCH": "0",
           "AUTOHARNESS_REFLECTOR_BACKEND": "none"}
    d = Daemon(home["home"], env=env)
    try:
        evs = [(pre_tool("rep"), "a" * 32), (pre_tool("rep"), "b" * 32),
               (event("Stop", "rep"), "c" * 32)]
        for payload, eid in evs + evs:
            send_raw(d.sock, frame(envelope(payload, eid)))
        st = d.status()
        assert session(st, "rep")["activity"] == 0
        assert st["jobs"]["pending"] == 1 and st["events"]["duplicates"] == 3
    finally:
        d.stop()


@pytest.mark.anyio
async def test_crash_during_spool_replay_makes_one_job(home):
    """kill -9 in the middle of a spool replay, at its worst point (every effect journaled, no
    record deleted yet): the replay after restart counts nothing again and makes no second job."""
    os.environ["AUTOHARNESS_REFLECT_EVERY"] = "3"
    try:
        for i in range(3):
            spool_record(pre_tool("mid", tool_use_id=f"toolu_{i}"), f"{i:032x}", i)
        spool_record(event("Stop", "mid"), "f" * 32, 9)
        kept = {n: open(os.path.join(paths.spool_dir(), n), "rb").read()
                for n in os.listdir(paths.spool_dir())}
        core = Core(load_config())
        core.load()
        assert await core.spool.replay() == 4
        assert len(core.book.state.jobs) == 1
        core.book.close()  # the crash: no snapshot, and the deletes never happened
        for name, data in kept.items():
            with open(os.path.join(paths.spool_dir(), name), "wb") as f:
                f.write(data)
        core = Core(load_config())
        core.load()
        try:
            await core.spool.replay()
            assert len(core.book.state.jobs) == 1
            s = core.book.state.sessions["mid"]
            assert (s.activity, s.calls_hook) == (0, 3)
            assert core.book.state.events.duplicates == 4
            assert os.listdir(paths.spool_dir()) == []
        finally:
            core.book.close()
    finally:
        del os.environ["AUTOHARNESS_REFLECT_EVERY"]


@pytest.mark.anyio
async def test_spool_replay_between_a_hooks_open_and_write_loses_nothing(home):
    """A replay that runs after the hook created its spool file but before it wrote the record
    neither swallows nor tears it: the record is replayed by the next pass, whole."""
    mod = load_hook()
    dirs.ensure_private_dir(paths.state_dir())  # as the daemon's start makes it
    core = Core(load_config())
    core.load()
    replays = []

    class OsReplayingBeforeWrite:
        def __getattr__(self, name):
            return getattr(os, name)

        def write(self, fd, data):
            if not replays:  # the daemon's replay runs right here, between open and write
                replays.append(anyio.from_thread.run(core.spool.replay))
            return os.write(fd, data)

    mod.os = OsReplayingBeforeWrite()
    body = envelope(pre_tool("race"), "d" * 32)
    try:
        assert await anyio.to_thread.run_sync(mod.spool, paths.state_dir(), "1." + "d" * 32,
                                              body)
        assert replays == [0]  # the replay ran mid-write and found nothing complete
        assert await core.spool.replay() == 1
        assert core.book.state.sessions["race"].activity == 1
    finally:
        core.book.close()


@pytest.mark.anyio
async def test_torn_spool_record_is_quarantined_and_the_next_one_kept(home):
    """A torn record is set aside (counted as rejected) and the record after it still counts."""
    spool_record(pre_tool("torn"), "1" * 32, 1)
    torn = os.path.join(paths.spool_dir(), f"{2:020d}.{'2' * 32}")
    with open(torn, "wb") as f:
        f.write(envelope(pre_tool("torn"), "2" * 32)[:40])
    spool_record(pre_tool("torn"), "3" * 32, 3)
    core = Core(load_config())
    core.load()
    try:
        await core.spool.replay()
        assert core.book.state.sessions["torn"].activity == 2
        assert core.book.state.events.rejected == 1
        assert os.listdir(paths.spool_dir()) == []
        assert any(os.path.basename(torn) in q for q in quarantine.files())
    finally:
        core.book.close()


def test_hook_spools_only_into_a_private_directory_and_never_through_a_symlink(home):
    """The hook refuses a state dir open to others or a spool dir that is a symlink; with a
    private one it writes a 0600 record whose name carries the event id."""
    mod = load_hook()
    state = Path(paths.state_dir())
    state.mkdir(mode=0o700)
    elsewhere = home["tmp"] / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (state / "spool").symlink_to(elsewhere)
    assert mod.spool(str(state), "1.x", b"{}") is False  # said as lost, not followed
    assert list(elsewhere.iterdir()) == []
    (state / "lost-event.1.x").unlink()
    (state / "spool").unlink()
    os.chmod(state, 0o755)
    assert mod.spool(str(state), "1.x", b"{}") is False
    os.chmod(state, 0o700)
    assert mod.spool(str(state), "1.x", b"{}") is True
    assert oct((state / "spool" / "1.x").stat().st_mode & 0o777) == "0o600"


def corpus_session(projects: Path) -> tuple[Path, list[dict]]:
    """The real headless session whose last PreToolUse never reached the hook: its transcript
    (3 tool_use blocks) under `projects`, and its hook payloads (2 PreToolUse) pointing at it."""
    src = CC / "transcripts" / "markers.jsonl"
    dest = projects / "-home-user-proj" / "0f06d70e-16d8-40ac-9df4-a1261530627b.jsonl"
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)
    payloads = []
    for line in (CC / "hook-payloads.jsonl").read_text().splitlines():
        p = json.loads(line)
        if p["session_id"].startswith("0f06d70e"):
            payloads.append(dict(p, transcript_path=str(dest)))
    return dest, payloads


@pytest.mark.anyio
async def test_call_whose_pretooluse_never_arrived_is_counted_from_the_transcript(home):
    """Real Claude Code headless session: 3 tool calls in the transcript, 2 PreToolUse
    delivered, then SessionEnd. The third call counts from the transcript, once; the two the
    hook reported are not counted again; the late call's activity is flushed when idle."""
    from claude_autoharness.daemon import sessions as sm
    from claude_autoharness.protocol import messages as m

    started = 1_796_087_400.0  # 2026-12-01T01:10:00Z, just before the session's records
    core = Core(load_config(), clock=lambda: started)
    core.load()
    try:
        transcript, payloads = corpus_session(home["claude"] / "projects")
        assert [p["hook_event_name"] for p in payloads] == [
            "SessionStart", "PreToolUse", "PreToolUse", "SessionEnd"]
        for i, p in enumerate(payloads):
            await core.hooks.cmd_hook(m.Hook(payload=json.dumps(p).encode(), id=f"{i:032x}"))
        core.watcher.scan_path(transcript)
        assert core.hooks.count_transcript_calls(core.witness.take()) == 1
        s = core.book.state.sessions["0f06d70e-16d8-40ac-9df4-a1261530627b"]
        assert (s.calls_hook, s.calls_transcript, s.activity) == (2, 1, 1)
        core.watcher.forget(transcript)  # read it all again: nothing counts twice
        core.watcher.scan_path(transcript)
        assert core.hooks.count_transcript_calls(core.witness.take()) == 0
        assert sm.idle_sessions(core.book.state.sessions, now=started + 3600, idle_after=60,
                                last_growth=lambda s: 0.0) == [s.session_id]
    finally:
        core.book.close()


def test_call_seen_by_both_witnesses_counts_once(home):
    """A call reported by PreToolUse and found in the transcript counts once, whichever comes
    first; a transcript-only call counts from the transcript; a sidechain record never counts;
    status --json shows the calls per witness, and a restart keeps them exact."""
    env = {"AUTOHARNESS_PERSIST_INTERVAL_S": "3600"}
    d = Daemon(home["home"], env=env)
    try:
        t = home["claude"] / "projects" / "-tmp-w" / "wit.jsonl"
        t.parent.mkdir(parents=True)
        base = {"session_id": "wit", "transcript_path": str(t), "cwd": "/tmp/w"}
        hook(dict(base, hook_event_name="SessionStart", source="startup"))
        hook(dict(base, hook_event_name="PreToolUse", tool_name="Bash", tool_use_id="toolu_A"))

        def assistant(tool_use_id, sidechain=False):
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.time() + 1))
            return json.dumps({"type": "assistant", "isSidechain": sidechain, "timestamp": stamp,
                               "message": {"role": "assistant", "content": [
                                   {"type": "tool_use", "id": tool_use_id, "name": "Bash",
                                    "input": {"command": "ls"}}]}}) + "\n"

        t.write_text(assistant("toolu_A") + assistant("toolu_B") + assistant("toolu_S", True))
        wait_for(lambda: session(d.status(), "wit")["calls"]["transcript"] == 1, timeout=90,
                 what="transcript witness")
        hook(dict(base, hook_event_name="PreToolUse", tool_name="Bash", tool_use_id="toolu_B"))
        hook(dict(base, hook_event_name="PreToolUse", tool_name="Bash", tool_use_id="toolu_C"))
        s = session(d.status(), "wit")
        assert s["calls"] == {"hook": 2, "transcript": 1} and s["activity"] == 3
        d.kill9()
        d = Daemon(home["home"], env=env)
        hook(dict(base, hook_event_name="PreToolUse", tool_name="Bash", tool_use_id="toolu_A"))
        s = session(d.status(), "wit")
        assert s["calls"] == {"hook": 2, "transcript": 1} and s["activity"] == 3
    finally:
        d.stop()


@pytest.mark.anyio
async def test_corrupt_snapshot_keeps_pending_jobs_and_counts_from_the_journal(home):
    """After compaction the journal still describes unfinished jobs and live sessions: a
    snapshot that later turns out unreadable loses neither."""
    from claude_autoharness.protocol import messages as m

    os.environ["AUTOHARNESS_REFLECT_EVERY"] = "2"
    try:
        core = Core(load_config())
        core.load()
        for i, p in enumerate([pre_tool("cj"), pre_tool("cj"), event("Stop", "cj"),
                               pre_tool("cj")]):
            await core.hooks.cmd_hook(m.Hook(payload=json.dumps(p).encode(), id=f"{i:032x}"))
        await core.book.persist()
        core.book.close()
        with open(paths.snapshot_file(), "wb") as f:
            f.write(b'{"schema": 1, "jobs": {')
        core = Core(load_config())
        core.load()
        try:
            assert [j.status for j in core.book.state.jobs.values()] == ["pending"]
            assert core.book.state.sessions["cj"].activity == 1
            assert any("snapshot" in q for q in quarantine.files())
        finally:
            core.book.close()
    finally:
        del os.environ["AUTOHARNESS_REFLECT_EVERY"]


def test_session_start_that_autostarts_the_daemon_gets_its_context(home, monkeypatch):
    """With no daemon running and autostart on, a SessionStart starts the daemon, waits for it
    (within the bound) and prints the SessionStart context, like any other session."""
    monkeypatch.setenv("AUTOHARNESS_AUTOSTART", "1")
    r = hook({"session_id": "first", "hook_event_name": "SessionStart", "source": "startup",
              "cwd": str(home["tmp"])})
    try:
        ctx = json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"]
        assert "<!-- learning" in ctx  # the marker rule reached the first session
    finally:
        from harness import ctl
        ctl("stop")


def test_an_event_the_daemon_cannot_journal_is_spooled_not_lost(home):
    """With the daemon's disk full (a file size limit: its journal appends fail), it answers
    events with an error, not an acknowledgement; the hook spools them; the daemon keeps
    serving; after a kill -9 and a restart on a disk with room, every acknowledged event and
    every spooled one is counted, once."""
    env = {"AUTOHARNESS_WATCH": "0", "AUTOHARNESS_PERSIST_INTERVAL_S": "3600",
           "AUTOHARNESS_AUTOSTART": "0"}
    d = Daemon(home["home"], env=env, limit_file_bytes=8192)
    acked = refused = 0
    try:
        for i in range(200):
            reply = send_raw(d.sock, frame(envelope(pre_tool("full"), f"{i:032x}")))
            if b'"type":"hook_reply"' in reply:
                acked += 1
            else:
                assert b'"type":"error"' in reply
                refused += 1
                if refused == 3:
                    break
        assert acked > 0 and refused == 3, "the journal never filled up"
        for _ in range(3):
            assert hook(pre_tool("full"), env=env).returncode == 0
        assert d.proc.poll() is None  # still serving
        assert len(os.listdir(paths.spool_dir())) == 3
    finally:
        d.kill9()
    d2 = Daemon(home["home"], env=env)
    try:
        assert session(d2.status(), "full")["activity"] == acked + 3
    finally:
        d2.stop()


def fail_an_append_midway(j: Journal, monkeypatch, eid: str, *, cut_back: bool) -> None:
    fill_disk_midway(monkeypatch, lambda: j.append(st.EventRecord(eid=eid, kind="PreToolUse")),
                     cut_back=cut_back)


@pytest.mark.parametrize("cut_back", [True, False], ids=["cut-back", "cannot-cut-back"])
def test_a_journal_append_that_fails_midway_does_not_eat_the_next(home, monkeypatch, cut_back):
    """A write that fails after writing part of a record (a disk filling up) leaves no torn
    line in front of the next record: the part is cut off, or, if even that fails, the next
    record starts on a line of its own. The failed record is written ahead of the next one
    (the daemon's state already holds its change), and replay reads every record, also after
    a compaction that keeps the whole file."""
    path = str(home["tmp"] / "journal.jsonl")
    j = Journal(path, st.Record)
    j.open()
    j.append(st.EventRecord(eid="1" * 32, kind="PreToolUse"))
    fail_an_append_midway(j, monkeypatch, "2" * 32, cut_back=cut_back)
    j.append(st.EventRecord(eid="3" * 32, kind="PreToolUse"))
    j.rotate()
    j.close()
    records = Journal(path, st.Record).replay(0)
    quarantined = quarantine.files()
    assert [r.eid for r in records] == ["1" * 32, "2" * 32, "3" * 32]
    assert [r.seq for r in records] == [1, 2, 3]
    assert bool(quarantined) is not cut_back  # a torn line left in place is kept for inspection


def test_a_rotation_between_a_torn_append_and_the_next_keeps_the_next(home, monkeypatch):
    """A failed append whose partial line cannot be cut off, then a rotation that closes the
    file (the partial line in it) as a segment, then an append: the next record starts the new
    file, so replay reads it and the failed one written ahead of it."""
    path = str(home["tmp"] / "journal.jsonl")
    j = Journal(path, st.Record)
    j.open()
    j.append(st.EventRecord(eid="1" * 32, kind="PreToolUse"))
    fail_an_append_midway(j, monkeypatch, "2" * 32, cut_back=False)
    j.rotate()
    j.append(st.EventRecord(eid="3" * 32, kind="PreToolUse"))
    j.close()
    records = Journal(path, st.Record).replay(0)
    assert [r.eid for r in records] == ["1" * 32, "2" * 32, "3" * 32]


def test_a_full_disk_under_the_log_does_not_take_the_daemon_down(home):
    """Every log write failing (the log file at the size limit) costs log lines, nothing else:
    the daemon keeps answering requests, including those that log (a rejected event)."""
    (home["home"]).mkdir(exist_ok=True)
    with open(home["home"] / "daemon-test.log", "wb") as f:
        f.write(b"-" * 8192)  # the harness's log for this daemon: already full
    env = {"AUTOHARNESS_WATCH": "0", "AUTOHARNESS_PERSIST_INTERVAL_S": "3600"}
    d = Daemon(home["home"], env=env, limit_file_bytes=8192)
    try:
        for i in range(5):
            reply = send_raw(d.sock, frame(envelope(pre_tool("bad id!"), f"{i:032x}")))
            assert b'"type":"hook_reply"' in reply
        assert d.status()["events"]["rejected"] == 5
        assert d.proc.poll() is None
    finally:
        d.stop()


def test_once_a_full_disk_has_room_again_a_refused_event_counts_once(home):
    """The event a full disk kept out of the journal was already applied in memory, so the
    post-states journaled after it carry its effect: once there is room again its record is
    written ahead of them, and its spooled copy (replayed after a kill -9) counts nothing."""
    env = {"AUTOHARNESS_WATCH": "0", "AUTOHARNESS_PERSIST_INTERVAL_S": "3600",
           "AUTOHARNESS_AUTOSTART": "0"}
    d = Daemon(home["home"], env=env, limit_file_bytes=8192)
    try:
        sent = 0
        while not os.path.isdir(paths.spool_dir()) and sent < 200:  # until one is refused
            hook(pre_tool("room", tool_use_id=f"toolu_{sent}"), env=env)
            sent += 1
        assert len(os.listdir(paths.spool_dir())) == 1
        room = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
        resource.prlimit(d.proc.pid, resource.RLIMIT_FSIZE, room)
        for i in range(2):
            hook(pre_tool("room", tool_use_id=f"toolu_after_{i}"), env=env)
    finally:
        d.kill9()
    d = Daemon(home["home"], env=env)
    try:
        st = d.status()
        assert session(st, "room")["calls"] == {"hook": sent + 2, "transcript": 0}
        assert st["events"]["duplicates"] == 1 and st["spool"]["replayed"] == 1
    finally:
        d.stop()


def test_status_text_shows_each_witness_and_the_copies_dropped(home):
    """`autoharnessctl status` (text) says how many repeated copies it dropped and, per
    session, how many calls each witness counted."""
    d = Daemon(home["home"], env={"AUTOHARNESS_WATCH": "0"})
    try:
        for eid in ("a" * 32, "b" * 32, "a" * 32):
            send_raw(d.sock, frame(envelope(pre_tool("wit"), eid)))
        out = ctl("status", env=d.env).stdout
        assert "1 repeated copies dropped" in out
        assert "CALLS HOOK/TRANSCRIPT" in out
        [row] = [line.split() for line in out.splitlines() if line.strip().startswith("wit ")]
        assert row[1:4] == ["2", "0", "2/0"]  # activity, watermark, calls hook/transcript
    finally:
        d.stop()


@pytest.mark.anyio
async def test_a_copy_behind_a_backlog_longer_than_the_id_memory_counts_once(home):
    """A Stop acknowledged live while a spool backlog larger than the id memory's base size
    waits (its reply lost: the hook spooled it behind the backlog) counts one turn: neither the
    replay of the backlog nor a restart that reloads it all from the journal forgets its id
    before its copy comes back."""
    from claude_autoharness.daemon.book import KEEP_EVENT_IDS
    from claude_autoharness.protocol import messages as m

    backlog = KEEP_EVENT_IDS + 10
    for i in range(backlog):
        spool_record(pre_tool("old", tool_use_id=f"toolu_{i}"), f"{i:032x}", i)
    stop, eid = event("Stop", "live"), "f" * 32
    core = Core(load_config())
    core.load()
    try:
        await core.hooks.cmd_hook(m.Hook(payload=json.dumps(stop).encode(), id=eid))
        spool_record(stop, eid, backlog + 1)  # the hook's copy, behind the backlog
        assert await core.spool.replay() == backlog + 1
        assert core.book.state.turns.user == 1
    finally:
        core.book.close()  # a crash: no snapshot, the journal holds the whole backlog after the Stop
    spool_record(stop, eid, backlog + 2)  # a copy the crash left behind
    core = Core(load_config())
    core.load()
    try:
        await core.spool.replay()
        assert core.book.state.turns.user == 1 and core.book.state.events.duplicates == 1
    finally:
        core.book.close()


@pytest.mark.anyio
async def test_spool_replay_skips_fifos_symlinks_and_oversized_records(home, tmp_path):
    """Entries in the spool that are no record of ours (a FIFO, a symlink to a valid record
    elsewhere, one over the size limit) are never opened for blocking, followed or counted; the
    real record next to them counts once; they are moved to quarantine as they are (the
    symlink's target untouched), so the spool is not left with entries pending forever."""
    from claude_autoharness.protocol import spool as files

    spool_record(pre_tool("hostile"), "1" * 32, 1)
    d = paths.spool_dir()
    os.mkfifo(os.path.join(d, f"{2:020d}.{'2' * 32}"), 0o600)
    outside = tmp_path / "elsewhere"
    outside.write_bytes(envelope(pre_tool("hostile"), "3" * 32))
    os.symlink(outside, os.path.join(d, f"{3:020d}.{'3' * 32}"))
    with open(os.path.join(d, f"{4:020d}.{'4' * 32}"), "wb") as f:
        f.truncate(files.MAX_RECORD + 1)  # sparse: large without using the disk
    core = Core(load_config())
    core.load()
    try:
        assert await core.spool.replay() == 1  # (a FIFO opened blocking would hang here)
        assert core.book.state.sessions["hostile"].activity == 1
        assert os.listdir(d) == [] and outside.read_bytes().startswith(b'{"type":"hook"')
        moved = [os.path.basename(q).split(".")[1] for q in quarantine.files()]
        assert sorted(moved) == ["2" * 32, "3" * 32, "4" * 32]
        assert core.book.state.events.rejected == 3
    finally:
        core.book.close()


@pytest.mark.anyio
async def test_long_session_read_late_from_its_transcript_counts_each_call_once(home):
    """A session with more calls than it remembers ids of, whose PreToolUse events (spooled
    while the daemon was down) are replayed before its transcript is read: no call counts
    twice (an id pushed out used to count again, and push out the next), and a call newer than
    all of them that only the transcript shows still counts."""
    from claude_autoharness.daemon import sessions as sm
    from claude_autoharness.protocol import messages as m

    started = 1_796_087_400.0
    core = Core(load_config(), clock=lambda: started)
    core.load()
    t = home["claude"] / "projects" / "-tmp-long" / "long.jsonl"
    t.parent.mkdir(parents=True)
    base = {"session_id": "long", "transcript_path": str(t), "cwd": "/tmp/long"}
    n = sm.KEEP_TOOL_IDS + 44

    def assistant(i: int) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(started + 1 + i))
        return json.dumps({"type": "assistant", "timestamp": stamp, "message": {
            "role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{i}",
                                              "name": "Bash", "input": {}}]}}) + "\n"

    try:
        t.write_text("".join(assistant(i) for i in range(n + 1)))  # the last: no hook event
        for i in range(n):  # each hook fires just after its call is written
            p = dict(base, hook_event_name="PreToolUse", tool_name="Bash", tool_use_id=f"toolu_{i}")
            await core.hooks.cmd_hook(m.Hook(payload=json.dumps(p).encode(), id=f"{i + 1:032x}",
                                             ts=started + 1.5 + i), from_spool=True)
        core.watcher.scan_path(t)
        assert core.hooks.count_transcript_calls(core.witness.take()) == 1
        s = core.book.state.sessions["long"]
        assert (s.calls_hook, s.calls_transcript, s.activity) == (n, 1, n + 1)
    finally:
        core.book.close()


@pytest.mark.anyio
async def test_kill9_around_a_snapshot_counts_nothing_twice(home, monkeypatch):
    """kill -9 after a snapshot is written but before the journal segments it covers are
    dropped, then right after a whole snapshot: each restart reads the snapshot and only the
    journal records newer than it, so the turn, the job, the counts and the event counters are
    there once."""
    from claude_autoharness.protocol import messages as m

    monkeypatch.setenv("AUTOHARNESS_REFLECT_EVERY", "2")

    async def send(core, i: int, payload: dict) -> None:
        await core.hooks.cmd_hook(m.Hook(payload=json.dumps(payload).encode(), id=f"{i:032x}"))

    def check(core) -> None:
        st = core.book.state
        s = st.sessions["cmp"]
        assert (s.activity, s.calls_hook) == (1, 3)
        assert st.turns.user == 1 and len(st.jobs) == 1 and st.events.received == 4

    core = Core(load_config())
    core.load()
    for i, p in enumerate([pre_tool("cmp"), pre_tool("cmp"), event("Stop", "cmp")]):
        await send(core, i, p)
    data, _ = core.book.snapshot_bytes()  # the journal moves on to a new segment
    write_private(paths.snapshot_file(), data)  # the snapshot is on disk...
    await send(core, 3, pre_tool("cmp"))
    core.book.close()  # ...and the crash comes before the segments it covers are dropped
    core = Core(load_config())
    core.load()
    check(core)
    await core.book.persist(snapshot=True)  # a whole snapshot, then the crash
    core.book.close()
    core = Core(load_config())
    core.load()
    try:
        check(core)
    finally:
        core.book.close()


def test_hook_never_spools_through_a_state_dir_that_is_a_symlink(home):
    """A state dir that is a symlink, even to a private directory of the user's, gets no
    record: the hook does not follow it."""
    mod = load_hook()
    real = home["tmp"] / "real-state"
    real.mkdir(mode=0o700)
    state = Path(paths.state_dir())
    state.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    state.symlink_to(real)
    assert mod.spool(str(state), "1.x", b"{}") is False
    assert list(real.iterdir()) == []
