"""Persistence failures are visible: `status --json` has `persistence.failing` (reason, since),
doctor fails a check naming the fix, and start and stop print one line, not a traceback.

The failures are real files in the way: the snapshot path or `journal.jsonl` as a directory."""

import json
import os
import shutil
import subprocess

from claude_autoharness.protocol import paths
from harness import DAEMON, Daemon, ctl, hook, pre_tool, wait_for


def test_a_failing_snapshot_shows_in_status_and_doctor(home, monkeypatch):
    """With a directory where the snapshot goes, the daemon keeps serving (and a pause still
    takes: it is journaled); `status --json`
    says `persistence.failing` with the reason and since when, the text status says it, and
    doctor fails its persistence check with the fix. Once the directory is gone, it clears."""
    monkeypatch.setenv("AUTOHARNESS_WATCH", "0")
    monkeypatch.setenv("AUTOHARNESS_PERSIST_INTERVAL_S", "0.05")
    d = Daemon(home["home"])
    try:
        assert d.status()["persistence"]["failing"] is None
        os.unlink(paths.snapshot_file())
        os.mkdir(paths.snapshot_file())
        assert hook(pre_tool("s-persist")).returncode == 0  # journaled: no snapshot needed
        assert ctl("pause").returncode == 0  # an operator's command writes a snapshot
        assert ctl("resume").returncode == 0
        st = wait_for(lambda: (s := d.status())["persistence"]["failing"] and s,
                      what="persistence.failing")
        failing = st["persistence"]["failing"]
        assert "snapshot" in failing["reason"] and "is a directory" in failing["reason"]
        assert "move it away" in failing["reason"] and failing["since"] > 0
        assert st["events"]["by_kind"]["PreToolUse"] == 1  # still counting
        assert "PERSISTENCE FAILING" in ctl("status").stdout
        r = ctl("doctor", "--json")
        checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
        assert r.returncode != 0 and checks["persistence"]["ok"] is False
        assert "is a directory" in checks["persistence"]["detail"]
        assert "retries" in checks["persistence"]["fix"]
        assert d.output().count("persistence failing") == 1  # logged once per episode
        os.rmdir(paths.snapshot_file())
        assert hook(pre_tool("s-persist")).returncode == 0
        wait_for(lambda: d.status()["persistence"]["failing"] is None, what="recovery")
        assert json.loads(ctl("doctor", "--json").stdout) is not None
    finally:
        if os.path.isdir(paths.snapshot_file()):
            os.rmdir(paths.snapshot_file())
        d.stop()


def test_journal_as_a_directory_is_a_one_line_start_error(home):
    """`journal.jsonl` as a directory: `autoharnessd` exits 1 with one line naming the file
    and the fix, no traceback, and leaves no socket behind."""
    os.makedirs(paths.state_dir(), mode=0o700, exist_ok=True)
    os.mkdir(paths.journal_file())
    r = subprocess.run([DAEMON], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "journal.jsonl is a directory" in lines[0] and "move it away" in lines[0]
    assert "Traceback" not in r.stderr + r.stdout
    assert not os.path.exists(paths.socket_path())
    os.rmdir(paths.journal_file())
    d = Daemon(home["home"])  # and once it is moved away, the daemon starts
    d.stop()


def test_stop_with_an_unwritable_state_is_one_line(home, monkeypatch):
    """Stopping while the snapshot cannot be written: the daemon still exits 0, says why in
    its log, and prints no traceback; `autoharnessctl stop` with no daemon says so in one line
    and exits 0."""
    monkeypatch.setenv("AUTOHARNESS_WATCH", "0")
    d = Daemon(home["home"])
    os.unlink(paths.snapshot_file())
    os.mkdir(paths.snapshot_file())
    try:
        assert d.stop() == 0
        out = d.output()
        assert "state not saved at stop" in out and "Traceback" not in out
    finally:
        shutil.rmtree(paths.snapshot_file(), ignore_errors=True)
    r = ctl("stop")  # nothing to stop is no failure: `stop; start` must start
    assert r.returncode == 0 and len(r.stdout.strip().splitlines()) == 1
    assert "not running" in r.stdout and not r.stderr
