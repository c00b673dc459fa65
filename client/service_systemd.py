"""systemd (Linux): a user unit that runs autoharnessd plus a socket unit. systemd holds the
socket, so hooks reach it even while the daemon restarts; the daemon adopts it through
LISTEN_FDS."""

from __future__ import annotations

import os

from ..protocol import paths
from .files import atomic_write
from .service import (
    AUTOSTART_NOTE,
    Manager,
    ServiceError,
    daemon_path,
    ours,
    run,
    service_env,
    service_env_note,
    stop_running_daemon,
    template,
)

UNIT = "autoharness.service"
SOCKET_UNIT = "autoharness.socket"
CTL = ["systemctl", "--user"]


# ---- rendering (pure: text in, text out) ------------------------------------------------------


def _systemd_quote(value: str) -> str:
    # Environment= expands %-specifiers and takes C-style escapes inside quotes.
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%") + '"'


def _systemd_exec(path: str) -> str:
    # ExecStart= splits on whitespace and expands %-specifiers.
    if any(c.isspace() or c in "\"\\" for c in path):
        return _systemd_quote(path)
    return path.replace("%", "%%")


def render_service(daemon: str, env: dict[str, str]) -> str:
    lines = "".join(f"Environment={_systemd_quote(f'{k}={v}')}\n" for k, v in sorted(env.items()))
    return (template("systemd", UNIT).replace("{{AUTOHARNESSD}}", _systemd_exec(daemon))
            .replace("{{ENVIRONMENT}}\n", lines))


def listen_path(env: dict[str, str]) -> str:
    """Where the socket unit listens: %t (XDG_RUNTIME_DIR) is autoharness's default socket dir;
    with AUTOHARNESS_SOCKET/AUTOHARNESS_HOME set it must be the path the hooks will use."""
    if env.get("AUTOHARNESS_SOCKET") or env.get("AUTOHARNESS_HOME"):
        return paths.socket_path().replace("%", "%%")
    return f"%t/autoharness/{paths.SOCKET_NAME}"


def render_socket(listen: str) -> str:
    return template("systemd", SOCKET_UNIT).replace("{{SOCKET}}", listen)


def write_systemd(dest: str, daemon: str, env: dict[str, str]) -> list[str]:
    """Render both units into `dest` (~/.config/systemd/user, or a test's temp dir)."""
    os.makedirs(dest, exist_ok=True)
    out = []
    units = ((UNIT, render_service(daemon, env)), (SOCKET_UNIT, render_socket(listen_path(env))))
    for name, text in units:
        p = os.path.join(dest, name)
        atomic_write(p, text.encode(), 0o644)
        out.append(p)
    return out


# ---- talking to systemd -----------------------------------------------------------------------


def systemd_reachable() -> str | None:
    """None when `systemctl --user` works, else why not (containers, no login session)."""
    r = run(CTL + ["show-environment"], check=False)
    if r.returncode == 0:
        return None
    lines = (r.stderr or r.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit status {r.returncode}"


class Systemd(Manager):
    """The units in `unit_dir` (~/.config/systemd/user), driven through `systemctl --user`.
    Nothing is written while no user manager answers: units no manager loads would only be
    left behind; an uninstall still removes ours, so install and uninstall stay inverse."""

    def __init__(self, unit_dir: str):
        self.unit_dir = unit_dir
        self.units = [os.path.join(unit_dir, n) for n in (UNIT, SOCKET_UNIT)]

    @property
    def installed(self) -> bool:
        return all(os.path.exists(u) for u in self.units)

    def _reachable(self) -> None:
        why = systemd_reachable()
        if why:
            raise ServiceError(
                f"systemd is installed but `systemctl --user` cannot reach a user manager "
                f"({why}). Log in through a normal session (or `loginctl enable-linger $USER` "
                f"on a server) and rerun; until then {AUTOSTART_NOTE}")

    def _need_installed(self) -> None:
        if not self.installed:
            raise ServiceError(f"the units are not installed in {self.unit_dir}: run "
                               "`autoharnessctl service install` first")
        self._reachable()

    def _remove_units(self) -> list[str]:
        """Delete the unit files autoharness wrote (never a same-named file of someone else's)."""
        removed = []
        for u in self.units:
            if ours(u):
                os.unlink(u)
                removed.append(u)
        return removed

    def install(self) -> int:
        self._reachable()
        written = write_systemd(self.unit_dir, daemon_path(), service_env())
        pid = stop_running_daemon()
        if pid:
            print(f"stopped the running autoharnessd (pid {pid}) so the service takes over")
        run(CTL + ["daemon-reload"])
        run(CTL + ["enable", "--now", SOCKET_UNIT, UNIT])
        run(CTL + ["restart", UNIT])  # a reinstall must run the freshly rendered unit
        print(f"installed {written[0]} and {written[1]}; enabled and started "
              f"({SOCKET_UNIT} holds the socket, {UNIT} runs the daemon)")
        service_env_note()
        return 0

    def uninstall(self) -> int:
        if not any(os.path.exists(u) for u in self.units):
            print(f"not installed (no units in {self.unit_dir}): nothing to do")
            return 0
        why = systemd_reachable()
        if why:  # nothing can be disabled without a manager, but our files still go
            removed = self._remove_units()
            print(f"systemctl --user cannot reach a user manager ({why}), so nothing was "
                  "stopped or disabled; " + (f"removed {' and '.join(removed)}" if removed
                                             else f"no autoharness units in {self.unit_dir}")
                  + f"; from now on {AUTOSTART_NOTE}")
            return 0
        run(CTL + ["disable", "--now", UNIT, SOCKET_UNIT], check=False)
        self._remove_units()
        run(CTL + ["daemon-reload"], check=False)
        print(f"stopped, disabled and removed {self.units[0]} and {self.units[1]}; "
              f"from now on {AUTOSTART_NOTE}")
        return 0

    def start(self) -> int:
        self._need_installed()
        run(CTL + ["start", SOCKET_UNIT, UNIT])
        print("started autoharness.socket and autoharness.service")
        return 0

    def stop(self) -> int:
        self._need_installed()
        run(CTL + ["stop", UNIT, SOCKET_UNIT])
        print("stopped autoharness.service and autoharness.socket (the hook's autostart may "
              "start an unmanaged daemon; `autoharnessctl service start` brings the service "
              "back)")
        return 0

    def status(self) -> int:
        installed = self.installed
        why = systemd_reachable()
        print(f"service manager: systemd (user); units "
              f"{'installed' if installed else 'not installed'} in {self.unit_dir}")
        if why:  # no usable manager: like having none, autostart covers it
            print(f"systemctl --user cannot reach a user manager ({why}); {AUTOSTART_NOTE}")
            return 0
        if not installed:
            print("install them with `autoharnessctl service install`")
            return 1
        active = True
        for u in (SOCKET_UNIT, UNIT):
            state = run(CTL + ["is-active", u], check=False).stdout.strip() or "unknown"
            print(f"{u}: {state}")
            if u == SOCKET_UNIT:
                active = state == "active"
        return 0 if active else 1
