"""`autoharnessctl stop`: stop the daemon cleanly and wait until it is gone (it persists its
state on the way out)."""

from __future__ import annotations

from ...protocol import paths
from ..errors import CtlError
from ..stopping import STOP_WAIT_S, stop_daemon, wait_gone

NOT_RUNNING = "autoharnessd is not running: nothing to stop"


def add_parser(sub) -> None:
    s = sub.add_parser("stop", help="stop the daemon cleanly (state is persisted); "
                       "succeeds when none runs",
                       description="Ask autoharnessd to stop and wait until it has exited "
                       f"(at most {STOP_WAIT_S:.0f} s): its state is persisted on the way "
                       "out, so `stop` then an upgrade, a copy of the state dir or `start` "
                       "finds it at rest. With none running it says so and succeeds.")
    s.set_defaults(func=do_stop)


def do_stop(args) -> int:
    """Nothing running is what `stop` is for: it says so and succeeds, so `stop; start` and
    scripts that stop before an upgrade work whether or not a daemon ran."""
    out = stop_daemon()
    if out is None:
        print(NOT_RUNNING)
        return 0
    if not wait_gone(out.pid, STOP_WAIT_S):
        raise CtlError(f"autoharnessd (pid {out.pid}) agreed to stop but still runs after "
                       f"{STOP_WAIT_S:g}s; see {paths.log_file()}, or end it "
                       f"(`kill {out.pid}`)")
    print(f"stopped autoharnessd (pid {out.pid})")
    return 0
