"""End-to-end: the installed daemon, hook client and CLI as real processes on temp dirs."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import REAL
from harness import DAEMON, HOOK, Daemon, ctl, event, frame, hook, pre_tool, send_raw, wait_for


@pytest.fixture
def daemon(home):
    d = Daemon(home["home"], env={"AUTOHARNESS_REFLECT_EVERY": "3"})
    yield d
    d.stop()


def session(st, sid):
    return next((s for s in st["sessions"] if s["session_id"] == sid), None)


def real_payloads():
    """Hook payload shapes from real logs, re-keyed back to Claude Code's field name."""
    out = []
    for line in (REAL / "fasthooks" / "sample_hook_logs.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rec["hook_event_name"] = rec.pop("event")
        rec.pop("ts", None)
        out.append(rec)
    return out


def test_counting_and_threshold_reset(daemon):
    """PreToolUse hooks count; Stop at reflect_every resets to 0 and leaves one pending job."""
    for _ in range(4):
        assert hook(pre_tool("s1")).returncode == 0
    assert session(daemon.status(), "s1")["activity"] == 4
    hook(event("Stop", "s1"))
    st = daemon.status()
    assert session(st, "s1")["activity"] == 0
    assert st["jobs"]["pending"] == 1
    assert st["events"]["by_kind"]["PreToolUse"] == 4


def test_stop_below_threshold_keeps_count(daemon):
    """Stop under the threshold changes nothing."""
    hook(pre_tool("s2"))
    hook(event("Stop", "s2"))
    st = daemon.status()
    assert session(st, "s2")["activity"] == 1 and st["jobs"]["pending"] == 0


def test_session_end_with_and_without_tail(daemon):
    """SessionEnd with activity queues a job; SessionEnd with none does not."""
    hook(pre_tool("tail"))
    hook(event("SessionEnd", "tail", reason="exit"))
    hook(event("SessionStart", "empty", source="startup"))
    hook(event("SessionEnd", "empty", reason="exit"))
    st = daemon.status()
    assert st["jobs"]["pending"] == 1
    assert session(st, "tail") is None and session(st, "empty") is None


def test_real_hook_payload_shapes_are_accepted(daemon):
    """Every payload shape from a real hook log decodes and counts (none rejected)."""
    payloads = real_payloads()
    for p in payloads:
        assert hook(p).returncode == 0
    st = daemon.status()
    assert st["events"]["received"] == len(payloads)
    assert st["events"]["rejected"] == 0
    n_pre = sum(1 for p in payloads if p["hook_event_name"] == "PreToolUse")
    assert st["events"]["by_kind"].get("PreToolUse", 0) == n_pre


def test_child_session_denies_writes_and_counts_nothing(daemon):
    """AUTOHARNESS_CHILD_SESSION=1: Write/Edit/MultiEdit/NotebookEdit get a deny; nothing counts."""
    env = {"AUTOHARNESS_CHILD_SESSION": "1"}
    for tool in ("Write", "Edit", "MultiEdit", "NotebookEdit"):
        r = hook(pre_tool("child", tool), env=env)
        assert r.returncode == 0
        out = json.loads(r.stdout)["hookSpecificOutput"]
        assert out["hookEventName"] == "PreToolUse" and out["permissionDecision"] == "deny"
    r = hook(pre_tool("child", "Read"), env=env)
    assert r.returncode == 0 and r.stdout == b""
    st = daemon.status()
    assert st["events"]["received"] == 0 and session(st, "child") is None


def test_claude_code_child_variable_does_not_gate(daemon):
    """CLAUDE_CODE_CHILD_SESSION=1 (set by Claude Code on every hook) changes nothing."""
    r = hook(pre_tool("main", "Write"), env={"CLAUDE_CODE_CHILD_SESSION": "1"})
    assert r.returncode == 0 and b"deny" not in r.stdout
    assert session(daemon.status(), "main")["activity"] == 1


HOSTILE = [
    b"",
    b"   \n",
    b"not json at all",
    b"\x00\xff\xfe binary \x80",
    b'{"hook_event_name": "PreToolUse"}',
    b'{"session_id": 42, "hook_event_name": "PreToolUse"}',
    b'{"session_id": "../../etc/passwd", "hook_event_name": "PreToolUse"}',
    b'{"session_id": "' + b"x" * 129 + b'", "hook_event_name": "PreToolUse"}',
    b'{"session_id": "ok", "hook_event_name": ["PreToolUse"]}',
    b'[1, 2, 3]',
    b'{"session_id": "ok", "hook_event_name": "PreToolUse"',
    b'"just a string"',
]


def test_hostile_input_is_rejected_and_counted(daemon):
    """Malformed, binary, wrong-typed and hostile-id payloads: hook exits 0, daemon stays up,
    events.rejected counts each, no session is created."""
    for data in HOSTILE:
        r = hook(data)
        assert r.returncode == 0, data
        assert r.stdout == b""
    st = daemon.status()
    assert st["events"]["rejected"] == len(HOSTILE)
    assert st["sessions"] == []
    hook(pre_tool("after"))
    assert session(daemon.status(), "after")["activity"] == 1


def test_huge_payload_is_accepted(daemon):
    """A Write carrying ≥ 8 MiB of content is forwarded whole and counted."""
    big = pre_tool("big", "Write")
    big["tool_input"] = {"file_path": "/tmp/x", "content": "a" * (9 * 1024 * 1024)}
    r = hook(big)
    assert r.returncode == 0
    assert session(daemon.status(), "big")["activity"] == 1


def test_unknown_event_names_are_counted_and_ignored(daemon):
    """An event name Claude Code may add later is counted as unknown and touches no session."""
    hook(event("SomeFutureEvent", "fut"))
    st = daemon.status()
    assert st["events"]["unknown_kinds"] == 1 and st["events"]["rejected"] == 0
    assert session(st, "fut") is None


def test_bad_frames_get_error_replies_and_daemon_survives(daemon):
    """Oversize header, garbage body and a half-sent frame get errors or a close, never a crash."""
    reply = send_raw(daemon.sock, (200 * 1024 * 1024).to_bytes(4, "big"))
    assert b'"too_large"' in reply
    reply = send_raw(daemon.sock, frame(b"\xff garbage"))
    assert b'"malformed"' in reply
    reply = send_raw(daemon.sock, frame(b'{"type":"nope","v":1}'))
    assert b'"unknown_type"' in reply
    # abandoned mid-frame: the daemon must still serve others meanwhile
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(daemon.sock)
    s.sendall((1000).to_bytes(4, "big") + b"{")
    hook(pre_tool("alive"))
    assert session(daemon.status(), "alive")["activity"] == 1
    s.close()
    assert daemon.proc.poll() is None


def test_daemon_down_spools_then_replays(home):
    """With no daemon the hook exits 0 and spools; the daemon replays the spool at start so the
    counts are as if it had been up, including a job from a threshold Stop."""
    env = {"AUTOHARNESS_REFLECT_EVERY": "3"}
    for _ in range(3):
        assert hook(pre_tool("down")).returncode == 0
    hook(event("Stop", "down"))
    hook(pre_tool("down"))
    spool = home["home"] / "state" / "spool"
    records = sorted(spool.iterdir())
    assert len(records) == 5 and oct(spool.stat().st_mode & 0o777) == "0o700"
    assert all(oct(r.stat().st_mode & 0o777) == "0o600" for r in records)
    d = Daemon(home["home"], env=env)
    try:
        st = d.status()
        assert session(st, "down")["activity"] == 1
        assert st["jobs"]["pending"] == 1
        assert st["spool"] == {"replayed": 5, "pending": 0, "lost": 0}
        assert list(spool.iterdir()) == []
    finally:
        d.stop()


def daemons_for(home) -> list[int]:
    """Pids of daemon processes whose environment names this test's AUTOHARNESS_HOME."""
    mark = f"AUTOHARNESS_HOME={home}".encode()
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"claude_autoharness.daemon" in cmd and mark in env:
            out.append(int(pid))
    return out


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="counts processes through /proc")
def test_autostart_starts_exactly_one_daemon(home):
    """20 concurrent hooks with no daemon and autostart on start one daemon, not 20, and no
    event is lost."""
    env = dict(os.environ, AUTOHARNESS_AUTOSTART="1")
    procs = [subprocess.Popen([HOOK], stdin=subprocess.PIPE, env=env) for _ in range(20)]
    for p in procs:
        p.communicate(json.dumps(pre_tool("auto")).encode(), timeout=60)
        assert p.returncode == 0
    sock = str(home["home"] / "run" / "autoharness.sock")
    from harness import connectable
    wait_for(lambda: connectable(sock), what="autostarted daemon")
    wait_for(lambda: (json.loads(ctl("status", "--json").stdout)["sessions"] or [{}])[0]
             .get("activity") == 20, what="all 20 events counted")
    pid = json.loads(ctl("status", "--json").stdout)["pid"]
    time.sleep(0.5)  # any extra spawned daemon would have had time to show up
    assert daemons_for(home["home"]) == [pid]
    ctl("stop")
    wait_for(lambda: subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0,
             what="daemon exit")


