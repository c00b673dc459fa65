"""`autoharnessctl doctor`: one failing case per check (plain functions on plain inputs), each
with its fix, and the all-pass case against a real daemon with the hooks installed into a temp
CLAUDE_CONFIG_DIR and a fake `claude` on PATH."""

import json
import os
import socket
import subprocess
import threading
from collections import namedtuple
from pathlib import Path

import msgspec
import pytest

from claude_autoharness.client import checks, install, setup_checks
from claude_autoharness.client import settings as settings_mod
from claude_autoharness.client.verbs import doctor
from claude_autoharness.protocol import PROTOCOL, VERSION, framing, paths
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol import replies as r
from claude_autoharness.protocol.config import ReflectorConfig
from harness import BIN, CTL, HOOK, Daemon
from status_support import healthy_status

Usage = namedtuple("Usage", "total used free")


def src(data=None, label="user settings", path="/x/settings.json", error=None):
    return settings_mod.Source(label, path, data, error)


def wired(hook_cmd=HOOK) -> dict:
    return settings_mod.wire({}, hook_cmd)


def fake_claude(bindir: Path) -> Path:
    """An executable named `claude` that fails loudly if anything actually runs it."""
    bindir.mkdir(exist_ok=True)
    p = bindir / "claude"
    p.write_text("#!/bin/sh\necho 'fake claude: not expected to run' >&2\nexit 3\n")
    p.chmod(0o755)
    return p


status = healthy_status  # a healthy daemon's status, the `parts` named replaced


def assert_fails(check: checks.Check, name: str, *in_fix: str, in_detail: str = ""):
    assert check.name == name and check.ok is False, check
    assert check.fix, f"{name}: a failing check must say how to fix it"
    for s in in_fix:
        assert s in check.fix, (s, check.fix)
    assert in_detail in check.detail, (in_detail, check.detail)


# ---- one failing case per check ---------------------------------------------------------------


def test_daemon_unreachable():
    """No status: the daemon check fails and says how to start it."""
    c = checks.check_daemon(None, "daemon not running (no socket at /s): start it with "
                            "`autoharnessctl service start` or `autoharnessd`")
    assert_fails(c, "daemon", "autoharnessctl service start", "autoharnessd",
                 in_detail="no socket at /s")
    assert checks.check_daemon(status(pid=1, uptime_s=2, socket="/s"), None).ok


def test_version_mismatch():
    """A daemon of another version or protocol fails the version check: restart it."""
    c = checks.check_version(status(version="0.0.1", protocol=PROTOCOL + 1))
    assert_fails(c, "version", "autoharnessctl restart", in_detail="0.0.1")
    assert checks.check_version(status(version=VERSION, protocol=PROTOCOL)).ok


# What a daemon of another version might answer: its head, then a part of another shape.
FOREIGN = {"version": "0.0.9", "protocol": 0, "pid": 7, "socket": "/s", "jobs": "many"}


def test_status_of_another_shape_is_a_version_finding():
    """A status that does not decode into this client's Status: the version check fails naming
    the daemon's version, this client's and `autoharnessctl restart`; the
    daemon check still sees it running. A reply with no readable head at all says so."""
    answer = checks.read_status(FOREIGN)
    assert isinstance(answer, checks.Foreign)
    c = checks.check_version(answer)
    assert_fails(c, "version", "autoharnessctl restart", in_detail="0.0.9")
    assert VERSION in c.detail and "jobs" in c.detail  # both versions, and what did not decode
    assert checks.check_daemon(answer, None).detail.startswith("running, pid 7")
    garbage = checks.check_version(checks.read_status(["not", "a", "status"]))
    assert_fails(garbage, "version", "autoharnessctl restart",
                 in_detail="of an unknown version")
    assert isinstance(checks.read_status(msgspec.to_builtins(status())), r.Status)


