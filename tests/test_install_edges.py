"""The edges of an installation: which install delivered an event and what the model is told,
duplicate hooks, a vanished install, junk on stdin, `stop`/`restart`, and `install --remove`
giving back what `install --force` replaced. Real daemon, real hook client, real CLI."""

import fcntl
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from claude_autoharness.client import install
from claude_autoharness.client import settings as settings_mod
from claude_autoharness.client.ctl import main as ctl_main
from claude_autoharness.protocol import framing, paths, replies
from claude_autoharness.protocol import messages as m
from conftest import REPO
from harness import BIN, HOOK, Daemon, ctl, event, frame, hook, send_raw, wait_for
from marker_support import assistant, marker, text_blocks

MARKER = marker("run-tests-first", "convention", "Run the tests before committing, because CI "
                "is slow.")


def sh(cmd: str, data: bytes, env: dict) -> subprocess.CompletedProcess:
    """A hook command run as Claude Code runs it: through /bin/sh, the event on stdin."""
    return subprocess.run(["/bin/sh", "-c", cmd], input=data, capture_output=True, env=env,
                          timeout=90)


@pytest.fixture
def project(home):
    """A project whose earlier transcript holds one unprocessed marker."""
    proj = home["tmp"] / "proj"
    proj.mkdir()
    tdir = home["claude"] / "projects" / paths.project_slug(str(proj))
    tdir.mkdir(parents=True)
    old = tdir / "old-session.jsonl"
    old.write_text(json.dumps(assistant(text_blocks("Done.\n\n" + MARKER))) + "\n")
    return {"proj": proj, "tdir": tdir}


def start_event(project, sid: str, source: str = "startup") -> dict:
    transcript = project["tdir"] / f"{sid}.jsonl"
    transcript.touch()
    return event("SessionStart", sid, cwd=str(project["proj"]), source=source,
                 transcript_path=str(transcript))


def context(r: subprocess.CompletedProcess) -> str:
    return json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"] if r.stdout else ""


# ---- which install delivered the event ----------------------------------------------------


def test_the_plugins_hook_is_told_the_plugins_command_names(home, project):
    """A session started through the plugin's shim (hooks/run-hook, `autoharness-hook` on
    PATH) is told `→ Run: /autoharness:save-learnings`, the name the plugin's command has; one
    started through the settings install's command is told `/save-learnings`."""
    d = Daemon(home["home"])
    try:
        env = dict(os.environ, CLAUDE_PLUGIN_ROOT=str(REPO),
                   PATH=os.pathsep.join([str(BIN), "/usr/bin", "/bin"]))
        via_plugin = sh(settings_mod.PLUGIN_HOOK, json.dumps(start_event(project, "s-plugin")).encode(),
                        env)
        assert via_plugin.returncode == 0 and not via_plugin.stderr
        text = context(via_plugin)
        assert "1 unprocessed marker" in text and "→ Run: /autoharness:save-learnings" in text
        cmd = settings_mod.settings_command(HOOK, settings_mod.script_python(HOOK))
        via_settings = sh(cmd, json.dumps(start_event(project, "s-settings")).encode(),
                          dict(os.environ))
        text = context(via_settings)
        assert "→ Run: /save-learnings" in text and "autoharness:" not in text
    finally:
        d.stop()


def test_two_hooks_delivering_one_start_inject_the_context_once(home, project):
    """The plugin and a settings install both deliver a session's start (two event ids): the
    first gets the context, the second none; the same event sent again (a retry whose reply
    was lost) still gets it; another session, or a later `compact` start, gets its own."""
    d = Daemon(home["home"])
    try:
        ev = start_event(project, "s-dup")
        first = hook(ev, env={"AUTOHARNESS_VIA": "plugin"})
        second = hook(ev, env={"AUTOHARNESS_VIA": "settings"})
        assert "/autoharness:save-learnings" in context(first)
        assert second.returncode == 0 and second.stdout == b""
        body = (b'{"type":"hook","v":1,"id":"%s","ts":1.0,"payload":%s}'
                % (b"e" * 32, json.dumps(start_event(project, "s-retry")).encode()))
        replies = [send_raw(d.sock, frame(body)) for _ in range(2)]
        assert all(b"additionalContext" in rep for rep in replies), replies
        assert context(hook(start_event(project, "s-other")))
        assert context(hook(dict(ev, source="compact")))
        assert d.status()["events"]["by_kind"]["SessionStart"] == 5  # each counted once
    finally:
        d.stop()