def test_kill9_loses_no_acknowledged_job(home):
    """kill -9 right after jobs were acknowledged: after restart every job is still there."""
    env = {"AUTOHARNESS_REFLECT_EVERY": "1", "AUTOHARNESS_PERSIST_INTERVAL_S": "3600"}
    d = Daemon(home["home"], env=env)
    for i in range(5):
        hook(pre_tool(f"k{i}"))
        hook(event("Stop", f"k{i}"))
    assert d.status()["jobs"]["pending"] == 5
    d.kill9()
    d2 = Daemon(home["home"], env=env)
    try:
        assert d2.status()["jobs"]["pending"] == 5
    finally:
        d2.stop()


def test_sigterm_persists_counters(home):
    """SIGTERM exits 0 after a snapshot: counters come back after a restart."""
    env = {"AUTOHARNESS_PERSIST_INTERVAL_S": "3600"}
    d = Daemon(home["home"], env=env)
    for _ in range(7):
        hook(pre_tool("term"))
    assert d.stop(signal.SIGTERM) == 0
    d2 = Daemon(home["home"], env=env)
    try:
        assert session(d2.status(), "term")["activity"] == 7
    finally:
        d2.stop()


def test_a_persist_journals_what_changed_and_leaves_the_snapshot(home):
    """Persists between snapshots append the changes (the counters a hook moved) to the
    journal instead of rewriting the snapshot; a kill -9 then loses none of them."""
    env = {"AUTOHARNESS_PERSIST_INTERVAL_S": "0.05", "AUTOHARNESS_WATCH": "0"}
    d = Daemon(home["home"], env=env)
    d.stop()  # a clean stop writes a snapshot
    snap = home["home"] / "state" / "snapshot.json"
    journal = home["home"] / "state" / "journal.jsonl"
    before = snap.stat()
    d = Daemon(home["home"], env=env)
    for _ in range(4):
        hook(pre_tool("snap"), env=env)
    wait_for(lambda: b'["events","by_kind","PreToolUse"],4]' in journal.read_bytes(),
             what="the counters journaled")
    d.kill9()
    after = snap.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    d2 = Daemon(home["home"], env=env)
    try:
        st = d2.status()
        assert session(st, "snap")["activity"] == 4
        assert st["events"]["by_kind"]["PreToolUse"] == 4
    finally:
        d2.stop()


