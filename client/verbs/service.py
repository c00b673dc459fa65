"""`autoharnessctl service install|uninstall|start|stop|status`: keep autoharnessd running
under the user's service manager (systemd or launchd, one `service.Manager` each)."""

from __future__ import annotations

import shutil
import sys

from ...protocol import paths
from ..errors import CtlError
from ..service import ACTIONS, AUTOSTART_NOTE, Manager
from ..service_launchd import Launchd
from ..service_systemd import Systemd


def add_parser(sub) -> None:
    s = sub.add_parser(
        "service", help="run the daemon under systemd (Linux) or launchd (macOS)",
        description="Install, remove, start, stop or inspect the autoharnessd service: a systemd "
        "user unit and socket (~/.config/systemd/user) or a LaunchAgent (~/Library/LaunchAgents),"
        " rendered with this installation's absolute paths.")
    s.add_argument("action", choices=ACTIONS, metavar="ACTION",
                   help="install: write the unit (or agent), enable and start it; uninstall: "
                   "stop and remove it; start, stop: the installed service; status: what the "
                   "service manager says")
    s.set_defaults(func=do_service)


def detect_manager() -> Manager | None:
    if sys.platform == "darwin" and shutil.which("launchctl"):
        return Launchd(paths.launch_agents_dir())
    if shutil.which("systemctl"):
        return Systemd(paths.systemd_user_dir())
    return None


def do_service(args) -> int:
    manager = detect_manager()
    if manager is not None:
        return manager.act(args.action)
    msg = ("no service manager found (neither systemctl nor launchctl is on PATH); "
           f"{AUTOSTART_NOTE}.")
    if args.action == "status":
        print(msg)
        return 0
    raise CtlError(f"cannot {args.action} a service: {msg} To run it yourself, start "
                   "`autoharnessd` (it stays in the foreground).")
