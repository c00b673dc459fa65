"""`autoharnessctl stop`: stop the daemon cleanly (it persists its state on the way out)."""

from __future__ import annotations

from claude_autoharness.client.conn import DaemonNotRunning, ask
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol import replies as r

NOT_RUNNING = "autoharnessd is not running: nothing to stop"


def add_parser(sub) -> None:
    s = sub.add_parser("stop", help="stop the daemon cleanly (state is persisted); "
                       "succeeds when none runs")
    s.set_defaults(func=do_stop)


def stop_daemon() -> r.Stopping | None:
    """Ask the daemon to stop; None when none listens (nothing to stop is no error)."""
    try:
        return ask(m.Stop(), r.Stopping)
    except DaemonNotRunning:
        return None


def do_stop(args) -> int:
    """Nothing running is what `stop` is for: it says so and succeeds, so `stop; start` and
    scripts that stop before an upgrade work whether or not a daemon ran."""
    out = stop_daemon()
    print(f"stopping autoharnessd (pid {out.pid})" if out else NOT_RUNNING)
    return 0