def test_doctor_against_a_daemon_of_another_version(home):
    """A process on the socket answers `status` in another version's shape: doctor runs every
    check without raising; the version check is the finding with the restart, the checks that
    need the daemon's status say they were not checked, and none reports a check crash."""
    sock_path = paths.socket_path()
    os.makedirs(os.path.dirname(sock_path), mode=0o700, exist_ok=True)
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(sock_path)
    os.chmod(sock_path, 0o600)
    srv.listen()

    def answer_once():
        conn, _ = srv.accept()
        with conn:
            framing.recv_frame(conn, 5)
            conn.sendall(framing.frame(m.encode(m.Ok(data=FOREIGN))))

    t = threading.Thread(target=answer_once, daemon=True)
    t.start()
    try:
        checks = {c.name: c for c in doctor.gather(None)}
    finally:
        t.join(10)
        srv.close()
    assert checks["daemon"].ok and "pid 7" in checks["daemon"].detail
    assert_fails(checks["version"], "version", "autoharnessctl restart",
                 in_detail="0.0.9")
    for name in ("spool", "persistence", "jobs"):
        assert checks[name].ok and "another version" in checks[name].detail, checks[name]
    assert not [c for c in checks.values() if c.detail.startswith("could not check")]


@pytest.mark.parametrize("case", ["dir-open", "dir-foreign", "sock-open", "not-a-socket",
                                  "sock-foreign"])
def test_socket_permissions(short_tmp, case):
    """The socket dir must be 0700 and ours, the socket 0600, ours, and a socket."""
    d = short_tmp / "run"
    d.mkdir(mode=0o700)
    path = d / "autoharness.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    os.chmod(path, 0o600)
    uid = os.getuid()
    try:
        assert checks.check_socket(str(path)).ok
        if case == "dir-open":
            os.chmod(d, 0o755)
            assert_fails(checks.check_socket(str(path)), "socket", f"chmod 700 {d}")
        elif case == "dir-foreign":
            assert_fails(checks.check_socket(str(path), uid=uid + 1), "socket", "rm -r",
                         in_detail="owned by uid")
        elif case == "sock-open":
            os.chmod(path, 0o666)
            assert_fails(checks.check_socket(str(path)), "socket", f"chmod 600 {path}")
        elif case == "not-a-socket":
            os.unlink(path)
            path.write_text("")
            assert_fails(checks.check_socket(str(path)), "socket", "mv", in_detail="not a socket")
        else:  # a socket in our own dir but owned by someone else
            def foreign(p):
                r = os.lstat(p)
                if str(p) != str(path):
                    return r
                return os.stat_result((r.st_mode, r.st_ino, r.st_dev, r.st_nlink, uid + 1,
                                       r.st_gid, r.st_size, 0, 0, 0))
            assert_fails(checks.check_socket(str(path), lstat=foreign), "socket", "rm",
                         in_detail="owned by uid")
    finally:
        s.close()


def test_hooks_not_installed():
    """No autoharness hooks anywhere (and no plugin): fix is `autoharnessctl install`."""
    c = setup_checks.check_hooks([src({"model": "opus"}), src(None, "project settings", "/p")],
                           {"PATH": str(BIN)})
    assert_fails(c, "hooks", "autoharnessctl install")


def test_hooks_point_at_a_missing_executable():
    """Hooks that run an autoharness-hook that no longer exists fail, naming the path."""
    c = setup_checks.check_hooks([src(wired("/gone/venv/bin/autoharness-hook"))], {"PATH": str(BIN)})
    assert_fails(c, "hooks", "autoharnessctl install --scope user",
                 in_detail="/gone/venv/bin/autoharness-hook")


def test_hooks_script_with_a_missing_interpreter(short_tmp):
    """A hook script whose `#!` interpreter is gone (a moved venv) cannot run: it fails."""
    script = short_tmp / "autoharness-hook"
    script.write_text("#!/gone/venv/bin/python\n")
    script.chmod(0o755)
    c = setup_checks.check_hooks([src(wired(str(script)))], {"PATH": str(BIN)})
    assert_fails(c, "hooks", "autoharnessctl install", in_detail="/gone/venv/bin/python")