# ---- the settings command: fast, and silent when its program is gone ----------------------


def test_settings_command_runs_the_hook_with_its_interpreter_isolated(home):
    """The installed command starts the hook's own interpreter with `-I -S`; it counts the
    event like the script does, and `install` recognises the form as its own."""
    python = settings_mod.script_python(HOOK)
    assert python and os.path.isabs(python)
    cmd = settings_mod.settings_command(HOOK, python)
    assert f"{python} -I -S {HOOK}" in cmd
    assert settings_mod.is_counting(cmd) and settings_mod.hook_program(cmd) == HOOK
    assert settings_mod.hook_interpreter(cmd) == python and settings_mod.is_guarded(cmd)
    d = Daemon(home["home"])
    try:
        r = sh(cmd, json.dumps(event("PreToolUse", "s-fast", tool_name="Bash",
                                     tool_use_id="toolu_1")).encode(), dict(os.environ))
        assert r.returncode == 0 and not r.stderr
        wait_for(lambda: d.status()["events"]["by_kind"].get("PreToolUse") == 1)
    finally:
        d.stop()


def test_a_vanished_install_is_silent_and_doctor_says_how_to_reinstall(home, short_tmp):
    """Hooks wired to an installation that is gone (its venv deleted, or only its script)
    exit 0 with no output at all, so Claude Code shows nothing; `doctor` fails the hooks check
    naming what is missing and the command that wires this installation again."""
    gone = short_tmp / "venv" / "bin"
    gone.mkdir(parents=True)
    (gone / "python3").symlink_to(sys.executable)
    script = gone / "autoharness-hook"
    script.write_bytes(Path(HOOK).read_bytes())
    cmd = settings_mod.settings_command(str(script), str(gone / "python3"))
    settings = settings_mod.wire({}, cmd)
    (home["claude"] / "settings.json").write_text(json.dumps(settings))
    ev = json.dumps(event("Stop", "s-gone")).encode()
    script.unlink()  # the script gone, the interpreter still there
    r = sh(cmd, ev, dict(os.environ))
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
    (gone / "python3").unlink()  # the whole venv gone
    r = sh(cmd, ev, dict(os.environ))
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
    out = json.loads(ctl("doctor", "--json", "--project", str(short_tmp)).stdout)
    [check] = [c for c in out["checks"] if c["name"] == "hooks"]
    assert not check["ok"] and str(gone / "python3") in check["detail"]
    assert "exits 0 in silence" in check["detail"]
    assert "autoharnessctl install --scope user" in check["fix"]
    assert ctl("install").returncode == 0  # the old form is recognised and replaced
    wired = json.loads((home["claude"] / "settings.json").read_text())
    cmds = [c for _, _, c in settings_mod.iter_entries(wired) if settings_mod.is_counting(c)]
    assert cmds and all(settings_mod.hook_program(c) == HOOK for c in cmds)


def test_install_upgrades_the_plain_script_form(home):
    """Settings wired by an earlier version (the bare hook path) are rewritten to the guarded
    `-I -S` form, one counting group per event, and `--remove` takes out either form."""
    old = settings_mod.wire({}, HOOK)
    (home["claude"] / "settings.json").write_text(json.dumps(old))
    assert ctl("install").returncode == 0
    new = json.loads((home["claude"] / "settings.json").read_text())
    counting = [c for ev, _, c in settings_mod.iter_entries(new) if settings_mod.is_counting(c)]
    assert len(counting) == len(settings_mod.EVENTS) and all(settings_mod.is_guarded(c) for c in counting)
    assert ctl("install", "--remove").returncode == 0
    left = json.loads((home["claude"] / "settings.json").read_text())
    assert not [c for _, _, c in settings_mod.iter_entries(left) if settings_mod.is_ours(c)]


# ---- junk on stdin ------------------------------------------------------------------------


DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize("junk", [b"not json", DEEP, b'{"session_id": NaN'],
                         ids=["not-json", "deep", "truncated"])
