"""Config values are checked as the daemon will use them: every number finite and in its range,
every error naming the key, where the value came from (the file and its line, or the variable),
what the key accepts, and the fix. `doctor` runs the same validation, and a daemon that cannot
start is not respawned by every hook (the autostart backs off, and `doctor` says so)."""

import json
import os
import subprocess
import time

import pytest

from claude_autoharness.client.hook import autostart_wait
from claude_autoharness.protocol import config
from claude_autoharness.protocol.config import ConfigError, load
from harness import DAEMON, connectable, ctl, event, hook, pre_tool, sock_path, wait_for


def _error(tmp_path, text: str, env: dict | None = None) -> ConfigError:
    f = tmp_path / "config.toml"
    f.write_text(text)
    with pytest.raises(ConfigError) as e:
        load(str(f), env=env or {})
    return e.value


@pytest.mark.parametrize("text,key", [
    ("fsync_interval_s = nan", "fsync_interval_s"),
    ("persist_interval_s = nan", "persist_interval_s"),
    ("persist_interval_s = inf", "persist_interval_s"),
    ("persist_interval_s = 1e-9", "persist_interval_s"),
    ("fsync_interval_s = -inf", "fsync_interval_s"),
    ("idle_flush_after_s = nan", "idle_flush_after_s"),
    ("[capture]\ndigest_exchanges = -1", "capture.digest_exchanges"),
    ("[learnings]\nlookback_days = -7", "learnings.lookback_days"),
    ("[reflector]\ntimeout_s = inf", "reflector.timeout_s"),
    ("[reflector]\nbackoff_base_s = nan", "reflector.backoff_base_s"),
    ("max_connections = 100000000", "max_connections"),
])
def test_numbers_out_of_range_are_refused_naming_key_and_range(tmp_path, text, key):
    """nan, inf, a tiny interval or a negative count: refused with the key, the allowed range,
    and the file to fix."""
    e = _error(tmp_path, text)
    assert e.key == key
    assert f"`{key}` must be" in str(e) and " from " in str(e) and " to " in str(e), str(e)
    assert str(tmp_path / "config.toml") in e.fix


def test_every_numeric_key_has_a_range():
    """A number added to the config without a range would only be checked for >= 0."""
    numeric = {k for k, tp in config._fields().items() if tp in (int, float)}
    assert numeric == set(config.RANGES), numeric ^ set(config.RANGES)
    for key, (lo, hi) in config.RANGES.items():  # the defaults themselves are in range
        obj = config.Config()
        for part in key.split("."):
            obj = getattr(obj, part)
        assert lo <= obj <= hi, key


def test_a_bad_variable_is_named_not_a_file(tmp_path):
    """`AUTOHARNESS_REFLECT_EVERY=abc` is blamed on that variable (not on a config.toml that
    does not exist), and the fix says to fix or unset it."""
    missing = tmp_path / "absent.toml"
    for var, value, key in [("AUTOHARNESS_REFLECT_EVERY", "abc", "reflect_every"),
                            ("AUTOHARNESS_FSYNC_INTERVAL_S", "nan", "fsync_interval_s"),
                            ("AUTOHARNESS_REFLECTOR_BACKEND", "bogus", "reflector.backend")]:
        with pytest.raises(ConfigError) as e:
            load(str(missing), env={var: value})
        text = str(e.value)
        assert text.startswith(f"{var}='{value}'") and f"`{key}`" in text, text
        assert str(missing) not in text and var in e.value.fix, text


def test_verbs_that_read_the_config_say_what_is_wrong_without_a_traceback(home, short_tmp):
    """`skills export` reads the config itself: a bad variable is one line naming it."""
    r = ctl("skills", "export", "--plugin", str(short_tmp / "out"),
            env=dict(os.environ, AUTOHARNESS_REFLECT_EVERY="abc"))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("autoharnessctl: AUTOHARNESS_REFLECT_EVERY='abc'"), r.stderr


def test_enum_errors_list_the_allowed_values(tmp_path):
    e = _error(tmp_path, "[reflector]\nbackend = 'bogus'\n")
    for value in ("auto", "anthropic", "claude", "none"):
        assert f"`{value}`" in e.what, e.what
    e = _error(tmp_path, "log_level = 'loud'\n")
    assert "`debug`, `info`, `warning`, `error`" in e.what, e.what


