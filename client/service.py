"""`autoharnessctl service install|uninstall|start|stop|status`: keep autoharnessd running under
the user's service manager.

Linux: a systemd user unit plus a socket unit (systemd holds the socket, so hooks reach it even
while the daemon restarts; the daemon adopts it through LISTEN_FDS). macOS: a LaunchAgent.
Templates are package data (`client/templates/`); rendering fills in this installation's absolute
paths. Without either manager the hook's autostart keeps the daemon running, and we say so.
"""

from __future__ import annotations

import fcntl
import os
import plistlib
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from importlib import resources

from claude_autoharness.client import install
from claude_autoharness.client.conn import DaemonError, DaemonUnreachable, ask, call
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol import paths
from claude_autoharness.protocol import replies as r

UNIT = "autoharness.service"
SOCKET_UNIT = "autoharness.socket"
LABEL = "com.autoharness.daemon"
PLIST = f"{LABEL}.plist"
# Carried into the service so the daemon sees the same files as the hooks and the CLI. PATH is
# carried because service managers start with a minimal one and the `claude` backend needs it.
PASS_ENV = ("AUTOHARNESS_HOME", "AUTOHARNESS_CONFIG", "AUTOHARNESS_SOCKET", "CLAUDE_CONFIG_DIR",
            "PATH")
AUTOSTART_NOTE = ("the hook starts autoharnessd itself whenever it is not running (autostart, "
                  "on by default), so autoharness works without a service")


class ServiceError(Exception):
    pass


def template(name: str) -> str:
    return (resources.files("claude_autoharness.client") / "templates" / name).read_text()


def daemon_path() -> str:
    p = install.find_script("autoharnessd")
    if not p:
        raise ServiceError("cannot find the `autoharnessd` script of this installation: "
                           "reinstall autoharness (`pip install --force-reinstall claude-autoharness`)")
    return p


def service_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    source = os.environ if env is None else env
    return {k: source[k] for k in PASS_ENV if source.get(k)}


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
    return (template(UNIT).replace("{{AUTOHARNESSD}}", _systemd_exec(daemon))
            .replace("{{ENVIRONMENT}}\n", lines))


def listen_path(env: dict[str, str]) -> str:
    """Where the socket unit listens: %t (XDG_RUNTIME_DIR) is autoharness's default socket dir;
    with AUTOHARNESS_SOCKET/AUTOHARNESS_HOME set it must be the path the hooks will use."""
    if env.get("AUTOHARNESS_SOCKET") or env.get("AUTOHARNESS_HOME"):
        return paths.socket_path().replace("%", "%%")
    return f"%t/autoharness/{paths.SOCKET_NAME}"


def render_socket(listen: str) -> str:
    return template(SOCKET_UNIT).replace("{{SOCKET}}", listen)


def render_plist(daemon: str, log_file: str, env: dict[str, str]) -> bytes:
    data = plistlib.loads(template(PLIST).encode())
    data["ProgramArguments"] = [daemon]
    data["StandardOutPath"] = log_file
    data["StandardErrorPath"] = log_file
    if env:
        data["EnvironmentVariables"] = dict(sorted(env.items()))
    return plistlib.dumps(data)


def write_systemd(dest: str, daemon: str, env: dict[str, str]) -> list[str]:
    """Render both units into `dest` (~/.config/systemd/user, or a test's temp dir)."""
    os.makedirs(dest, exist_ok=True)
    out = []
    units = ((UNIT, render_service(daemon, env)), (SOCKET_UNIT, render_socket(listen_path(env))))
    for name, text in units:
        p = os.path.join(dest, name)
        install.atomic_write(p, text.encode(), 0o644)
        out.append(p)
    return out


def write_launchd(dest: str, daemon: str, log_file: str, env: dict[str, str]) -> str:
    os.makedirs(dest, exist_ok=True)
    p = os.path.join(dest, PLIST)
    # 0600: the environment it carries is the user's own business.
    install.atomic_write(p, render_plist(daemon, log_file, env), 0o600)
    return p


# ---- talking to the service manager -----------------------------------------------------------


def detect_manager() -> str | None:
    if sys.platform == "darwin" and shutil.which("launchctl"):
        return "launchd"
    if shutil.which("systemctl"):
        return "systemd"
    return None


def run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise ServiceError(f"`{' '.join(argv)}` could not run: {e}") from None
    if check and r.returncode != 0:
        msg = (r.stderr or r.stdout).strip().splitlines()
        raise ServiceError(f"`{' '.join(argv)}` failed: {msg[-1] if msg else r.returncode}")
    return r


