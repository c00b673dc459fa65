"""launchd (macOS): a LaunchAgent that runs autoharnessd at login and restarts it if it fails,
loaded into the user's GUI domain through `launchctl`."""

from __future__ import annotations

import os
import plistlib

from ..protocol import paths
from .files import atomic_write, private_dir
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

LABEL = "com.autoharness.daemon"
PLIST = f"{LABEL}.plist"


def render_plist(daemon: str, log_file: str, env: dict[str, str]) -> bytes:
    data = plistlib.loads(template("launchd", PLIST).encode())
    data["ProgramArguments"] = [daemon]
    data["StandardOutPath"] = log_file
    data["StandardErrorPath"] = log_file
    if env:
        data["EnvironmentVariables"] = dict(sorted(env.items()))
    return plistlib.dumps(data)


def write_launchd(dest: str, daemon: str, log_file: str, env: dict[str, str]) -> str:
    os.makedirs(dest, exist_ok=True)
    p = os.path.join(dest, PLIST)
    # 0600: the environment it carries is the user's own business.
    atomic_write(p, render_plist(daemon, log_file, env), 0o600)
    return p


class Launchd(Manager):
    """The LaunchAgent in `agent_dir` (~/Library/LaunchAgents), in domain gui/<uid>."""

    def __init__(self, agent_dir: str):
        self.agent_dir = agent_dir
        self.plist = os.path.join(agent_dir, PLIST)
        self.domain = f"gui/{os.getuid()}"
        self.target = f"{self.domain}/{LABEL}"

    def _need_installed(self) -> None:
        if not os.path.exists(self.plist):
            raise ServiceError(f"the LaunchAgent is not installed ({self.plist}): run "
                               "`autoharnessctl service install` first")

    def install(self) -> int:
        log_file = paths.log_file()
        private_dir(os.path.dirname(log_file))  # launchd opens the log, not the daemon
        written = write_launchd(self.agent_dir, daemon_path(), log_file, service_env())
        pid = stop_running_daemon()
        if pid:
            print(f"stopped the running autoharnessd (pid {pid}) so launchd takes over")
        run(["launchctl", "bootout", self.target], check=False)  # an older copy may be loaded
        run(["launchctl", "bootstrap", self.domain, written])
        print(f"installed {written} and loaded it (runs at login, restarted if it fails); "
              f"log: {log_file}")
        service_env_note()
        return 0

    def uninstall(self) -> int:
        installed = os.path.exists(self.plist)
        run(["launchctl", "bootout", self.target], check=False)
        if installed and ours(self.plist):
            os.unlink(self.plist)
            print(f"unloaded and removed {self.plist}; from now on {AUTOSTART_NOTE}")
        else:
            print(f"not installed ({self.plist}): nothing to do")
        return 0

    def start(self) -> int:
        self._need_installed()
        if run(["launchctl", "print", self.target], check=False).returncode != 0:
            run(["launchctl", "bootstrap", self.domain, self.plist])
        else:
            run(["launchctl", "kickstart", self.target])
        print(f"started {LABEL}")
        return 0

    def stop(self) -> int:
        self._need_installed()
        run(["launchctl", "bootout", self.target])
        print(f"stopped {LABEL} (unloaded until `autoharnessctl service start` or next login)")
        return 0

    def status(self) -> int:
        installed = os.path.exists(self.plist)
        print(f"service manager: launchd; LaunchAgent "
              f"{'installed' if installed else 'not installed'} ({self.plist})")
        r = run(["launchctl", "print", self.target], check=False)
        loaded = r.returncode == 0
        state = next((ln.strip() for ln in r.stdout.splitlines()
                      if ln.strip().startswith("state =")), "")
        print(f"{LABEL}: {'loaded' if loaded else 'not loaded'}{', ' + state if state else ''}")
        return 0 if installed and loaded else 1
