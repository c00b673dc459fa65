"""What the two service managers behind `autoharnessctl service` share: the interface each
implements (`Manager`), the environment carried into the service, running the manager's tool,
and making way for a daemon the hook autostarted.

Linux: a systemd user unit plus a socket unit (client/service_systemd.py). macOS: a LaunchAgent
(client/service_launchd.py). The templates are package data packaged from the repository's
top-level `systemd/` and `launchd/` folders; rendering fills in this installation's absolute
paths. Without either manager the hook's autostart keeps the daemon running, and the verb says
so.
"""

from __future__ import annotations

import os
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Mapping
from importlib import resources

from ..protocol import paths
from .conn import DaemonError, DaemonUnreachable
from .errors import CtlError
from .files import find_script
from .stopping import STOP_WAIT_S, stop_daemon, wait_gone

ACTIONS = ("install", "uninstall", "start", "stop", "status")
# Carried into the service so the daemon sees the same files as the hooks and the CLI. PATH is
# carried because service managers start with a minimal one and the `claude` backend needs it.
PASS_ENV = ("AUTOHARNESS_HOME", "AUTOHARNESS_CONFIG", "AUTOHARNESS_SOCKET", "CLAUDE_CONFIG_DIR",
            "PATH")
AUTOSTART_NOTE = ("the hook starts autoharnessd itself whenever it is not running (autostart, "
                  "on by default), so autoharness works without a service")


class ServiceError(CtlError):
    """The service manager refused, or cannot be reached; the message says what to do."""


class Manager(ABC):
    """One service manager. Each action prints what it did and returns the exit code (status:
    1 when the service is not installed or not running); what stops it raises ServiceError."""

    def act(self, action: str) -> int:
        """`action` is one of ACTIONS (the parser's choices), each a method below."""
        return getattr(self, action)()

    @abstractmethod
    def install(self) -> int: ...

    @abstractmethod
    def uninstall(self) -> int: ...

    @abstractmethod
    def start(self) -> int: ...

    @abstractmethod
    def stop(self) -> int: ...

    @abstractmethod
    def status(self) -> int: ...


def template(folder: str, name: str) -> str:
    """A unit template as packaged from the repository's top-level `systemd/` or `launchd/`."""
    return (resources.files(f"claude_autoharness.{folder}") / name).read_text()


def daemon_path() -> str:
    p = find_script("autoharnessd")
    if not p:
        raise ServiceError("cannot find the `autoharnessd` script of this installation: "
                           "reinstall autoharness (`pip install --force-reinstall claude-autoharness`)")
    return p


def service_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    source = os.environ if env is None else env
    return {k: source[k] for k in PASS_ENV if source.get(k)}


def run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise ServiceError(f"`{' '.join(argv)}` could not run: {e}") from None
    if check and r.returncode != 0:
        msg = (r.stderr or r.stdout).strip().splitlines()
        raise ServiceError(f"`{' '.join(argv)}` failed: {msg[-1] if msg else r.returncode}")
    return r


def stop_running_daemon(timeout: float = STOP_WAIT_S) -> int | None:
    """A daemon the hook autostarted must make way: the service would fight it for the socket.
    Its pid once it is gone; None when none answered."""
    try:
        out = stop_daemon(timeout=5)
    except (DaemonUnreachable, DaemonError):
        return None
    if out is None:
        return None
    if not wait_gone(out.pid, timeout):
        raise ServiceError(f"the running autoharnessd (pid {out.pid}) did not stop within "
                           f"{timeout:.0f}s: stop it (`kill {out.pid}`), then rerun")
    return out.pid


def ours(path: str) -> bool:
    """Whether a unit file or agent is one autoharness wrote (never remove someone else's)."""
    try:
        with open(path, "rb") as f:
            return b"autoharness" in f.read()
    except OSError:
        return False


def service_env_note() -> None:
    if os.environ.get("ANTHROPIC_API_KEY"):
        print("note: the service does not see this shell's ANTHROPIC_API_KEY; set "
              f"reflector.api_key in {paths.config_file()} (keep it mode 0600) so the daemon "
              "can use the anthropic backend")
