"""`autoharnessctl start`: start autoharnessd in the background and wait until it answers.

The daemon is the same detached process the hook's autostart runs (its own session, output to
the state dir's daemon.log); this verb waits for it and, when it exits instead, shows why from
that log. Under a service manager `autoharnessctl service start` is the way; this is for
everywhere else, and for a first run before any hook has fired.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from claude_autoharness.client import install
from claude_autoharness.client.conn import DaemonError, DaemonNotRunning, DaemonUnreachable, ask
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol import paths, private
from claude_autoharness.protocol import replies as r

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
NOT_RUNNING = "autoharnessd is not running: nothing to stop"


def _status() -> r.Identity | None:
    try:
        return ask(m.Status(), r.Identity, timeout=5)
    except (DaemonUnreachable, DaemonError):
        return None


def do_start(args) -> int:
    st = _status()
    if st:
        print(f"autoharnessd is already running (pid {st.pid}, socket {st.socket})")
        return 0
    log_file = paths.log_file()
    try:
        install.private_dir(os.path.dirname(log_file))
        log = os.open(log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError as e:
        why = private.unusable_dir(paths.state_dir())
        print(f"autoharnessctl: cannot start the daemon: {why}" if why else
              f"autoharnessctl: cannot write {e.filename or log_file}: {e.strerror}; "
              "`autoharnessctl doctor` checks the state directory", file=sys.stderr)
        return 1
    try:
        proc = subprocess.Popen([sys.executable, "-m", "claude_autoharness.daemon"],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True)
    finally:
        os.close(log)
    end = time.monotonic() + args.timeout
    while time.monotonic() < end:
        st = _status()
        if st:
            print(f"started autoharnessd (pid {st.pid}, socket {st.socket}); "
                  f"log: {log_file}; stop it with `autoharnessctl stop`")
            return 0
        if proc.poll() is not None:
            return _exited(proc.returncode, log_file)
        time.sleep(0.1)
    print(f"autoharnessctl: autoharnessd (pid {proc.pid}) did not answer within "
          f"{args.timeout:.0f}s; see {log_file}", file=sys.stderr)
    return 1


def _exited(code: int, log_file: str) -> int:
    from claude_autoharness.client.doctor import last_log_error

    st = _status()  # lost a race to another starter: that one serves
    if st:
        print(f"autoharnessd is already running (pid {st.pid}, socket {st.socket})")
        return 0
    why = last_log_error(log_file) or f"exit status {code}"
    print(f"autoharnessctl: autoharnessd did not start: {why} (log: {log_file})",
          file=sys.stderr)
    return 1


def stop_daemon() -> r.Stopping | None:
    """Ask the daemon to stop; None when none listens (nothing to stop is no error)."""
    try:
        return ask(m.Stop(), r.Stopping)
    except DaemonNotRunning:
        return None


def wait_gone(timeout: float) -> bool:
    """Wait until no daemon answers at the socket (it persists its state on the way out)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if _status() is None:
            return True
        time.sleep(0.1)
    return False


def do_restart(args) -> int:
    """Stop the daemon if one runs, wait until it is gone, start a new one (this installation's:
    what an upgrade or a config change needs)."""
    out = stop_daemon()
    if out is None:
        print("autoharnessd is not running: starting it")
    else:
        print(f"stopping autoharnessd (pid {out.pid})")
        if not wait_gone(args.timeout):
            print(f"autoharnessctl: autoharnessd (pid {out.pid}) still answers after "
                  f"{args.timeout:.0f}s; see {paths.log_file()}, or end it (`kill {out.pid}`) "
                  "and run `autoharnessctl start`", file=sys.stderr)
            return 1
    return do_start(args)


def add_restart_parser(sub) -> None:
    s = sub.add_parser(
        "restart", help="stop the daemon (if it runs) and start it again",
        description="Stop autoharnessd cleanly (its state is persisted), wait until it is gone, "
        "then start it in the background as `autoharnessctl start` does: after an upgrade or "
        "a config change. Under systemd or launchd use `autoharnessctl service stop` and "
        "`service start`.")
    s.add_argument("--timeout", type=float, default=READY_TIMEOUT_S, metavar="S",
                   help=f"how long to wait for each of the stop and the start (default "
                   f"{READY_TIMEOUT_S:.0f})")
    s.set_defaults(func=do_restart)


def add_parser(sub) -> None:
    s = sub.add_parser(
        "start", help="start the daemon in the background (or say it already runs)",
        description="Start autoharnessd detached, logging to the state directory's daemon.log, "
        "and wait until it answers. Hooks also start it on their own unless autostart is off; "
        "under systemd or launchd use `autoharnessctl service start`.")
    s.add_argument("--timeout", type=float, default=READY_TIMEOUT_S, metavar="S",
                   help=f"how long to wait for it to answer (default {READY_TIMEOUT_S:.0f})")
    s.set_defaults(func=do_start)