def test_hooks_incomplete_or_unguarded():
    """A missing event or a missing child write guard is reported with the repair command."""
    partial = wired()
    del partial["hooks"]["SessionEnd"]
    c = setup_checks.check_hooks([src(partial, "project settings", "/p/.claude/settings.json")],
                           {"PATH": str(BIN)})
    assert_fails(c, "hooks", "--scope project", in_detail="SessionEnd")
    unguarded = wired()
    unguarded["hooks"]["PreToolUse"] = [g for g in unguarded["hooks"]["PreToolUse"]
                                        if not g.get("matcher")]
    assert_fails(setup_checks.check_hooks([src(unguarded)], {"PATH": str(BIN)}), "hooks",
                 in_detail="guard")


def test_hooks_unreadable_settings():
    """A malformed settings file fails the hooks check with the parse error."""
    c = setup_checks.check_hooks([src(None, error="/x/settings.json is not valid JSON (line 2)")], {})
    assert_fails(c, "hooks", "/x/settings.json", in_detail="not valid JSON")


def test_hooks_plugin_without_the_hook_on_path(short_tmp):
    """The plugin runs autoharness-hook from PATH: enabled but not on PATH fails."""
    plugin = {"enabledPlugins": {"autoharness@autoharness": True}}
    c = setup_checks.check_hooks([src(plugin)], {"PATH": str(short_tmp)})
    assert_fails(c, "hooks", "PATH", in_detail="plugin")
    assert setup_checks.check_hooks([src(plugin)], {"PATH": str(BIN)}).ok


def warns(c, *in_fix: str, in_detail: str = "") -> None:
    assert c.ok and c.warning, c
    assert in_detail in c.detail, c.detail
    for s in in_fix:
        assert s in c.fix, c.fix


def test_duplicate_hook_groups():
    """Duplicate hooks as Claude Code runs them: the same command at two scopes (or twice in
    one file) runs once, so it passes; the plugin plus a settings install, or two different
    installations' commands, both run: a warning (each call starts two hooks, still counted
    once) whose fix says how to keep one."""
    both = wired()
    both["enabledPlugins"] = {"autoharness@market": True}
    warns(setup_checks.check_duplicates([src(both)]), "--remove --scope user",
          "claude plugin disable autoharness@market", in_detail="2 different")
    same = setup_checks.check_duplicates([src(wired()), src(wired(), "project settings", "/p")])
    assert same.ok and not same.warning and "runs it once" in same.detail, same
    other = wired("/other/venv/bin/autoharness-hook")
    warns(setup_checks.check_duplicates([src(wired()), src(other, "project settings", "/p")]),
          "--scope project", in_detail="/other/venv")
    twice = wired()
    twice["hooks"]["PreToolUse"].append({"hooks": [{"type": "command", "command": HOOK}]})
    c = setup_checks.check_duplicates([src(twice)])
    assert c.ok and not c.warning, c
    assert setup_checks.check_duplicates([src(wired())]).ok
    assert "warn  duplicates" in doctor.format_human([setup_checks.check_duplicates([src(both)])])


def test_commands_missing_or_cli_not_on_path(short_tmp):
    """/learn and /save-learnings must be installed, and `autoharnessctl` must be on PATH."""
    cdir = short_tmp / "commands"
    assert_fails(setup_checks.check_commands([str(cdir)], False, {"PATH": str(BIN)}), "commands",
                 "autoharnessctl install")
    cdir.mkdir()
    for name in settings_mod.COMMANDS:
        (cdir / name).write_bytes(install.command_text(name))
    assert setup_checks.check_commands([str(cdir)], False, {"PATH": str(BIN)}).ok
    assert_fails(setup_checks.check_commands([str(cdir)], False, {"PATH": str(short_tmp)}), "commands",
                 "PATH", in_detail="not on PATH")


