"""Private by construction: what the daemon and the promoter create in the state dir is 0600 in
0700 directories whatever the umask (blobs and history included), and a user-layer skills dir
symlinked elsewhere is refused like the project layer's."""

import os
import stat

from claude_autoharness.protocol import paths
from harness import Daemon, hook, pre_tool
from promote_support import WINDOW, assert_rejected_without_writes, intent, land


def _loose_entries(root: str) -> list[str]:
    """Files not 0600 and directories not 0700 under `root` (the socket is a file here)."""
    bad = []
    for here, dirs, files in os.walk(root):
        for name in dirs:
            p = os.path.join(here, name)
            if stat.S_IMODE(os.lstat(p).st_mode) != 0o700:
                bad.append(f"{p} {stat.S_IMODE(os.lstat(p).st_mode):o}")
        for name in files:
            p = os.path.join(here, name)
            mode = stat.S_IMODE(os.lstat(p).st_mode)
            if mode & 0o077:
                bad.append(f"{p} {mode:o}")
    return bad


def test_promoter_state_is_private_under_a_loose_umask(env):
    """Under umask 022, landing, updating and reverting a skill leaves every file under the
    promoter's state (blobs, history, pending, archive) 0600 in 0700 directories."""
    old = os.umask(0o022)
    try:
        land(env, intent("create", "run-checks"))
        land(env, intent("update", "run-checks", body="Run `make check`.\nThen push.\n"))
        out = env["pr"].revert("run-checks", project_root=str(env["proj"]))
        assert out.status == "landed", out.findings
        land(env, intent("create", "user-thing", layer="user"))
    finally:
        os.umask(old)
    state = paths.state_dir()
    blobs = [f for here, _, fs in os.walk(state) for f in fs if "blobs" in here]
    history = [f for here, _, fs in os.walk(state) for f in fs if "history" in here]
    assert blobs and history  # there is something to check
    assert _loose_entries(state) == []


def test_symlinked_user_skills_dir_is_refused(env, home):
    """`~/.claude/skills` as a symlink to a directory elsewhere: a user-layer landing is
    rejected (contained/symlink) and nothing is written anywhere, through the link least."""
    user_skills = env["user_skills"]
    os.rmdir(user_skills)
    os.symlink(env["outside"], user_skills)
    out = assert_rejected_without_writes(env, intent("create", "leak", layer="user"), "symlink")
    assert any("symlink" in f.message for f in out.findings)
    assert sorted(os.listdir(env["outside"])) == ["secret.txt"]
    # the project layer still lands
    assert env["pr"].promote(intent("create", "fine"), WINDOW, str(env["proj"])).status == "landed"


def test_daemon_state_dir_is_private_under_a_loose_umask(home):
    """A daemon started under umask 022 that took events and stopped leaves its state dir
    (snapshot, journal, lock, log, intents) 0600 files in 0700 directories."""
    old = os.umask(0o022)
    try:
        d = Daemon(home["home"])
        try:
            assert hook(pre_tool("s-private")).returncode == 0
            assert d.status()["events"]["received"] == 1
        finally:
            d.stop()
    finally:
        os.umask(old)
    assert _loose_entries(paths.state_dir()) == []
