"""`autoharnessctl service`: rendered systemd units and LaunchAgent, the CLI against fake service
managers, and systemd-style socket activation of the real daemon. Units are rendered into temp
dirs; the real ~/.config/systemd and ~/Library are never touched."""

import json
import os
import plistlib
import shutil
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from claude_autoharness.client import service, service_launchd, service_systemd
from claude_autoharness.protocol import paths
from conftest import REPO
from harness import CTL, DAEMON, Daemon, ctl


def run(*args, env):
    return subprocess.run([CTL, *args], capture_output=True, text=True, timeout=60, env=env)


def fake_tool(bindir: Path, name: str, log: Path, script: str = "") -> None:
    """A stand-in for systemctl/launchctl that records its arguments (one call per line)."""
    bindir.mkdir(exist_ok=True)
    p = bindir / name
    p.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\n{script}\nexit 0\n')
    p.chmod(0o755)


def test_rendered_units_have_the_required_settings(home, short_tmp):
    """The service is Type=notify, Restart=on-failure, runs the absolute autoharnessd, carries
    the environment, and has no RuntimeDirectory=; the socket is private at %t by default and
    follows AUTOHARNESS_HOME when that is set."""
    out = short_tmp / "units"
    service_systemd.write_systemd(str(out), DAEMON, {"PATH": "/usr/bin:/bin"})
    unit = (out / "autoharness.service").read_text()
    assert "Type=notify\n" in unit and "Restart=on-failure\n" in unit
    assert f"ExecStart={DAEMON}\n" in unit and os.path.isabs(DAEMON)
    assert 'Environment="PATH=/usr/bin:/bin"\n' in unit
    assert "RuntimeDirectory=" not in unit.replace("No RuntimeDirectory=", "")
    assert "{{" not in unit
    sock = (out / "autoharness.socket").read_text()
    assert "ListenStream=%t/autoharness/autoharness.sock\n" in sock
    assert "SocketMode=0600\n" in sock and "DirectoryMode=0700\n" in sock
    service_systemd.write_systemd(str(out), DAEMON, service.service_env())
    sock = (out / "autoharness.socket").read_text()
    assert f"ListenStream={paths.socket_path()}\n" in sock
    unit = (out / "autoharness.service").read_text()
    assert f'Environment="AUTOHARNESS_HOME={home["home"]}"' in unit


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed on this machine")
@pytest.mark.parametrize("with_home", [False, True], ids=["default", "AUTOHARNESS_HOME"])
def test_rendered_units_pass_systemd_analyze_verify(home, short_tmp, with_home):
    """`systemd-analyze --user verify` accepts both rendered units without a complaint."""
    out = short_tmp / "units"
    env = service.service_env() if with_home else {"PATH": os.environ.get("PATH", os.defpath)}
    written = service_systemd.write_systemd(str(out), DAEMON, env)
    rt = short_tmp / "rt"
    rt.mkdir(mode=0o700)
    r = subprocess.run(["systemd-analyze", "--user", "verify", *written], capture_output=True,
                       text=True, timeout=60, cwd=out,
                       env=dict(os.environ, HOME=str(short_tmp), XDG_RUNTIME_DIR=str(rt)))
    complaints = [ln for ln in r.stderr.splitlines() if "autoharness" in ln]
    assert r.returncode == 0 and not complaints, r.stderr


def test_plist_parses_with_required_keys(home, short_tmp):
    """The LaunchAgent parses with plistlib: Label, absolute ProgramArguments, KeepAlive,
    RunAtLoad, and absolute log paths under the state dir; written private."""
    p = service_launchd.write_launchd(str(short_tmp / "agents"), DAEMON, paths.log_file(),
                              service.service_env())
    data = plistlib.loads(Path(p).read_bytes())
    assert data["Label"] == "com.autoharness.daemon"
    assert data["ProgramArguments"] == [DAEMON] and os.path.isabs(DAEMON)
    assert data["RunAtLoad"] is True and "KeepAlive" in data
    for key in ("StandardOutPath", "StandardErrorPath"):
        assert os.path.isabs(data[key])
        assert data[key].startswith(paths.state_dir() + os.sep)
    assert data["EnvironmentVariables"]["AUTOHARNESS_HOME"] == str(home["home"])
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    template = plistlib.loads((REPO / "launchd" / "com.autoharness.daemon.plist").read_bytes())
    assert template["Label"] == data["Label"]


def test_no_service_manager_explains_autostart(home, short_tmp):
    """Without systemctl or launchctl on PATH: status says so and explains the hook's autostart
    (exit 0); install says the same and exits 1."""
    env = dict(os.environ, PATH=str(short_tmp / "empty"))
    r = run("service", "status", env=env)
    assert r.returncode == 0, r.stderr
    assert "no service manager" in r.stdout and "autostart" in r.stdout
    r = run("service", "install", env=env)
    assert r.returncode == 1
    assert "autostart" in r.stderr and "autoharnessd" in r.stderr


