"""Nothing is written before its directory is known to be private, nothing is opened through a
link there, and no error echoes raw control characters; with a real second user as the
attacker where one is needed. Also: a hook event lost on a full disk is said, a FIFO as the
config blocks nothing, config strings are checked, and the fix for another user's directory
is never to take it over."""

import json
import os
import resource
import shutil
import subprocess
from pathlib import Path

import pytest

from claude_autoharness.client import checks
from claude_autoharness.protocol import config, private
from harness import CTL, DAEMON, HOOK, Daemon, ctl, event, hook, pre_tool, wait_for
from other_user import other_user  # noqa: F401 (a fixture)

EVIL_KEY = '"x\\nexport EVIL=1\\n# " = 1\n'  # a TOML key holding newlines


@pytest.fixture
def planted(other_user, short_tmp):  # noqa: F811
    """The victim's AUTOHARNESS_HOME inside a /tmp dir another user made first: that user has
    made the state dir (open to all), planted `daemon.log` as a link to the victim's
    `.bashrc`, and written a config whose unknown key holds newlines."""
    evil = Path(f"/tmp/ah-evil-{os.urandom(4).hex()}")
    other_user.run("mkdir", "-m", "777", str(evil))
    other_user.run("mkdir", "-m", "777", str(evil / "home"))
    other_user.run("mkdir", "-m", "777", str(evil / "home" / "state"))
    bashrc = short_tmp / ".bashrc"
    bashrc.write_text("# the victim's own\n")
    other_user.run("ln", "-s", str(bashrc), str(evil / "home" / "state" / "daemon.log"))
    other_user.python("open(__import__('sys').argv[1], 'w').write(__import__('sys').argv[2])",
                      str(evil / "home" / "config.toml"), EVIL_KEY).wait()
    yield {"home": evil / "home", "state": evil / "home" / "state", "bashrc": bashrc}
    shutil.rmtree(evil, ignore_errors=True)


def test_nothing_is_written_into_another_users_state_dir(home, planted, monkeypatch):
    """The hook's autostart (SessionStart and a tool call) and `autoharnessctl start` write
    nothing into the other user's state dir and never open the planted link: the victim's
    `.bashrc` is as it was, no daemon starts, and `start` says whose the dir is and to remove
    it or use another, never to take it over."""
    monkeypatch.setenv("AUTOHARNESS_HOME", str(planted["home"]))
    before = sorted(os.listdir(planted["state"]))
    env = {"AUTOHARNESS_AUTOSTART": "1"}
    assert hook(event("SessionStart", "s-victim", source="startup"), env=env).returncode == 0
    assert hook(pre_tool("s-victim"), env=env).returncode == 0
    r = ctl("start", "--timeout", "20")
    assert planted["bashrc"].read_text() == "# the victim's own\n"
    assert r.returncode == 1
    assert f"{planted['state']} is owned by uid" in r.stderr and "nothing was written" in r.stderr
    assert "remove it" in r.stderr and "chown" not in r.stderr
    assert planted["bashrc"].read_text() == "# the victim's own\n"
    assert sorted(os.listdir(planted["state"])) == before
    assert not (planted["home"] / "run").exists()  # no daemon made its socket dir


def test_a_config_error_never_echoes_a_control_character(home):
    """An unknown key with newlines in it: the daemon's refusal is one line on stderr, the
    newlines escaped; so is the CLI's."""
    (home["home"] / "config.toml").write_text(EVIL_KEY)
    r = subprocess.run([DAEMON], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "\nexport EVIL=1" not in r.stderr, r.stderr
    assert "unknown key `x\\nexport EVIL=1\\n# `" in r.stderr
    r = subprocess.run([CTL, "doctor"], capture_output=True, text=True, timeout=60)
    assert "\nexport EVIL=1" not in r.stdout + r.stderr


def test_start_never_writes_through_a_link_in_its_own_state_dir(home, short_tmp):
    """Even in the user's own private state dir, a link planted as `daemon.log` is not
    followed by `autoharnessctl start` (nor by the hook's autostart)."""
    state = home["home"] / "state"
    state.mkdir(mode=0o700)
    target = short_tmp / "target"
    target.write_text("mine\n")
    (state / "daemon.log").symlink_to(target)
    r = ctl("start", "--timeout", "20")
    assert r.returncode == 1 and "symbolic link" in r.stderr, r.stderr
    assert hook(pre_tool("s-link"), env={"AUTOHARNESS_AUTOSTART": "1"}).returncode == 0
    assert target.read_text() == "mine\n"


def _hook_on_a_full_disk(payload: dict, env: dict | None = None):
    """The real hook with a full disk for it alone: `ulimit -f 0`, so every write of a byte
    fails (EFBIG, as ENOSPC on a full disk) while an empty file can still be made."""
    def full():
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))

    return subprocess.run([HOOK], input=json.dumps(payload).encode(), capture_output=True,
                          timeout=60, env=dict(os.environ, **(env or {})), preexec_fn=full)