def test_junk_is_rejected_once_and_never_spooled(home, junk):
    """An event the daemon refuses as malformed is counted as rejected once: the error says not
    to retry, the hook spools nothing, nothing is quarantined and `doctor` finds no spool or
    quarantine problem. With no daemon at all the hook drops it too."""
    d = Daemon(home["home"])
    try:
        r = hook(junk)
        assert r.returncode == 0 and r.stdout == b""
        st = d.status()
        assert st["events"]["rejected"] == 1 and st["spool"]["pending"] == 0
        body = b'{"type":"hook","v":1,"id":"x","ts":1.0,"payload":' + junk + b"}"
        reply = json.loads(send_raw(d.sock, frame(body))[4:])
        assert reply["type"] == "error" and reply["retry"] is False
        assert not os.listdir(paths.spool_dir()) if os.path.isdir(paths.spool_dir()) else True
        out = json.loads(ctl("doctor", "--json").stdout)
        bad = {c["name"] for c in out["checks"] if not c["ok"]}
        assert not bad & {"spool", "quarantine"}, out
    finally:
        d.stop()
    r = hook(junk)  # no daemon
    assert r.returncode == 0
    assert not os.path.isdir(paths.spool_dir()) or not os.listdir(paths.spool_dir())
    assert not os.path.isdir(paths.quarantine_dir()) or not os.listdir(paths.quarantine_dir())


def test_a_real_event_without_a_daemon_is_still_spooled(home):
    """The other side of dropping junk: a well-formed event that reached no daemon is spooled,
    and replayed (counted) when the daemon starts."""
    r = hook(event("PreToolUse", "s-spool", tool_name="Bash", tool_use_id="toolu_9"))
    assert r.returncode == 0 and len(os.listdir(paths.spool_dir())) == 1
    d = Daemon(home["home"])
    try:
        wait_for(lambda: d.status()["events"]["by_kind"].get("PreToolUse") == 1)
    finally:
        d.stop()


# ---- stop and restart ---------------------------------------------------------------------


def test_stop_with_nothing_running_succeeds_and_restart_starts(home):
    """`stop` with no daemon says so and exits 0 (so `stop; start` starts one); `restart`
    starts one when none runs, and replaces a running one with a new process."""
    r = ctl("stop")
    assert r.returncode == 0 and "not running" in r.stdout and not r.stderr
    r = ctl("restart")
    assert r.returncode == 0, r.stderr
    first = json.loads(ctl("status", "--json").stdout)["pid"]
    try:
        r = ctl("restart")
        assert r.returncode == 0 and f"stopping autoharnessd (pid {first})" in r.stdout
        second = json.loads(ctl("status", "--json").stdout)["pid"]
        assert second != first
    finally:
        st = json.loads(ctl("status", "--json").stdout or "{}")
        r = ctl("stop")
    pid = st["pid"]
    assert r.returncode == 0 and f"stopped autoharnessd (pid {pid})" in r.stdout, r
    # `stop` returned once the process was gone (or only waiting to be reaped by init)
    assert not os.path.exists(f"/proc/{pid}") or "zombie" in Path(
        f"/proc/{pid}/status").read_text().lower()
    assert "restart" in ctl("--help").stdout


