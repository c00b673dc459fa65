"""The run's own end check (tests/conftest.py): a test that leaves a process started under its
temp dir, or the dir itself, fails the whole run with their names, and both are removed."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import leaks

HERE = Path(__file__).resolve().parent

LEAKY = '''
import os, subprocess, sys, tempfile

def test_leaves_a_daemon_and_its_home():
    home = tempfile.mkdtemp(prefix="ah-", dir="/tmp")
    open(os.path.join(os.path.dirname(__file__), "leaked-home"), "w").write(home)
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                         env=dict(os.environ, AUTOHARNESS_HOME=home), start_new_session=True)
    open(os.path.join(os.path.dirname(__file__), "leaked-pid"), "w").write(str(p.pid))
'''

CLEAN = '''
import shutil, subprocess, sys, tempfile

def test_cleans_up():
    home = tempfile.mkdtemp(prefix="ah-", dir="/tmp")
    subprocess.run([sys.executable, "-c", "pass"], env={"AUTOHARNESS_HOME": home}, check=True)
    shutil.rmtree(home)
'''

LATE = '''
import os, shutil

_rmtree = shutil.rmtree
_written = []


def rmtree_then_a_late_write(path, *args, **kwargs):
    """The first removal of a test's dir races a writer: a file lands in it meanwhile."""
    _rmtree(path, *args, **kwargs)
    if not _written:
        _written.append(path)
        os.makedirs(os.path.join(path, "run"))
        open(os.path.join(path, "run", "late.log"), "w").close()


shutil.rmtree = rmtree_then_a_late_write


def test_something_writes_after_it(short_tmp):
    (short_tmp / "state").write_text("saved")
    open(os.path.join(os.path.dirname(__file__), "its-dir"), "w").write(str(short_tmp))
'''


def run_suite(short_tmp: Path, body: str, *opts: str) -> subprocess.CompletedProcess:
    suite = short_tmp / "suite"
    suite.mkdir()
    for name in ("conftest.py", "leaks.py"):
        shutil.copyfile(HERE / name, suite / name)
    (suite / "test_it.py").write_text(body)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *opts,
                           str(suite)], cwd=suite, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, AUTOHARNESS_TEST_STOPPING_S="1"))


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_leaked_process_and_dir_fail_the_run(short_tmp, workers):
    """The leaking test itself passes, yet the run fails naming the process (by its command
    line) and the temp dir; afterwards the process is dead and the dir gone. The same when
    pytest-xdist runs the tests in worker processes (each checks its own; the run fails)."""
    r = run_suite(short_tmp, LEAKY, *workers)
    out = r.stdout + r.stderr
    home = (short_tmp / "suite" / "leaked-home").read_text()
    pid = int((short_tmp / "suite" / "leaked-pid").read_text())
    assert r.returncode == 1 and "1 passed" in out, out
    assert "left things behind" in out and f"process {pid}" in out and home in out, out
    assert f"{home} of test_it.py::test_leaves_a_daemon_and_its_home" in out, out
    assert not os.path.exists(home)
    assert not leaks.processes_under([home])


def test_a_clean_run_passes(short_tmp):
    """A run that stops what it started and removes its dirs passes."""
    r = run_suite(short_tmp, CLEAN)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_dir_written_after_its_test_is_removed_and_named(short_tmp):
    """A test's temp dir that something still writes into as it is removed does not outlive
    the run: it is removed again, the run passes, and its summary names the test and what was
    written late."""
    r = run_suite(short_tmp, LATE)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "written to after their test ended" in out, out
    assert "test_it.py::test_something_writes_after_it: run, run/late.log" in out, out
    assert not os.path.exists((short_tmp / "suite" / "its-dir").read_text())


def test_a_process_is_the_runs_only_when_it_names_a_whole_root(short_tmp):
    """A process naming `<root>/h` belongs to the run; one naming `<root>2`, another dir that
    only begins like it (pytest's numbered dirs: pytest-5 and pytest-52), does not."""
    root = str(short_tmp / "pytest-5")
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    ours = subprocess.Popen(sleep, env=dict(os.environ, AUTOHARNESS_HOME=f"{root}/h"))
    other = subprocess.Popen(sleep, env=dict(os.environ, AUTOHARNESS_HOME=f"{root}2/h"))
    try:
        assert [pid for pid, _ in leaks.processes_under([root])] == [ours.pid]
    finally:
        for p in (ours, other):
            p.kill()
            p.wait()
