"""Off switches (AUTOHARNESS_DISABLE, per-project enabled=false, pause/resume) and project roots."""

import json
import subprocess

import pytest

from claude_autoharness.daemon.projects import ProjectSwitches, project_root, read_switch
from harness import Daemon, ctl, hook, pre_tool, wait_for


@pytest.fixture
def daemon(home):
    d = Daemon(home["home"])
    yield d
    d.stop()


def activity(d, sid):
    s = next((s for s in d.status()["sessions"] if s["session_id"] == sid), None)
    return None if s is None else s["activity"]


def test_disable_env_counts_nothing(daemon):
    """AUTOHARNESS_DISABLE=1: the hook exits 0 at once and the daemon sees nothing."""
    r = hook(pre_tool("off"), env={"AUTOHARNESS_DISABLE": "1"})
    assert r.returncode == 0 and r.stdout == b""
    assert daemon.status()["events"]["received"] == 0


def test_project_switch_counts_nothing(daemon, short_tmp):
    """A project's .claude/autoharness.toml with enabled = false stops counting there only."""
    off = short_tmp / "off-proj"
    (off / ".claude").mkdir(parents=True)
    (off / ".claude" / "autoharness.toml").write_text("enabled = false\n")
    on = short_tmp / "on-proj"
    on.mkdir()
    hook(pre_tool("p-off", cwd=str(off)))
    hook(pre_tool("p-on", cwd=str(on)))
    assert activity(daemon, "p-off") is None
    assert activity(daemon, "p-on") == 1
    (off / ".claude" / "autoharness.toml").write_text("enabled = true\n")

    def counted_again():  # the switch file is re-read within a couple of seconds
        hook(pre_tool("p-off", cwd=str(off)))
        return activity(daemon, "p-off")
    wait_for(counted_again, what="re-enabled project counting")


def test_pause_and_resume(daemon):
    """pause makes hooks count nothing; resume counts again; status shows it."""
    assert ctl("pause").returncode == 0
    hook(pre_tool("pz"))
    st = daemon.status()
    assert st["paused"] is True and activity(daemon, "pz") is None
    assert ctl("resume").returncode == 0
    hook(pre_tool("pz"))
    assert activity(daemon, "pz") == 1


def test_project_root_of_linked_worktree(short_tmp):
    """A linked git worktree's project root is the main worktree root."""
    main = short_tmp / "main"
    main.mkdir()
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q", str(main)], check=True)
    subprocess.run(git + ["-C", str(main), "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    wt = short_tmp / "wt"
    subprocess.run(git + ["-C", str(main), "worktree", "add", "-q", str(wt)], check=True)
    (wt / "deep").mkdir()
    assert project_root(str(wt / "deep")) == str(main)
    assert project_root(str(main)) == str(main)
    plain = short_tmp / "plain" / "x"
    plain.mkdir(parents=True)
    assert project_root(str(plain)) == str(plain)


@pytest.mark.parametrize("text", [b"\xff not toml", b'enabled = "false"\n', b"enabled = nope\n",
                                  b"enable = false\n", b"enabled = 0\n", b"[promotr]\nmode = 'git'\n"])
def test_a_malformed_switch_file_means_off(short_tmp, text):
    """A switch file that is not `enabled = true|false` is taken as off (it exists only to turn
    autoharness off, so that is what it most likely meant), with the problem said."""
    (short_tmp / ".claude").mkdir()
    f = short_tmp / ".claude" / "autoharness.toml"
    f.write_bytes(text)
    assert not ProjectSwitches().enabled(str(short_tmp))
    enabled, problem = read_switch(str(f))
    assert not enabled and str(f) in problem


def test_the_promoter_table_is_no_problem_and_a_bad_value_leaves_counting_on(short_tmp):
    """The file may set git mode per project; a bad value there is said, but it is not the
    switch: counting stays as `enabled` says."""
    (short_tmp / ".claude").mkdir()
    f = short_tmp / ".claude" / "autoharness.toml"
    f.write_text('[promoter]\nmode = "git"\ngit_branch = "team/skills"\n')
    assert read_switch(str(f)) == (True, "")
    f.write_text('enabled = false\n[promoter]\nmode = "git"\n')
    assert read_switch(str(f)) == (False, "")
    f.write_text('[promoter]\nmode = "gti"\n')
    enabled, problem = read_switch(str(f))
    assert enabled and "`promoter.mode` must be one of `auto`, `review`, `git`" in problem


def test_a_malformed_switch_is_logged_once_and_doctor_names_it(daemon, short_tmp):
    """`enabled = "false"` (quoted) in a project: the daemon counts nothing there and logs the
    problem once however many events come; `doctor --project` fails the project check with the
    file and the fix, and passes once the fix is applied."""
    proj = short_tmp / "quoted"
    (proj / ".claude").mkdir(parents=True)
    switch = proj / ".claude" / "autoharness.toml"
    switch.write_text('enabled = "false"\n')
    for i in range(5):
        hook(pre_tool("p-quoted", cwd=str(proj), tool_use_id=f"t{i}"))
    assert activity(daemon, "p-quoted") is None
    log = daemon.home / "daemon-test.log"
    wait_for(lambda: "project switch file malformed" in log.read_text(), what="the log line")
    assert log.read_text().count("project switch file malformed") == 1
    r = ctl("doctor", "--json", "--project", str(proj))
    check = next(c for c in json.loads(r.stdout)["checks"] if c["name"] == "project")
    assert not check["ok"] and str(switch) in check["detail"], check
    assert "must be true or false" in check["detail"] and "enabled = false" in check["fix"]
    assert "counts nothing" in check["detail"]
    switch.write_text("enabled = false\n")
    r = ctl("doctor", "--json", "--project", str(proj))
    check = next(c for c in json.loads(r.stdout)["checks"] if c["name"] == "project")
    assert check["ok"] and "off in" in check["detail"], check


def test_switch_file_is_rechecked_on_a_clock(short_tmp):
    """The switch file is stat'ed at most every recheck_s (injected clock), then re-read."""
    now = [0.0]
    sw = ProjectSwitches(recheck_s=2.0, clock=lambda: now[0])
    (short_tmp / ".claude").mkdir()
    f = short_tmp / ".claude" / "autoharness.toml"
    assert sw.enabled(str(short_tmp))
    f.write_text("enabled = false\n")
    now[0] = 1.0
    assert sw.enabled(str(short_tmp))  # not looked at again yet
    now[0] = 2.5
    assert not sw.enabled(str(short_tmp))
