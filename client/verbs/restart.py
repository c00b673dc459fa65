"""`autoharnessctl restart`: stop the daemon if one runs, wait until it is gone, start a new
one (this installation's: what an upgrade or a config change needs)."""

from __future__ import annotations

from ...protocol import paths
from ..errors import CtlError
from ..preflight import start_problem
from ..stopping import stop_daemon, wait_gone
from .start import READY_TIMEOUT_S, do_start


def add_parser(sub) -> None:
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


def do_restart(args) -> int:
    why = start_problem()  # checked first: a daemon that could not start again is left running
    if why:
        raise CtlError(f"not restarting: {why}. The running daemon (if any) was left as it is; "
                       "fix that, then run `autoharnessctl restart` again", verb="restart")
    out = stop_daemon()
    if out is None:
        print("autoharnessd is not running: starting it")
    else:
        print(f"stopping autoharnessd (pid {out.pid})")
        if not wait_gone(out.pid, args.timeout):
            raise CtlError(f"autoharnessd (pid {out.pid}) still runs after "
                           f"{args.timeout:.0f}s; see {paths.log_file()}, or end it "
                           f"(`kill {out.pid}`) and run `autoharnessctl start`")
    return do_start(args)