def test_invalid_config():
    """A config the daemon would refuse fails, naming the file to fix."""
    c = checks.check_config("/c/config.toml", "/c/config.toml: invalid config: `reflect_every` "
                            "must be > 0 (got 0)")
    assert_fails(c, "config", "/c/config.toml", in_detail="reflect_every")


def test_an_api_key_in_a_config_others_can_read_fails(home):
    """The docs keep the key in a 0600 file: a config others can read that holds one fails,
    through the CLI, with the chmod that fixes it; the same file at 0600 passes."""
    cfg = Path(paths.config_file())
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text('[reflector]\napi_key = "sk-ant-test-not-a-real-key"\n')
    cfg.chmod(0o644)
    out = subprocess.run([CTL, "doctor", "--json"], capture_output=True, text=True,
                         env=dict(os.environ))
    check = next(c for c in json.loads(out.stdout)["checks"] if c["name"] == "config")
    assert out.returncode == 1 and not check["ok"]
    assert "readable by everyone (mode 644)" in check["detail"]
    assert check["fix"].startswith(f"`chmod 600 {cfg}`")
    assert "sk-ant-test" not in out.stdout
    cfg.chmod(0o640)
    assert "its group" in checks.check_config(str(cfg), None).detail
    cfg.chmod(0o600)
    assert checks.check_config(str(cfg), None).ok
    cfg.write_text('[reflector]\nmodel = "claude-haiku-4-5"\n')
    cfg.chmod(0o644)  # no key in it: nothing to hide
    assert checks.check_config(str(cfg), None).ok


def test_no_reflector_backend(short_tmp):
    """No API key and no `claude` on PATH fails; the daemon's own view wins when it has one."""
    env = {"PATH": str(short_tmp / "empty")}
    c = checks.check_reflector(None, ReflectorConfig(), env, "/c/config.toml")
    assert_fails(c, "reflector", "ANTHROPIC_API_KEY", "claude")
    none = status(reflector=r.ReflectorInfo(
        backend="none", configured="auto", model="m", reason="no reflector backend: nope",
        tokens_today=0, tokens_total=0, daily_token_budget=None))
    assert_fails(checks.check_reflector(none, ReflectorConfig(), {"ANTHROPIC_API_KEY": "k"},
                                        "/c"), "reflector", in_detail="nope")
    assert checks.check_reflector(None, ReflectorConfig(), {"ANTHROPIC_API_KEY": "k"}, "/c").ok
    fake_claude(short_tmp / "bin")
    assert checks.check_reflector(None, ReflectorConfig(), {"PATH": str(short_tmp / "bin")},
                                  "/c").ok


def test_spool_backlog(short_tmp):
    """Spooled events fail the check: replayed only when the daemon (re)starts."""
    assert_fails(checks.check_spool(status(spool=r.SpoolInfo(replayed=0, pending=3)), "/s/spool"), "spool",
                 "autoharnessctl restart", in_detail="3 events")
    spool = short_tmp / "spool"
    spool.mkdir()
    (spool / "1.a").write_text('{"a":1}')
    (spool / "2.b").write_text('{"b":2}')
    (spool / ".3.c").write_text('{"c":')  # a hook still writing: not a record yet
    assert_fails(checks.check_spool(None, str(spool)), "spool", "autoharnessctl start",
                 in_detail="2 events")
    assert checks.check_spool(None, str(short_tmp / "none")).ok


def test_quarantined_files(short_tmp):
    """Quarantined files fail the check with where to look; from status or, when down, the dir."""
    c = checks.check_quarantine(status(persistence=r.PersistenceInfo(
        last_snapshot_at=None, quarantined=["/q/snapshot.json.1"], failing=None)), "/q")
    assert_fails(c, "quarantine", "/q", in_detail="snapshot.json.1")
    q = short_tmp / "quarantine"
    q.mkdir()
    (q / "journal.jsonl.7").write_text("x")
    assert_fails(checks.check_quarantine(None, str(q)), "quarantine", in_detail="journal.jsonl.7")