def systemd_reachable() -> str | None:
    """None when `systemctl --user` works, else why not (containers, no login session)."""
    r = run(["systemctl", "--user", "show-environment"], check=False)
    if r.returncode == 0:
        return None
    lines = (r.stderr or r.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit status {r.returncode}"


def _daemon_gone() -> bool:
    """True once no daemon holds the single-instance lock (released when its process exits)."""
    try:
        fd = os.open(paths.lock_file(), os.O_RDONLY)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    finally:
        os.close(fd)


def stop_running_daemon(timeout: float = 15.0) -> int | None:
    """A daemon the hook autostarted must make way: the service would fight it for the socket.

    Waits for its lock to be released, not for the socket to go quiet: under socket activation
    systemd keeps the socket and may start a fresh daemon on the next connection.
    """
    try:
        pid = ask(m.Status(), r.Identity, timeout=5).pid
        call(m.Stop(), timeout=5)
    except (DaemonUnreachable, DaemonError):
        return None
    end = time.monotonic() + timeout
    while not _daemon_gone():
        if time.monotonic() > end:
            raise ServiceError(f"the running autoharnessd (pid {pid}) did not stop within "
                               f"{timeout:.0f}s: stop it (`kill {pid}`), then rerun")
        time.sleep(0.1)
    return pid


def _ours(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return b"autoharness" in f.read()
    except OSError:
        return False


def _remove_units(units: list[str]) -> list[str]:
    """Delete the unit files autoharness wrote (never a same-named file of someone else's)."""
    removed = []
    for u in units:
        if _ours(u):
            os.unlink(u)
            removed.append(u)
    return removed


def systemd_action(action: str, unit_dir: str) -> int:
    units = [os.path.join(unit_dir, n) for n in (UNIT, SOCKET_UNIT)]
    installed = all(os.path.exists(u) for u in units)
    if action == "uninstall" and not any(os.path.exists(u) for u in units):
        print(f"not installed (no units in {unit_dir}): nothing to do")
        return 0
    if action in ("start", "stop") and not installed:
        raise ServiceError(f"the units are not installed in {unit_dir}: run "
                           "`autoharnessctl service install` first")
    why = systemd_reachable()
    if why and action == "uninstall":
        # Nothing can be disabled without a manager, but our files still go: install and
        # uninstall stay inverse whatever state the manager is in.
        removed = _remove_units(units)
        print(f"systemctl --user cannot reach a user manager ({why}), so nothing was stopped "
              "or disabled; " + (f"removed {' and '.join(removed)}" if removed
                                 else f"no autoharness units in {unit_dir}")
              + f"; from now on {AUTOSTART_NOTE}")
        return 0
    if why and action != "status":
        # Nothing is written: units no manager will load would only be left behind.
        raise ServiceError(
            f"systemd is installed but `systemctl --user` cannot reach a user manager ({why}). "
            "Log in through a normal session (or `loginctl enable-linger $USER` on a server) "
            f"and rerun; until then {AUTOSTART_NOTE}")
    ctl = ["systemctl", "--user"]
    if action == "install":
        written = write_systemd(unit_dir, daemon_path(), service_env())
        pid = stop_running_daemon()
        if pid:
            print(f"stopped the running autoharnessd (pid {pid}) so the service takes over")
        run(ctl + ["daemon-reload"])
        run(ctl + ["enable", "--now", SOCKET_UNIT, UNIT])
        run(ctl + ["restart", UNIT])  # a reinstall must run the freshly rendered unit
        print(f"installed {written[0]} and {written[1]}; enabled and started "
              f"({SOCKET_UNIT} holds the socket, {UNIT} runs the daemon)")
        _service_env_note()
    elif action == "uninstall":
        run(ctl + ["disable", "--now", UNIT, SOCKET_UNIT], check=False)
        _remove_units(units)
        run(ctl + ["daemon-reload"], check=False)
        print(f"stopped, disabled and removed {units[0]} and {units[1]}; "
              f"from now on {AUTOSTART_NOTE}")
    elif action == "start":
        run(ctl + ["start", SOCKET_UNIT, UNIT])
        print("started autoharness.socket and autoharness.service")
    elif action == "stop":
        run(ctl + ["stop", UNIT, SOCKET_UNIT])
        print("stopped autoharness.service and autoharness.socket (the hook's autostart may start "
              "an unmanaged daemon; `autoharnessctl service start` brings the service back)")
    elif action == "status":
        print(f"service manager: systemd (user); units "
              f"{'installed' if installed else 'not installed'} in {unit_dir}")
        if why:  # no usable manager: like having none, autostart covers it
            print(f"systemctl --user cannot reach a user manager ({why}); {AUTOSTART_NOTE}")
            return 0
        if not installed:
            print("install them with `autoharnessctl service install`")
            return 1
        active = True
        for u in (SOCKET_UNIT, UNIT):
            state = run(ctl + ["is-active", u], check=False).stdout.strip() or "unknown"
            print(f"{u}: {state}")
            if u == SOCKET_UNIT:
                active = state == "active"
        return 0 if active else 1
    return 0


def launchd_action(action: str, agent_dir: str) -> int:
    plist = os.path.join(agent_dir, PLIST)
    domain = f"gui/{os.getuid()}"
    target = f"{domain}/{LABEL}"
    installed = os.path.exists(plist)
    if action in ("start", "stop") and not installed:
        raise ServiceError(f"the LaunchAgent is not installed ({plist}): run "
                           "`autoharnessctl service install` first")
    if action == "install":
        log_file = paths.log_file()
        install.private_dir(os.path.dirname(log_file))  # launchd opens the log, not the daemon
        written = write_launchd(agent_dir, daemon_path(), log_file, service_env())
        pid = stop_running_daemon()
        if pid:
            print(f"stopped the running autoharnessd (pid {pid}) so launchd takes over")
        run(["launchctl", "bootout", target], check=False)  # an older copy may be loaded
        run(["launchctl", "bootstrap", domain, written])
        print(f"installed {written} and loaded it (runs at login, restarted if it fails); "
              f"log: {log_file}")
        _service_env_note()
    elif action == "uninstall":
        run(["launchctl", "bootout", target], check=False)
        if installed and _ours(plist):
            os.unlink(plist)
            print(f"unloaded and removed {plist}; from now on {AUTOSTART_NOTE}")
        else:
            print(f"not installed ({plist}): nothing to do")
    elif action == "start":
        if run(["launchctl", "print", target], check=False).returncode != 0:
            run(["launchctl", "bootstrap", domain, plist])
        else:
            run(["launchctl", "kickstart", target])
        print(f"started {LABEL}")
    elif action == "stop":
        run(["launchctl", "bootout", target])
        print(f"stopped {LABEL} (unloaded until `autoharnessctl service start` or next login)")
    elif action == "status":
        print(f"service manager: launchd; LaunchAgent "
              f"{'installed' if installed else 'not installed'} ({plist})")
        r = run(["launchctl", "print", target], check=False)
        loaded = r.returncode == 0
        state = next((ln.strip() for ln in r.stdout.splitlines()
                      if ln.strip().startswith("state =")), "")
        print(f"{LABEL}: {'loaded' if loaded else 'not loaded'}{', ' + state if state else ''}")
        return 0 if installed and loaded else 1
    return 0


def _service_env_note() -> None:
    if os.environ.get("ANTHROPIC_API_KEY"):
        print("note: the service does not see this shell's ANTHROPIC_API_KEY; set "
              f"reflector.api_key in {paths.config_file()} (keep it mode 0600) so the daemon "
              "can use the anthropic backend")


def do_service(args) -> int:
    manager = detect_manager()
    try:
        if manager == "systemd":
            return systemd_action(args.action, paths.systemd_user_dir())
        if manager == "launchd":
            return launchd_action(args.action, paths.launch_agents_dir())
    except ServiceError as e:
        print(f"autoharnessctl: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"autoharnessctl: {e.filename or ''}: {e.strerror}", file=sys.stderr)
        return 1
    msg = ("no service manager found (neither systemctl nor launchctl is on PATH); "
           f"{AUTOSTART_NOTE}.")
    if args.action == "status":
        print(msg)
        return 0
    print(f"autoharnessctl: cannot {args.action} a service: {msg} To run it yourself, start "
          "`autoharnessd` (it stays in the foreground).", file=sys.stderr)
    return 1


def add_parser(sub) -> None:
    s = sub.add_parser(
        "service", help="run the daemon under systemd (Linux) or launchd (macOS)",
        description="Install, remove, start, stop or inspect the autoharnessd service: a systemd "
        "user unit and socket (~/.config/systemd/user) or a LaunchAgent (~/Library/LaunchAgents),"
        " rendered with this installation's absolute paths.")
    s.add_argument("action", choices=("install", "uninstall", "start", "stop", "status"),
                   metavar="ACTION",
                   help="install: write the unit (or agent), enable and start it; uninstall: "
                   "stop and remove it; start, stop: the installed service; status: what the "
                   "service manager says")
    s.set_defaults(func=do_service)