@pytest.mark.parametrize("garbage", [b"{\"schema\": 1, \"sessions\": {", b"\x00\x01garbage",
                                     b'{"schema": "one"}'])
def test_corrupt_snapshot_is_quarantined(home, garbage):
    """A truncated or garbage snapshot is moved aside, reported in status, and the daemon starts."""
    state = home["home"] / "state"
    state.mkdir(mode=0o700)
    (state / "snapshot.json").write_bytes(garbage)
    d = Daemon(home["home"])
    try:
        q = d.status()["persistence"]["quarantined"]
        assert len(q) == 1 and "snapshot.json" in q[0]
        assert open(q[0], "rb").read() == garbage
    finally:
        d.stop()


def test_torn_journal_keeps_good_records(home):
    """A journal with a torn last line: good records are applied, the file is quarantined."""
    env = {"AUTOHARNESS_REFLECT_EVERY": "1", "AUTOHARNESS_PERSIST_INTERVAL_S": "3600"}
    d = Daemon(home["home"], env=env)
    hook(pre_tool("j"))
    hook(event("Stop", "j"))
    d.kill9()
    journal = home["home"] / "state" / "journal.jsonl"
    with open(journal, "ab") as f:
        f.write(b'{"seq": 99, "op": "jo')
    d2 = Daemon(home["home"], env=env)
    try:
        st = d2.status()
        assert st["jobs"]["pending"] == 1
        assert any("journal" in q for q in st["persistence"]["quarantined"])
    finally:
        d2.stop()


