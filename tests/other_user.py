"""A second local user for attack tests: made with `useradd` for one test, removed after.

The tests run as root; the attacker's steps run as this user in child processes (`as_user`).
Where there is no root or no `useradd` the test is skipped, except under CI (`CI=true`),
where a skip would hide the attack: it fails instead.
"""

import os
import secrets
import shutil
import signal
import subprocess
import sys
import traceback
from dataclasses import dataclass

import pytest


class Child:
    """Python code running as the other user in a forked child; its stdout is `stdout`."""

    def __init__(self, pid: int, stdout):
        self.pid, self.stdout = pid, stdout

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def wait(self) -> None:
        os.waitpid(self.pid, 0)
        self.stdout.close()


@dataclass
class User:
    name: str
    uid: int
    gid: int

    def run(self, *args: str, **kw) -> subprocess.CompletedProcess:
        """A command as this user (stdout and stderr captured, checked)."""
        return subprocess.run(list(args), preexec_fn=self._become, cwd="/", check=True,
                              capture_output=True, text=True, **kw)

    def python(self, code: str, *args: str) -> Child:
        """Run `code` (with `sys.argv[1:]` = args) as this user in a forked child: our
        interpreter may live where that user cannot read, a fork needs nothing from disk."""
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: become the user, run, never return into pytest
            code_ = 1
            try:
                os.close(r)
                sys.stdout = os.fdopen(w, "w", buffering=1)
                self._become()
                os.chdir("/")
                sys.argv = ["-c", *args]
                exec(compile(code, "<other user>", "exec"), {"__name__": "__main__"})
                code_ = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code_)
        os.close(w)
        return Child(pid, os.fdopen(r))

    def _become(self) -> None:
        os.setgroups([])
        os.setgid(self.gid)
        os.setuid(self.uid)


def _unavailable() -> str | None:
    if os.getuid() != 0:
        return "needs root to create a second user"
    if not shutil.which("useradd") or not shutil.which("userdel"):
        return "needs useradd and userdel"
    return None


@pytest.fixture
def other_user():
    why = _unavailable()
    if why:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"a two-user test must run under CI: {why}")
        pytest.skip(why)
    name = f"ah-test-{secrets.token_hex(4)}"
    subprocess.run(["useradd", "-m", "-s", "/usr/sbin/nologin", "-U", name], check=True,
                   capture_output=True)
    try:
        import pwd

        pw = pwd.getpwnam(name)
        yield User(name, pw.pw_uid, pw.pw_gid)
    finally:
        subprocess.run(["userdel", "-r", name], capture_output=True)
