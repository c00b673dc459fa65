"""Nothing waits forever: a stop ends the daemon even with a worker thread stuck in a read, a
stuck job step fails its job and frees its slot, and every `autoharnessctl` verb gives up after
its timeout saying what it waited for.

The stuck worker is real: `tests/stuck_daemon.py` runs the real daemon with one step reading a
FIFO that no one writes, the read a hung mount or a stray pipe causes.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REAL
from fake_anthropic import FakeAnthropic, tool_reply
from harness import Daemon, ctl, hook, open_fifo_writer_when_read, wait_for

STUCK = str(Path(__file__).with_name("stuck_daemon.py"))


def test_sigterm_ends_the_daemon_with_a_worker_stuck_on_a_read(home, monkeypatch):
    """A worker thread blocked in read() on a FIFO does not hold the stop: SIGTERM ends the
    daemon within 10 s, and a new daemon starts right after (lock free, socket replaced)."""
    monkeypatch.setenv("AUTOHARNESS_WATCH", "0")
    monkeypatch.setenv("AUTOHARNESS_PERSIST_INTERVAL_S", "0.05")
    fifo = home["tmp"] / "never-written"
    os.mkfifo(fifo)
    d = Daemon(home["home"], argv=[sys.executable, STUCK, str(fifo), "prune"])
    writer = open_fifo_writer_when_read(fifo)
    try:
        assert d.status()["pid"] == d.proc.pid  # still serving around the stuck thread
        d.proc.send_signal(signal.SIGTERM)
        try:
            d.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            d.proc.kill()
            pytest.fail("SIGTERM did not end the daemon within 60 s with a stuck worker")
        assert "stop did not finish in time" in d.output(), d.output()[-2000:]
    finally:
        os.close(writer)
        d.stop()
    again = Daemon(home["home"])
    try:
        assert again.status()["pid"] == again.proc.pid
    finally:
        again.stop()


def test_a_stuck_job_fails_with_a_reason_and_frees_its_slot(home, monkeypatch):
    """With one reflector slot, a job whose transcript read never returns is failed after
    `reflector.step_timeout_s` with a reason, and the next session's job then runs to done."""
    fifo = home["tmp"] / "never-written"
    os.mkfifo(fifo)
    proj = home["claude"] / "projects" / "p"
    proj.mkdir()
    for sid in ("s-stuck", "s-ok"):
        shutil.copyfile(REAL / "spotter/short.jsonl", proj / f"{sid}.jsonl")
    with FakeAnthropic() as fake:
        fake.push(tool_reply({"proposals": []}))
        for k, v in {"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key",
                     "ANTHROPIC_BASE_URL": fake.base_url, "AUTOHARNESS_REFLECT_EVERY": "1",
                     "AUTOHARNESS_WATCH": "0", "AUTOHARNESS_REFLECTOR_CONCURRENCY": "1",
                     "AUTOHARNESS_REFLECTOR_STEP_TIMEOUT_S": "0.5"}.items():
            monkeypatch.setenv(k, v)
        d = Daemon(home["home"], argv=[sys.executable, STUCK, str(fifo), "cut", "s-stuck"])
        try:
            for sid in ("s-stuck", "s-ok"):
                ev = {"session_id": sid, "cwd": str(home["tmp"]),
                      "transcript_path": str(proj / f"{sid}.jsonl")}
                hook(dict(ev, hook_event_name="PreToolUse", tool_name="Bash",
                          tool_input={"command": "ls"}))
                hook(dict(ev, hook_event_name="Stop"))
                if sid == "s-stuck":
                    writer = open_fifo_writer_when_read(fifo)  # its job now holds the only slot
            st = wait_for(lambda: (s := d.status())["jobs"]["done"] == 1 and s,
                          timeout=60, what="the second session's job")
            assert st["jobs"]["failed"] == 1 and st["jobs"]["running"] == 0
            assert "stuck reading the transcript" in st["jobs"]["last_error"]["error"]
            assert len(fake.messages_requests) == 1  # only the free session reached the model
        finally:
            os.close(writer)
            d.stop()


def test_a_fifo_switch_file_does_not_block_the_daemon(home, monkeypatch):
    """A FIFO where a project's `.claude/autoharness.toml` switch goes (read on the event loop
    for every event) is treated as no switch: the project's events count and the daemon keeps
    answering."""
    monkeypatch.setenv("AUTOHARNESS_WATCH", "0")
    proj = home["tmp"] / "fifo-proj"
    (proj / ".claude").mkdir(parents=True)
    os.mkfifo(proj / ".claude" / "autoharness.toml")
    d = Daemon(home["home"])
    try:
        ev = {"session_id": "s-fifo", "cwd": str(proj), "hook_event_name": "PreToolUse",
              "transcript_path": str(proj / "t.jsonl"), "tool_name": "Bash",
              "tool_input": {"command": "ls"}}
        assert hook(ev).returncode == 0
        st = d.status()
        assert st["events"]["by_kind"]["PreToolUse"] == 1
        assert [s["activity"] for s in st["sessions"]] == [1]
    finally:
        d.stop()


def test_a_fifo_config_file_is_an_error_not_a_hang(home, short_tmp):
    """A FIFO where the config file goes: loading it fails at once with the path named."""
    from claude_autoharness.protocol.config import ConfigError, load

    fifo = short_tmp / "config.toml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        load(str(fifo), env={})


@pytest.fixture
def mute_daemon(short_tmp, home, monkeypatch):
    """A socket that accepts connections (the kernel's backlog) but never answers."""
    path = str(short_tmp / "mute.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(64)
    monkeypatch.setenv("AUTOHARNESS_SOCKET", path)
    yield path
    srv.close()


VERBS = [["status"], ["flush", "--all"], ["stop"], ["pause"], ["resume"],
         ["capture", "--session", "s1"], ["learn", "a lesson"], ["queue", "list"],
         ["skills", "list"]]


@pytest.mark.parametrize("argv", VERBS, ids=lambda a: a[0])
def test_every_verb_gives_up_after_its_timeout(mute_daemon, argv):
    """Against a daemon that never answers, each verb exits 1 after `--timeout`, naming the
    request it waited for and how long, without a traceback."""
    r = ctl(*argv, "--timeout", "0.3", timeout=60)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "waited 0.3 s" in r.stderr and "--timeout" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    r = ctl("--timeout", "0.3", *argv, timeout=60)  # before the verb too
    assert r.returncode == 1 and "waited 0.3 s" in r.stderr


def test_the_default_client_timeout_is_ten_seconds():
    """Without `--timeout` a verb waits 10 s; a bad value is refused by the parser."""
    from claude_autoharness.client import ctl as ctlmod

    p = ctlmod.build_parser()
    assert p.parse_args(["status"]).timeout == 10.0
    r = ctl("status", "--timeout", "0", timeout=60)
    assert r.returncode == 2 and "--timeout" in r.stderr


def test_json_of_status_in_a_verb_timeout_is_not_printed(mute_daemon):
    """`status --json` that times out prints nothing on stdout (no half-made JSON)."""
    r = ctl("status", "--json", "--timeout", "0.2", timeout=60)
    assert r.returncode == 1 and r.stdout == ""
    with pytest.raises(json.JSONDecodeError):
        json.loads(r.stdout)