def test_single_instance(daemon, home):
    """A second daemon on the same state dir exits non-zero with a clear message."""
    r = subprocess.run([DAEMON], capture_output=True, text=True, timeout=90)
    assert r.returncode != 0
    assert "already running" in r.stderr
    assert daemon.proc.poll() is None and daemon.status()


def test_stale_socket_is_replaced(home):
    """A socket file left by a crashed daemon (nobody listening) is replaced."""
    run = home["home"] / "run"
    run.mkdir(mode=0o700)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(run / "autoharness.sock"))
    s.close()  # bound, never listening: connect is refused
    d = Daemon(home["home"])
    try:
        assert d.status()["pid"] == d.proc.pid
    finally:
        d.stop()


def test_live_socket_is_never_unlinked(daemon, home, short_tmp):
    """A daemon with another state dir pointed at a live socket refuses and leaves it alone."""
    other = short_tmp / "other"
    other.mkdir(mode=0o700)
    env = dict(os.environ, AUTOHARNESS_HOME=str(other), AUTOHARNESS_SOCKET=daemon.sock)
    r = subprocess.run([DAEMON], capture_output=True, text=True, env=env, timeout=90)
    assert r.returncode == 1 and "live daemon" in r.stderr
    assert daemon.status()["pid"] == daemon.proc.pid


def test_too_open_socket_dir_is_an_error_naming_the_fix(home):
    """A socket directory open to others stops the daemon with the chmod fix in the message."""
    run = home["home"] / "run"
    run.mkdir()
    os.chmod(run, 0o755)
    r = subprocess.run([DAEMON], capture_output=True, text=True, timeout=90)
    assert r.returncode == 1
    assert f"chmod 700 {run}" in r.stderr


def test_socket_and_dirs_are_private(daemon, home):
    """Socket 0600 in a 0700 dir; state dir and state files 0600/0700."""
    run = home["home"] / "run"
    state = home["home"] / "state"
    assert os.stat(daemon.sock).st_mode & 0o777 == 0o600
    assert run.stat().st_mode & 0o777 == 0o700
    assert state.stat().st_mode & 0o777 == 0o700
    for f in state.iterdir():
        if f.is_file():
            assert f.stat().st_mode & 0o777 == 0o600, f


def test_overlong_socket_path_is_a_clear_error(home, short_tmp):
    """A socket path over the OS limit gives an error that says so and how to fix it."""
    deep = short_tmp / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True, mode=0o700)
    os.chmod(short_tmp / ("d" * 60), 0o700)
    env = dict(os.environ, AUTOHARNESS_SOCKET=str(deep / "autoharness.sock"))
    r = subprocess.run([DAEMON], capture_output=True, text=True, env=env, timeout=90)
    assert r.returncode == 1
    assert "OS limit" in r.stderr and "AUTOHARNESS_SOCKET" in r.stderr


def test_invalid_config_is_an_error_naming_the_key(home):
    """An invalid value stops the daemon with a message naming the key."""
    (home["home"] / "config.toml").write_text("reflect_every = 0\n")
    r = subprocess.run([DAEMON], capture_output=True, text=True, timeout=90)
    assert r.returncode == 2 and "reflect_every" in r.stderr