def test_failed_jobs():
    """Failed jobs fail the check, showing the last error when the daemon reports one."""
    last = r.LastError(job="j1", error="401 unauthorized", status="failed")
    c = checks.check_jobs(status(jobs=r.JobCounts(failed=2, failed_24h=2, done=5,
                                                  last_error=last)))
    assert_fails(c, "jobs", "autoharnessctl status", in_detail="401 unauthorized")
    assert checks.check_jobs(status(jobs=r.JobCounts(failed=0))).ok


def test_low_disk_space(short_tmp):
    """Under 100 MB free for the state dir fails (a missing state dir is checked at its parent)."""
    low = lambda p: Usage(10**9, 10**9, 50 * 2**20)  # noqa: E731
    c = checks.check_disk(str(short_tmp / "not" / "yet"), usage=low)
    assert_fails(c, "disk", "AUTOHARNESS_HOME", in_detail="50 MB")
    assert checks.check_disk(str(short_tmp), usage=lambda p: Usage(1, 1, 200 * 2**20)).ok


# ---- end to end -------------------------------------------------------------------------------


def test_doctor_fails_without_daemon_and_hooks(home):
    """Nothing installed, nothing running: exit 1; the JSON names the failing checks with fixes."""
    r = subprocess.run([CTL, "doctor", "--json"], capture_output=True, text=True, timeout=60,
                       cwd=home["tmp"])
    assert r.returncode == 1
    out = json.loads(r.stdout)
    assert out["ok"] is False
    bad = {c["name"]: c for c in out["checks"] if not c["ok"]}
    assert {"daemon", "hooks", "commands"} <= set(bad)
    assert all(c["fix"] for c in bad.values())
    human = subprocess.run([CTL, "doctor"], capture_output=True, text=True, timeout=60,
                           cwd=home["tmp"])
    assert human.returncode == 1
    assert any(ln.startswith("FAIL  daemon: ") for ln in human.stdout.splitlines())
    assert "      fix: " in human.stdout


def test_doctor_all_pass(home):
    """Real daemon, hooks and commands installed in the temp CLAUDE_CONFIG_DIR, a fake `claude`
    on PATH (for the daemon and for doctor): every check passes, exit 0, in both formats."""
    bindir = home["tmp"] / "bin"
    fake_claude(bindir)
    env = dict(os.environ, PATH=f"{bindir}:{BIN}:/usr/bin:/bin")
    r = subprocess.run([CTL, "install"], capture_output=True, text=True, timeout=60,
                       cwd=home["tmp"], env=env)
    assert r.returncode == 0, r.stderr
    d = Daemon(home["home"], env=env)
    try:
        r = subprocess.run([CTL, "doctor", "--json"], capture_output=True, text=True,
                           timeout=60, cwd=home["tmp"], env=env)
        out = json.loads(r.stdout)
        assert [c for c in out["checks"] if not c["ok"]] == [] and out["ok"] is True
        assert r.returncode == 0
        names = {c["name"] for c in out["checks"]}
        assert {"daemon", "version", "socket", "hooks", "duplicates", "reflector", "spool",
                "quarantine", "jobs", "disk"} <= names
        assert set(out["checks"][0]) == {"name", "ok", "detail", "fix", "warning"}
        r = subprocess.run([CTL, "doctor"], capture_output=True, text=True, timeout=60,
                           cwd=home["tmp"], env=env)
        assert r.returncode == 0
        assert all(ln.startswith("ok    ") for ln in r.stdout.splitlines()[:-1])
        assert r.stdout.splitlines()[-1] == "all checks passed"
    finally:
        d.stop()
