"""One judge of private paths (`private.private_problem`): what it finds, the fix each caller
gives for it, and the callers that use it (doctor, install's settings backups, the daemon's
explicit socket dir, the claude reflector's working dir)."""

import os
import socket
import subprocess

import pytest

from claude_autoharness.client import checks, install
from claude_autoharness.protocol import private
from harness import DAEMON


def test_a_private_dir_and_socket_pass(short_tmp):
    d = short_tmp / "ok"
    d.mkdir(mode=0o700)
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(d / "s.sock"))
    os.chmod(d / "s.sock", 0o600)
    try:
        assert private.private_problem(str(d)) is None
        assert private.private_problem(str(d / "s.sock"), socket=True) is None
    finally:
        s.close()


@pytest.mark.parametrize("case, kind, in_what, in_fix", [
    ("open", "open", "open to other users (mode 755, want 700)", "chmod 700 "),
    ("symlink", "not_dir", "is not a directory", "mv "),
    ("file", "not_dir", "is not a directory", "mv "),
    ("foreign", "not_owner", "owned by uid", "sudo rm -r "),
])
def test_each_problem_is_named_with_a_default_fix(short_tmp, case, kind, in_what, in_fix):
    """Open to others, a symlink or a file in its place, another owner: each is found, first
    one first, with what happened and a fix that names the path."""
    target = short_tmp / "real"
    target.mkdir(mode=0o700)
    p = short_tmp / "p"
    if case == "open":
        p.mkdir()
        os.chmod(p, 0o755)
    elif case == "symlink":
        p.symlink_to(target)
    elif case == "file":
        p.write_text("")
    else:
        p = target
    uid = os.getuid() + (1 if case == "foreign" else 0)
    bad = private.private_problem(str(p), uid=uid)
    assert bad is not None and bad.kind == kind
    assert in_what in bad.what and str(p) in bad.what
    assert in_fix in bad.fix and str(p) in bad.fix
    assert str(bad) == f"{bad.what}: {bad.fix}"


def test_a_caller_gives_its_own_fix(short_tmp):
    """The fix for a kind is the caller's when it gives one; other kinds keep the default."""
    p = short_tmp / "p"
    p.mkdir(mode=0o700)
    os.chmod(p, 0o750)
    fixes = {"not_owner": "not this one"}
    assert private.private_problem(str(p), fixes=fixes).fix == f"chmod 700 {p}"
    bad = private.private_problem(str(p), uid=os.getuid() + 1, fixes=fixes)
    assert (bad.kind, bad.fix) == ("not_owner", "not this one")
    with pytest.raises(FileNotFoundError):  # what a missing path means is the caller's
        private.private_problem(str(p / "missing"))


def test_doctor_judges_the_state_dir_with_its_fixes(short_tmp):
    """doctor's state check is the judge's finding plus what it means for the daemon."""
    p = short_tmp / "state"
    p.mkdir()
    os.chmod(p, 0o711)
    c = checks.check_state(str(p))
    assert not c.ok and c.fix == f"chmod 700 {p}"
    assert c.detail == private.private_problem(str(p)).what + "; the daemon refuses to start"


def test_install_keeps_no_settings_backup_in_a_dir_that_is_not_private(home):
    """A settings backup (it may hold keys) goes to a private dir made 0700; one open to
    others is refused with the judge's fix, and no backup is written."""
    settings = home["tmp"] / "settings.json"
    first = install.backup(str(settings), b'{"env": {"KEY": "k"}}')
    bdir = os.path.dirname(first)
    assert os.stat(bdir).st_mode & 0o777 == 0o700
    os.chmod(bdir, 0o755)
    with pytest.raises(install.InstallError, match=f"chmod 700 {bdir}"):
        install.backup(str(settings), b"{}")
    assert os.listdir(bdir) == [os.path.basename(first)]


def test_an_explicit_socket_dir_not_private_stops_the_daemon(home, short_tmp):
    """AUTOHARNESS_SOCKET in a directory open to others: the daemon does not start, and says
    why and the fix (the judge's), on stderr."""
    run = short_tmp / "sockdir"
    run.mkdir()
    os.chmod(run, 0o770)
    env = dict(os.environ, AUTOHARNESS_SOCKET=str(run / "a.sock"))
    r = subprocess.run([DAEMON], capture_output=True, text=True, env=env, timeout=90)
    assert r.returncode == 1
    assert f"{run} is open to other users (mode 770, want 700): chmod 700 {run}" in r.stderr


def test_the_reflector_workdir_is_tightened_or_refused(home, short_tmp):
    """The claude backend's working dir: ours but open is made 0700; a symlink is refused."""
    from claude_autoharness.daemon.reflect.backends import claude
    from claude_autoharness.daemon.reflect.backends.base import PermanentError

    d = claude.workdir()
    os.chmod(d, 0o755)
    assert claude.workdir() == d and os.stat(d).st_mode & 0o777 == 0o700
    os.rmdir(d)
    (short_tmp / "elsewhere").mkdir(mode=0o700)
    os.symlink(short_tmp / "elsewhere", d)
    with pytest.raises(PermanentError, match="is not a directory"):
        claude.workdir()
