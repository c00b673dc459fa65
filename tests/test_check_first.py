"""Commands that change several things check first and change nothing when they cannot finish:
`install` with a state dir it cannot use writes no settings and no commands; `restart` with a
config the new daemon would refuse leaves the running daemon running. Real CLI, real daemon."""

import json
import os

from claude_autoharness.protocol import paths
from harness import ctl


def _tree(d) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for root, dirs, files in os.walk(d):
        for n in dirs:
            out[os.path.join(root, n)] = None
        for n in files:
            with open(os.path.join(root, n), "rb") as f:
                out[os.path.join(root, n)] = f.read()
    return out


def test_install_with_a_state_path_that_is_a_file_writes_nothing(home):
    home["home"].rmdir()
    home["home"].write_text("not a directory\n")
    settings = home["claude"] / "settings.json"
    settings.write_text('{"theme": "dark"}\n')
    before = _tree(home["claude"])
    r = ctl("install")
    assert r.returncode == 1 and r.stdout == ""
    assert "nothing was changed" in r.stderr
    assert f"mv {home['home']} {home['home']}.old" in r.stderr  # the fix that fits
    assert "permissions" not in r.stderr
    assert _tree(home["claude"]) == before
    # with the path fixed, the same install goes through, and --remove gives the file back
    home["home"].unlink()
    home["home"].mkdir(mode=0o700)
    assert ctl("install").returncode == 0
    assert ctl("install", "--remove").returncode == 0
    assert _tree(home["claude"]) == before


def test_install_with_a_commands_path_it_cannot_write_writes_no_settings(home):
    (home["claude"] / "commands").write_text("in the way\n")
    before = _tree(home["claude"])
    r = ctl("install")
    assert r.returncode == 1 and "nothing was changed" in r.stderr, r.stderr
    assert str(home["claude"] / "commands") in r.stderr
    assert _tree(home["claude"]) == before
    assert not os.path.exists(os.path.join(paths.install_dir(), "record.json"))


def test_restart_with_an_invalid_config_leaves_the_running_daemon_running(home):
    assert ctl("start").returncode == 0
    try:
        pid = json.loads(ctl("status", "--json").stdout)["pid"]
        cfg = paths.config_file()
        os.makedirs(os.path.dirname(cfg), mode=0o700, exist_ok=True)
        with open(cfg, "w") as f:
            f.write("[reflector]\nreflect_evry = 3\n")
        r = ctl("restart")
        assert r.returncode == 1
        assert "not restarting" in r.stderr and "reflect_evry" in r.stderr
        assert "left as it is" in r.stderr
        st = ctl("status", "--json")
        assert st.returncode == 0 and json.loads(st.stdout)["pid"] == pid
        os.unlink(cfg)
        r = ctl("restart")
        assert r.returncode == 0, r.stderr
        assert json.loads(ctl("status", "--json").stdout)["pid"] != pid
    finally:
        ctl("stop")


def test_the_daemon_is_autoharnessd_to_pgrep_however_it_was_started(home):
    """`pgrep autoharnessd` finds the daemon `start` ran (by its name and by its command
    line), and one run as `python -m claude_autoharness.daemon` is named autoharnessd too."""
    import subprocess
    import sys

    from harness import Daemon

    assert ctl("start").returncode == 0
    try:
        pid = json.loads(ctl("status", "--json").stdout)["pid"]
        for flags in (["-x"], ["-f"]):
            found = subprocess.run(["pgrep", *flags, "autoharnessd"], capture_output=True,
                                   text=True).stdout.split()
            assert str(pid) in found, flags
    finally:
        assert ctl("stop").returncode == 0
    d = Daemon(home["home"], argv=[sys.executable, "-m", "claude_autoharness.daemon"])
    try:
        with open(f"/proc/{d.proc.pid}/comm") as f:
            assert f.read().strip() == "autoharnessd"
    finally:
        d.stop()


def test_hooks_delivered_by_the_plugin_and_the_settings_install_are_named(home):
    """`claude --plugin-dir` beside a settings install runs every hook twice; no settings file
    shows the flag, but the daemon hears each event from both: `status` and `doctor` say so
    and how to keep one."""
    from harness import Daemon, hook, pre_tool

    d = Daemon(home["home"])
    try:
        hook(pre_tool("s-one", tool_use_id="t1"), env={"AUTOHARNESS_VIA": "settings"})
        doctor = json.loads(ctl("doctor", "--json").stdout)
        assert next(c for c in doctor["checks"] if c["name"] == "delivery")["ok"]
        for via in ("plugin", "settings"):
            hook(pre_tool("s-twice", tool_use_id="t2"), env={"AUTOHARNESS_VIA": via})
        st = json.loads(ctl("status", "--json").stdout)
        assert st["delivery"]["both"] == 1 and st["delivery"]["last_session"] == "s-twice"
        assert "TWICE: 1 session had every hook run twice" in ctl("status").stdout
        doctor = json.loads(ctl("doctor", "--json").stdout)
        check = next(c for c in doctor["checks"] if c["name"] == "delivery")
        assert not check["ok"] and "s-twice" in check["detail"]
        assert "install --remove" in check["fix"] and "--plugin-dir" in check["fix"]
    finally:
        d.stop()


def test_remove_without_the_install_record_does_not_claim_the_settings_are_as_they_were(home):
    """The record of what an install created lives in the state dir: with it gone, `--remove`
    takes out autoharness's hooks and commands and says what it cannot tell from the user's
    (an empty settings file, an empty commands dir) instead of claiming all is as it was."""
    import shutil

    assert ctl("install").returncode == 0
    shutil.rmtree(paths.install_dir())
    r = ctl("install", "--remove")
    assert r.returncode == 0, r.stderr
    assert "as they were" not in r.stdout and "No record of this install was found" in r.stdout
    assert f"{home['claude'] / 'settings.json'} (now empty" in r.stdout
    assert f"{home['claude'] / 'commands'} (empty)" in r.stdout
    assert json.loads((home["claude"] / "settings.json").read_text()) == {}