class StoppingDaemon:
    """What `stop` sees of a daemon: a socket that answers Stop with its pid, and the
    single-instance lock, held until `exit()` (a real daemon persists its state in between)."""

    PID = 4242

    def __init__(self):
        os.makedirs(os.path.dirname(paths.lock_file()), mode=0o700, exist_ok=True)
        self.lock = os.open(paths.lock_file(), os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        os.write(self.lock, f"{self.PID}\n".encode())
        self.exited = threading.Event()
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        os.makedirs(os.path.dirname(paths.socket_path()), mode=0o700, exist_ok=True)
        self.srv.bind(paths.socket_path())
        self.srv.listen(4)
        threading.Thread(target=self._answer_stop, daemon=True).start()

    def _answer_stop(self):
        conn, _ = self.srv.accept()
        with conn:
            framing.recv_frame(conn, 30)
            reply = m.Ok(data=replies.Stopping(stopping=True, pid=self.PID))
            conn.sendall(framing.frame(m.encode(reply)))
        self.srv.close()
        os.unlink(paths.socket_path())

    def exit(self):
        self.exited.set()
        os.close(self.lock)

    def succeeded(self):
        """Its successor holds the lock now (socket activation started one on the next hook
        event): the lock file names another pid."""
        os.ftruncate(self.lock, 0)
        os.pwrite(self.lock, b"4343\n", 0)
        self.exited.set()


def test_stop_returns_only_once_the_daemon_has_let_go_of_its_lock(home, capsys):
    """`stop` waits past the reply until the daemon's lock is released (its process exited
    after persisting), so `stop && start` never finds the old daemon still holding it."""
    daemon = StoppingDaemon()
    threading.Timer(0.3, daemon.exit).start()
    with pytest.raises(SystemExit) as e:
        ctl_main(["stop"])
    assert e.value.code == 0
    assert daemon.exited.is_set()
    assert capsys.readouterr().out == f"stopped autoharnessd (pid {daemon.PID})\n"


def test_stop_knows_the_daemon_gone_when_a_successor_holds_the_lock(home, capsys):
    """Under socket activation a hook can start the next daemon while `stop` waits: the lock
    held by another pid means the stopped one is gone, and `stop` succeeds at once."""
    daemon = StoppingDaemon()
    threading.Timer(0.3, daemon.succeeded).start()
    try:
        with pytest.raises(SystemExit) as e:
            ctl_main(["stop"])
        assert e.value.code == 0 and daemon.exited.is_set()
        assert capsys.readouterr().out == f"stopped autoharnessd (pid {daemon.PID})\n"
    finally:
        daemon.exit()


def test_stop_gives_up_on_a_daemon_that_agreed_but_never_exits(home, capsys, monkeypatch):
    """A daemon that agreed to stop but still holds its lock after the wait: `stop` exits 1
    saying so, with its log and the `kill` that ends it."""
    from claude_autoharness.client.verbs import stop

    monkeypatch.setattr(stop, "STOP_WAIT_S", 0.2)
    daemon = StoppingDaemon()
    try:
        with pytest.raises(SystemExit) as e:
            ctl_main(["stop"])
    finally:
        daemon.exit()
    err = capsys.readouterr().err
    assert e.value.code == 1
    assert "agreed to stop but still runs after 0.2s" in err and f"`kill {daemon.PID}`" in err
    assert paths.log_file() in err


# ---- install --remove gives back what install replaced -------------------------------------


def test_remove_puts_back_the_users_own_command_file(home):
    """`install --force` replaces the user's own learn.md (kept in a backup); `--remove` puts
    it back byte for byte with its mode, removes the save-learnings.md it added, and leaves
    the commands dir (which was the user's) in place."""
    cdir = home["claude"] / "commands"
    cdir.mkdir()
    mine = b"---\ndescription: my own learn\n---\nDo my thing \xe2\x9c\x93 without trailing newline"
    (cdir / "learn.md").write_bytes(mine)
    os.chmod(cdir / "learn.md", 0o640)
    r = ctl("install")
    assert r.returncode == 1 and "--force" in r.stderr
    r = ctl("install", "--force")
    assert r.returncode == 0, r.stderr
    assert (cdir / "learn.md").read_bytes() == install.command_text("learn.md")
    assert ctl("install", "--force").returncode == 0  # a second run keeps the original known
    r = ctl("install", "--remove")
    assert r.returncode == 0, r.stderr
    assert (cdir / "learn.md").read_bytes() == mine
    assert os.stat(cdir / "learn.md").st_mode & 0o777 == 0o640
    assert not (cdir / "save-learnings.md").exists() and cdir.is_dir()
    assert "put back" in r.stdout and str(cdir / "learn.md") in r.stdout
    assert not (home["claude"] / "settings.json").exists()  # install created it: gone


def test_the_offline_report_names_the_command_in_effect(home, project):
    """`learnings report` from a terminal names `/autoharness:save-learnings` when only the
    plugin is installed, and `/save-learnings` once the settings install added that command."""
    (home["claude"] / "settings.json").write_text(json.dumps(
        {"enabledPlugins": {"autoharness@autoharness": True}}))
    args = ("learnings", "report", "--previous-transcripts", "--project", str(project["proj"]))
    r = ctl(*args)
    assert r.returncode == 0 and "→ Run: /autoharness:save-learnings" in r.stdout, r
    assert ctl("install", "--force").returncode == 0
    r = ctl(*args)
    assert "→ Run: /save-learnings" in r.stdout and "autoharness:" not in r.stdout, r.stdout


def test_install_over_the_plugin_refuses_then_warns_when_forced(home):
    """With the plugin enabled, `install` refuses and names both ways out; `--force` installs
    and says, as a warning, that both sets of hooks now run."""
    (home["claude"] / "settings.json").write_text(json.dumps(
        {"enabledPlugins": {"autoharness@market": True}}))
    r = ctl("install")
    assert r.returncode == 1 and "--force" in r.stderr and "autoharness@market" in r.stderr
    r = ctl("install", "--force")
    assert r.returncode == 0 and "warning:" in r.stdout and "autoharness@market" in r.stdout