def test_a_syntax_error_names_its_line_and_says_to_fix_the_syntax(tmp_path):
    e = _error(tmp_path, "reflect_every = 10\n\nwatch = \n")
    assert "line 3" in e.what and "fix the syntax on line 3" in e.fix, str(e)
    assert "key" not in e.fix.split("(")[0], e.fix  # not "fix that key": there is none


def test_an_unknown_key_suggests_the_near_one(tmp_path):
    e = _error(tmp_path, "[reflector]\nbackendd = 'auto'\n")
    assert "unknown key `reflector.backendd`" in e.what and "`reflector.backend`" in e.what


def test_doctor_names_the_key_the_daemon_refuses(home):
    """doctor runs the daemon's own validation: a nan interval fails the config check with the
    key and the range (it called such a config fine before)."""
    (home["home"] / "config.toml").write_text("fsync_interval_s = nan\n")
    r = ctl("doctor", "--json")
    check = next(c for c in json.loads(r.stdout)["checks"] if c["name"] == "config")
    assert not check["ok"] and "`fsync_interval_s`" in check["detail"], check
    assert "0.01 to 3_600" in check["detail"] and "config.toml" in check["fix"], check
    r = subprocess.run([DAEMON], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "`fsync_interval_s`" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "ExceptionGroup" not in r.stderr


def test_the_back_off_doubles_up_to_its_cap():
    assert [autostart_wait(n) for n in range(7)] == [0, 10, 20, 40, 80, 160, 300]
    assert autostart_wait(10_000) == 300


def _spawns(home) -> int:
    log = home["home"] / "state" / "daemon.log"
    return log.read_text().count("`fsync_interval_s`") if log.exists() else 0


def test_hooks_back_off_a_daemon_that_cannot_start(home):
    """30 hooks with a config the daemon refuses: each hook spools its event and exits 0, but
    the daemon is spawned only a few times (each spawn that did not come up doubles the wait
    before the next), the log stays small, and doctor shows the failure with the key and the
    back-off. Once the config is fixed `autoharnessctl start` works and clears the back-off."""
    (home["home"] / "config.toml").write_text("fsync_interval_s = nan\n")
    env = {"AUTOHARNESS_AUTOSTART": "1"}
    began = time.monotonic()
    for i in range(30):  # SessionStart too: it waits for a daemon only when one is coming
        ev = (event("SessionStart", "sess-bad", source="startup") if i % 5 == 0
              else pre_tool("sess-bad", tool_use_id=f"t{i}"))
        assert hook(ev, env=env).returncode == 0
    elapsed = time.monotonic() - began
    tries_file = home["home"] / "state" / "autostart.tries"
    tries = int(tries_file.read_text().split()[0])
    wait_for(lambda: _spawns(home) >= tries, 60, "every spawned daemon to log its refusal")
    # spawns happen at 0, >= 10, >= 30, >= 70 s ...: at most this many in `elapsed` seconds
    allowed = 1 + sum(1 for k in range(1, 12) if 10 * (2 ** k - 1) <= elapsed)
    assert 1 <= tries <= allowed and _spawns(home) == tries, (tries, allowed, elapsed)
    log = home["home"] / "state" / "daemon.log"
    assert log.stat().st_size < 2_000 * tries, log.read_text()
    spool = home["home"] / "state" / "spool"
    assert len([p for p in os.listdir(spool) if not p.startswith(".")]) == 30

    r = ctl("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert "`fsync_interval_s`" in checks["config"]["detail"]
    daemon = checks["daemon"]
    assert not daemon["ok"] and "`fsync_interval_s`" in daemon["detail"], daemon
    assert "back off" in daemon["detail"], daemon

    (home["home"] / "config.toml").write_text("fsync_interval_s = 0.5\n")
    r = ctl("start", "--timeout", "60")
    try:
        assert r.returncode == 0, r.stderr
        wait_for(lambda: not tries_file.exists(), 30, "the daemon to clear the back-off")
        wait_for(lambda: not os.listdir(spool), 30, "the spooled events to be replayed")
    finally:
        ctl("stop")
        wait_for(lambda: not connectable(sock_path(home["home"])), 30, "the daemon to stop")