@pytest.mark.skipif(os.getuid() != 0, reason="running a client as another user needs root")
def test_peer_uid_is_checked_even_with_loose_modes(daemon, home):
    """A client running as another uid is refused even after the modes are loosened."""
    os.chmod(home["tmp"], 0o755)
    os.chmod(home["home"], 0o755)
    os.chmod(home["home"] / "run", 0o755)
    os.chmod(daemon.sock, 0o777)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child becomes another user, then connects
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.settimeout(10)
            c.connect(daemon.sock)
            try:  # the daemon may answer and close before we even send
                c.sendall(frame(b'{"type":"status","v":1}'))
            except BrokenPipeError:
                pass
            os.write(w, c.recv(65536))
        except BaseException as e:
            os.write(w, repr(e).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        reply = f.read()
    os.waitpid(pid, 0)
    assert b'"peer"' in reply and b'"sessions"' not in reply
    assert daemon.status()["events"]["peer_rejected"] == 1


def test_status_without_daemon_says_how_to_start(home):
    """`status` with no daemon exits 1 and tells how to start one."""
    r = ctl("status")
    assert r.returncode == 1
    assert "autoharnessctl start" in r.stderr and "not running" in r.stderr


def test_status_json_has_the_contract_keys(daemon):
    """status --json carries every documented key."""
    hook(pre_tool("k"))
    st = daemon.status()
    for key in ("version", "protocol", "pid", "uptime_s", "socket", "sessions", "events", "jobs",
                "spool", "persistence"):
        assert key in st
    assert set(st["sessions"][0]) >= {"session_id", "activity", "watermark", "transcript_path",
                                      "last_event_at"}
    assert set(st["events"]) >= {"received", "rejected", "by_kind"}
    assert set(st["jobs"]) >= {"pending", "running", "done", "failed"}
    assert set(st["spool"]) >= {"replayed", "pending"}
    assert set(st["persistence"]) >= {"last_snapshot_at", "quarantined"}
    r = ctl("status")
    assert r.returncode == 0 and "sessions:" in r.stdout and "k" in r.stdout


def test_flush_queues_jobs_for_named_sessions(daemon):
    """flush SESSION queues a flush job and resets; flush --all covers every active session."""
    hook(pre_tool("f1"))
    hook(pre_tool("f2"))
    r = ctl("flush", "f1")
    assert r.returncode == 0 and "flush job" in r.stdout and "f1" in r.stdout
    st = daemon.status()
    assert session(st, "f1")["activity"] == 0 and session(st, "f2")["activity"] == 1
    r = ctl("flush", "--all")
    assert "f2" in r.stdout
    assert daemon.status()["jobs"]["pending"] == 2
    assert ctl("flush").returncode == 2  # a usage error
    # nothing left to flush: each case says so once, in words that fit it
    r = ctl("flush", "--all")
    assert (r.returncode, r.stdout) == (0, "nothing to flush: no session has activity that "
                                           "was not reflected on yet\n")
    r = ctl("flush", "f1")
    assert r.stdout == "nothing to flush for f1: no activity that was not reflected on yet\n"
    r = ctl("flush", "zzz")  # one message, the error's, not a second one on stdout
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr.count("\n") == 1 and "unknown session: zzz" in r.stderr


def test_stop_verb_shuts_down_cleanly(daemon):
    """`autoharnessctl stop` returns once the daemon has persisted, removed its socket and
    logged its stop; the daemon exits 0."""
    r = ctl("stop")
    assert r.returncode == 0 and r.stdout == f"stopped autoharnessd (pid {daemon.proc.pid})\n"
    assert not os.path.exists(daemon.sock)
    assert json.loads(daemon.output().splitlines()[-1])["event"] == "stopped"
    assert daemon.proc.wait(15) == 0


def test_ready_notification(home, short_tmp):
    """With NOTIFY_SOCKET set the daemon sends READY=1 once it listens."""
    addr = str(short_tmp / "notify")
    n = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    n.bind(addr)
    n.settimeout(15)
    d = Daemon(home["home"], env={"NOTIFY_SOCKET": addr}, wait=False)
    try:
        msg = n.recv(4096)
        assert b"READY=1" in msg
    finally:
        n.close()
        d.stop()


def test_sighup_rereads_config(home):
    """SIGHUP re-reads the config: a new reflect_every takes effect without a restart, and the
    log names the changed settings a running daemon read once (they wait for the next start)."""
    cfg = home["home"] / "config.toml"
    cfg.write_text("reflect_every = 100\nmax_connections = 200\n")
    d = Daemon(home["home"])
    try:
        hook(pre_tool("hup"))
        hook(pre_tool("hup"))
        cfg.write_text("reflect_every = 2\nmax_connections = 100\n")
        d.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "apply at the next start" in d.output(), what="reload log")
        [line] = [ln for ln in d.output().splitlines() if "apply at the next start" in ln]
        assert "max_connections" in line and "reflect_every" not in line
        hook(event("Stop", "hup"))
        assert d.status()["jobs"]["pending"] == 1
    finally:
        d.stop()