def test_an_event_lost_on_a_full_disk_is_said(home):
    """No daemon and a full disk: the hook can neither deliver nor spool the event. It still
    exits 0, says so on stderr, and leaves a marker; doctor warns before any daemon runs; the
    next daemon counts the loss in `status`, logs it, and doctor still shows it."""
    r = _hook_on_a_full_disk(pre_tool("s-full"))
    assert r.returncode == 0
    assert b"could not be kept" in r.stderr
    state = home["home"] / "state"
    assert os.listdir(state / "spool") == []
    c = {x["name"]: x for x in json.loads(ctl("doctor", "--json").stdout)["checks"]}
    assert c["spool"]["warning"] and "1 hook event lost" in c["spool"]["detail"]
    d = Daemon(home["home"])
    try:
        st = wait_for(lambda: (s := d.status())["spool"]["lost"] and s, what="the loss counted")
        assert st["spool"]["lost"] == 1
        assert "hook events lost" in d.output()
        assert not [n for n in os.listdir(state) if n.startswith("lost-event.")]
        out = ctl("status").stdout
        assert "LOST: 1 event" in out
        c = {x["name"]: x for x in json.loads(ctl("doctor", "--json").stdout)["checks"]}
        assert c["spool"]["warning"] and "1 hook event lost" in c["spool"]["detail"]
    finally:
        d.stop()


def test_a_fifo_as_config_blocks_no_hook_and_is_named(home, monkeypatch):
    """`config.toml` a FIFO (no writer): the hook, which reads `autostart` from it, returns at
    once and keeps its event; the daemon and doctor name the file and the fix."""
    monkeypatch.delenv("AUTOHARNESS_AUTOSTART")
    fifo = home["home"] / "config.toml"
    os.mkfifo(fifo)
    r = hook(pre_tool("s-fifo"), timeout=20)  # blocked forever on today's main
    assert r.returncode == 0
    assert len(os.listdir(home["home"] / "state" / "spool")) == 1
    r = subprocess.run([DAEMON], capture_output=True, text=True, timeout=20)
    assert r.returncode == 2 and "not a regular file" in r.stderr
    assert f"make {fifo} a readable regular file, or remove it" in r.stderr
    c = {x["name"]: x for x in json.loads(ctl("doctor", "--json", timeout=20).stdout)["checks"]}
    assert not c["config"]["ok"] and "not a regular file" in c["config"]["detail"]


@pytest.mark.parametrize("body, key, wants", [
    ('[reflector]\nbase_url = "file:///etc/passwd"\n', "reflector.base_url", "http:// or https://"),
    ('[reflector]\nbase_url = "http://"\n', "reflector.base_url", "with a host"),
    ('[reflector]\nmodel = ""\n', "reflector.model", "a model name, one word"),
    ('[reflector]\nmodel = "claude haiku"\n', "reflector.model", "a model name"),
    ('[reflector]\napi_key = "sk-ant-x\\n"\n', "reflector.api_key", "one line with no spaces"),
    ('[reflector]\nclaude_path = ""\n', "reflector.claude_path", "a program name or path"),
    ('[promoter]\ngit_branch = "-delete"\n', "promoter.git_branch", "a git branch name"),
    ('[promoter]\ngit_branch = "a..b"\n', "promoter.git_branch", "a git branch name"),
    ('[capture]\ntranscript_roots = ["rel/dir"]\n', "capture.transcript_roots", "absolute"),
])
def test_config_strings_are_checked(short_tmp, body, key, wants):
    """A string the daemon would use as a URL, a model, a key, a program, a branch or a root is
    checked; the error names the key, what it must be, the value, and the fix."""
    f = short_tmp / "config.toml"
    f.write_text(body)
    with pytest.raises(config.ConfigError) as e:
        config.load(str(f), {})
    assert e.value.key == key and wants in str(e.value)
    assert f"fix it in {f}" in e.value.fix
    assert "\n" not in str(e.value)


def test_config_strings_from_a_variable_name_it(short_tmp):
    with pytest.raises(config.ConfigError) as e:
        config.load(str(short_tmp / "none.toml"), {"AUTOHARNESS_REFLECTOR_BASE_URL": "ftp://x"})
    assert "AUTOHARNESS_REFLECTOR_BASE_URL='ftp://x'" in str(e.value)
    assert "unset AUTOHARNESS_REFLECTOR_BASE_URL" in e.value.fix
    good = {"AUTOHARNESS_REFLECTOR_BASE_URL": "https://llm.example:8443/v1"}
    assert config.load(str(short_tmp / "none.toml"), good).reflector.base_url.endswith("/v1")


def test_the_fix_for_another_users_dir_is_never_to_take_it_over(short_tmp):
    """A directory owned by someone else: every fix offered (the judge's default, doctor's
    state check) says to remove it or use another directory, never to chown it."""
    d = short_tmp / "theirs"
    d.mkdir(mode=0o700)
    other = os.getuid() + 1
    bad = private.private_problem(str(d), uid=other)
    assert bad is not None and bad.kind == "not_owner"
    assert "chown" not in bad.fix and "remove it" in bad.fix
    c = checks.check_state(str(d), uid=other)
    assert not c.ok and "chown" not in c.fix and "remove it" in c.fix


def test_install_keeps_nothing_in_a_state_dir_open_to_others(home, short_tmp):
    """`autoharnessctl install` keeps its record and settings backups under the state dir:
    one open to others gets nothing (the error names `chmod 700`), and a link planted as the
    record in the user's own dir is replaced, never written through."""
    state = home["home"] / "state"
    state.mkdir()
    os.chmod(state, 0o777)
    r = ctl("install")
    assert r.returncode == 1 and f"chmod 700 {state}" in r.stderr, r.stderr
    assert os.listdir(state) == []
    assert not (home["claude"] / "settings.json").exists()  # no half install either
    os.chmod(state, 0o700)
    (state / "install").mkdir(mode=0o700)
    target = short_tmp / "target"
    target.write_text("mine\n")
    (state / "install" / "record.json").symlink_to(target)
    r = ctl("install")
    assert r.returncode == 0, r.stderr
    assert target.read_text() == "mine\n"
    assert not (state / "install" / "record.json").is_symlink()