def test_install_and_uninstall_with_systemctl(home, short_tmp):
    """With a (recording) systemctl: install stops a daemon the hook had autostarted, writes
    both units into the user unit dir, reloads, enables them with --now and restarts the service
    (so a reinstall runs the new unit); status reads is-active; uninstall disables and removes
    them."""
    log = short_tmp / "calls"
    fake_tool(short_tmp / "bin", "systemctl", log, 'case "$*" in *is-active*) echo active;; esac')
    env = dict(os.environ, PATH=str(short_tmp / "bin"),
               XDG_CONFIG_HOME=str(short_tmp / "cfg"))
    running = Daemon(home["home"])  # started by a hook earlier: must make way for the service
    try:
        r = run("service", "install", env=env)
        assert r.returncode == 0, r.stderr
        assert running.proc.wait(20) == 0
        assert f"stopped the running autoharnessd (pid {running.proc.pid})" in r.stdout
    finally:
        running.stop()
    unit_dir = short_tmp / "cfg" / "systemd" / "user"
    assert f"ExecStart={DAEMON}" in (unit_dir / "autoharness.service").read_text()
    assert (unit_dir / "autoharness.socket").exists()
    calls = log.read_text().splitlines()
    assert "--user daemon-reload" in calls
    assert "--user enable --now autoharness.socket autoharness.service" in calls
    assert calls.index("--user daemon-reload") < calls.index("--user restart autoharness.service")
    r = run("service", "status", env=env)
    assert r.returncode == 0 and "autoharness.socket: active" in r.stdout
    r = run("service", "uninstall", env=env)
    assert r.returncode == 0, r.stderr
    assert not (unit_dir / "autoharness.service").exists()
    assert "--user disable --now autoharness.service autoharness.socket" in log.read_text()


def test_systemctl_without_user_manager_says_what_to_do(home, short_tmp):
    """systemctl present but no user manager (containers, no login session): install exits 1,
    names the cause and the fix, and says autostart covers it meanwhile."""
    log = short_tmp / "calls"
    fake_tool(short_tmp / "bin", "systemctl", log,
              'echo "Failed to connect to bus: No medium found" >&2; exit 1')
    env = dict(os.environ, PATH=str(short_tmp / "bin"),
               XDG_CONFIG_HOME=str(short_tmp / "cfg"))
    r = run("service", "install", env=env)
    assert r.returncode == 1
    assert "Failed to connect to bus" in r.stderr and "enable-linger" in r.stderr
    assert "autostart" in r.stderr


def test_launchd_install_and_uninstall(home, short_tmp, monkeypatch):
    """On macOS: install renders the LaunchAgent and bootstraps it into gui/<uid>; uninstall
    boots it out and removes the file (a recording launchctl stands in)."""
    log = short_tmp / "calls"
    fake_tool(short_tmp / "bin", "launchctl", log)
    monkeypatch.setenv("PATH", str(short_tmp / "bin"))
    agents = short_tmp / "agents"
    assert service_launchd.Launchd(str(agents)).act("install") == 0
    plist = agents / "com.autoharness.daemon.plist"
    assert plistlib.loads(plist.read_bytes())["ProgramArguments"] == [DAEMON]
    uid = os.getuid()
    assert f"bootstrap gui/{uid} {plist}" in log.read_text().splitlines()
    assert service_launchd.Launchd(str(agents)).act("uninstall") == 0
    assert not plist.exists()
    assert f"bootout gui/{uid}/com.autoharness.daemon" in log.read_text()


def test_socket_activation_serves_on_the_passed_listener(home, short_tmp):
    """Like systemd: a pre-bound listening socket passed as fd 3 with LISTEN_FDS=1 and
    LISTEN_PID = the daemon's pid → the daemon adopts it (no bind of its own), reports READY=1,
    `autoharnessctl status` works over it, and on exit the socket (systemd's) is left alone."""
    run_dir = short_tmp / "sys"
    run_dir.mkdir(mode=0o700)
    sock_path = str(run_dir / "activated.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock_path)
    listener.listen(16)
    os.chmod(sock_path, 0o600)
    inode = os.stat(sock_path).st_ino
    notify_addr = str(short_tmp / "notify")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(notify_addr)
    notify.settimeout(20)
    env = dict(os.environ, AUTOHARNESS_SOCKET=sock_path, NOTIFY_SOCKET=notify_addr)
    fd = listener.fileno()
    # A trampoline puts the listener on fd 3, names its own pid and execs the daemon (same pid),
    # as systemd does.
    trampoline = ("import os, sys; os.dup2(int(sys.argv[1]), 3); "
                  "os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS='1'); "
                  "os.execv(sys.argv[2], sys.argv[2:])")
    with open(short_tmp / "log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-c", trampoline, str(fd), DAEMON],
                                pass_fds=(fd,), env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        assert b"READY=1" in notify.recv(4096)
        r = ctl("status", "--json", env=env)
        assert r.returncode == 0, r.stderr
        st = json.loads(r.stdout)
        assert st["pid"] == proc.pid
        assert os.stat(sock_path).st_ino == inode  # served on ours, not re-bound
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        notify.close()
    assert proc.returncode == 0, (short_tmp / "log").read_text()
    assert os.path.exists(sock_path) and os.stat(sock_path).st_ino == inode
    listener.close()


def test_service_help_lists_the_actions():
    """`autoharnessctl service --help` names every action."""
    r = ctl("service", "--help")
    assert r.returncode == 0
    for action in ("install", "uninstall", "start", "stop", "status"):
        assert action in r.stdout