def test_logs_never_contain_event_contents(home):
    """The daemon's log carries no prompt or tool input text."""
    d = Daemon(home["home"], env={"AUTOHARNESS_REFLECT_EVERY": "1"})
    hook(event("UserPromptSubmit", "log", prompt="SECRET-PROMPT-TEXT"))
    ev = pre_tool("log")
    ev["tool_input"] = {"command": "echo SECRET-TOOL-INPUT"}
    hook(ev)
    hook(event("Stop", "log"))
    d.stop()
    out = d.output()
    assert "job created" in out
    assert "SECRET-PROMPT-TEXT" not in out and "SECRET-TOOL-INPUT" not in out


def test_hook_import_boundary(home):
    """On the PreToolUse path the hook imports none of msgspec, anyio, structlog, json, socket
    (beyond what the bare interpreter itself imports at start), daemon up or down."""
    data = json.dumps(pre_tool("imp")).encode()

    def imported(args, stdin=b""):
        r = subprocess.run([sys.executable, "-X", "importtime", *args], input=stdin,
                           capture_output=True, timeout=60)
        return {line.split("|")[-1].strip()
                for line in r.stderr.decode().splitlines() if line.startswith("import time:")}

    # The baseline includes importing claude_autoharness.protocol.paths (os and sys only, checked below),
    # so an editable install's import finder does not count against the hook.
    baseline = imported(["-c", "import claude_autoharness.protocol.paths"])
    for up in (False, True):
        d = Daemon(home["home"]) if up else None
        try:
            r = subprocess.run([sys.executable, "-X", "importtime", HOOK], input=data,
                               capture_output=True, timeout=60)
        finally:
            if d:
                d.stop()
        mods = {line.split("|")[-1].strip().split(".")[0]
                for line in r.stderr.decode().splitlines() if line.startswith("import time:")}
        assert "_socket" in mods or not up
        # An editable (development) install's import finder loads `re` itself; CI installs
        # the wheel, where `re` must not appear either.
        editable = any(name.startswith("__editable__") for name in mods | baseline)
        banned = ("msgspec", "anyio", "structlog", "json", "socket", "platformdirs")
        for name in banned + (() if editable else ("re",)):
            assert name not in mods, (name, up)
    import ast

    import claude_autoharness.protocol.paths as p
    tree = ast.parse(open(p.__file__).read())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert names == {"os", "sys"}


def test_loosened_state_files_are_tightened_at_start(home):
    """A state file someone made world-readable is set back to 0600 when the daemon starts."""
    state = home["home"] / "state"
    state.mkdir(mode=0o700)
    journal = state / "journal.jsonl"
    journal.write_bytes(b"")
    os.chmod(journal, 0o644)
    d = Daemon(home["home"])
    try:
        assert journal.stat().st_mode & 0o777 == 0o600
    finally:
        d.stop()
