"""`autoharnessctl start`: start autoharnessd in the background and wait until it answers.

The daemon is the same detached process the hook's autostart runs (its own session, output to
the state dir's daemon.log); this verb waits for it and, when it exits instead, shows why from
that log. Under a service manager `autoharnessctl service start` is the way; this is for
everywhere else, and for a first run before any hook has fired.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time

from ...protocol import messages as m
from ...protocol import paths, private
from ...protocol import replies as r
from ..checks import last_log_error
from ..conn import DaemonError, DaemonUnreachable, ask
from ..errors import CtlError
from ..files import private_dir

READY_TIMEOUT_S = 30.0


def add_parser(sub) -> None:
    s = sub.add_parser(
        "start", help="start the daemon in the background (or say it already runs)",
        description="Start autoharnessd detached, logging to the state directory's daemon.log, "
        "and wait until it answers. Hooks also start it on their own unless autostart is off; "
        "under systemd or launchd use `autoharnessctl service start`.")
    s.add_argument("--timeout", type=float, default=READY_TIMEOUT_S, metavar="S",
                   help=f"how long to wait for it to answer (default {READY_TIMEOUT_S:.0f})")
    s.set_defaults(func=do_start)


def running() -> r.Identity | None:
    """The daemon that answers at the socket, or None."""
    try:
        return ask(m.Status(), r.Identity, timeout=5)
    except (DaemonUnreachable, DaemonError):
        return None


def daemon_command() -> list[str]:
    """This installation's daemon: its `autoharnessd` entry point beside this Python (so the
    command line says autoharnessd too: `pgrep -f autoharnessd`), else the module."""
    script = os.path.join(os.path.dirname(sys.executable), "autoharnessd")
    if os.path.isfile(script) and os.access(script, os.X_OK):
        return [script]
    return [sys.executable, "-m", "claude_autoharness.daemon"]


def do_start(args) -> int:
    st = running()
    if st:
        print(f"autoharnessd is already running (pid {st.pid}, socket {st.socket})")
        return 0
    log_file = paths.log_file()
    try:
        # the log is opened in the state dir once it is known to be ours and private, and
        # never through a link (another user's dir could hold one to a file of ours)
        state = private.open_private_dir(os.path.dirname(log_file), make=private_dir)
        try:
            log = private.open_in(state, os.path.basename(log_file),
                                  os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        finally:
            os.close(state)
    except private.NotPrivate as e:
        raise CtlError(f"cannot start the daemon: {e.unsafe.what}, so nothing was written "
                       f"there: {e.unsafe.fix}") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise CtlError(f"cannot start the daemon: {log_file} is a symbolic link, never "
                           f"written through: remove it (`rm {log_file}`)") from None
        why = private.unusable_dir(paths.state_dir())
        raise CtlError(f"cannot start the daemon: {why}" if why else
                       f"cannot write {e.filename or log_file}: {e.strerror}; "
                       "`autoharnessctl doctor` checks the state directory") from None
    try:
        proc = subprocess.Popen(daemon_command(),
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True)
    finally:
        os.close(log)
    end = time.monotonic() + args.timeout
    while time.monotonic() < end:
        st = running()
        if st:
            print(f"started autoharnessd (pid {st.pid}, socket {st.socket}); "
                  f"log: {log_file}; stop it with `autoharnessctl stop`")
            return 0
        if proc.poll() is not None:
            return _exited(proc.returncode, log_file)
        time.sleep(0.1)
    raise CtlError(f"autoharnessd (pid {proc.pid}) did not answer within "
                   f"{args.timeout:.0f}s; see {log_file}")


def _exited(code: int, log_file: str) -> int:
    st = running()  # lost a race to another starter: that one serves
    if st:
        print(f"autoharnessd is already running (pid {st.pid}, socket {st.socket})")
        return 0
    why = last_log_error(log_file) or f"exit status {code}"
    raise CtlError(f"autoharnessd did not start: {why} (log: {log_file})")
