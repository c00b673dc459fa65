"""Every path autoharness uses, computed in one place.

Stdlib only and cheap to import: the hook client resolves the socket and spool through here on
every tool call, so platformdirs (≈25 ms to import) is mirrored, not imported. A test checks the
mirror against platformdirs.
"""

import os
import sys

APP = "autoharness"
SOCKET_NAME = "autoharness.sock"
SPOOL = "spool"  # under the state dir: the hook writes into it by this name
# sun_path is 108 bytes on Linux and 104 on macOS, including the terminating NUL.
MAX_SOCKET_PATH = 103 if sys.platform == "darwin" else 107


def make_private_dirs(path: str) -> None:
    """Create `path` and every missing parent with mode 0700.

    `os.makedirs(mode=0o700)` applies the mode to the last directory only, so a state dir made
    with a missing parent (AUTOHARNESS_HOME, ~/.local/state) would leave that parent open to
    others under the usual umask; each missing component is made here, outermost first.
    """
    missing = []
    d = os.path.abspath(path)
    while not os.path.isdir(d):
        missing.append(d)
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    for m in reversed(missing):
        try:
            os.mkdir(m, 0o700)
        except FileExistsError:
            if not os.path.isdir(m):
                raise


def within(path: str, root: str) -> bool:
    """Whether `path` is `root` or below it (both already absolute and normalised)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _home() -> str | None:
    return os.environ.get("AUTOHARNESS_HOME") or None


def _user_dir(xdg_var: str, xdg_default: str, mac_default: str) -> str:
    if sys.platform == "darwin":
        return os.path.join(os.path.expanduser(mac_default), APP)
    base = os.environ.get(xdg_var, "").strip() or os.path.expanduser(xdg_default)
    return os.path.join(base, APP)


def config_dir() -> str:
    home = _home()
    if home:
        return home
    return _user_dir("XDG_CONFIG_HOME", "~/.config", "~/Library/Application Support")


def config_file() -> str:
    return os.environ.get("AUTOHARNESS_CONFIG") or os.path.join(config_dir(), "config.toml")


def state_dir() -> str:
    home = _home()
    if home:
        return os.path.join(home, "state")
    return _user_dir("XDG_STATE_HOME", "~/.local/state", "~/Library/Application Support")


def run_dir() -> str:
    """The directory holding the socket (0700); also where the lock lives."""
    home = _home()
    if home:
        return os.path.join(home, "run")
    runtime = os.environ.get("XDG_RUNTIME_DIR", "").strip()
    if runtime and sys.platform != "darwin":
        return os.path.join(runtime, APP)
    return os.path.join(state_dir(), "run")


def socket_path() -> str:
    return os.environ.get("AUTOHARNESS_SOCKET") or os.path.join(run_dir(), SOCKET_NAME)


def spool_dir() -> str:
    """Events no daemon acknowledged: one file each."""
    return os.path.join(state_dir(), SPOOL)


def lock_file() -> str:
    return os.path.join(state_dir(), "daemon.lock")


def spawn_lock_file() -> str:
    return os.path.join(state_dir(), "spawn.lock")


def autostart_tries_file() -> str:
    """The hook's record of daemon spawns that have not reached `ready` (its back-off)."""
    return os.path.join(state_dir(), "autostart.tries")


def snapshot_file() -> str:
    return os.path.join(state_dir(), "snapshot.json")


def previous_snapshot_file() -> str:
    """The snapshot a newer one replaced, kept with the journal since it."""
    return os.path.join(state_dir(), "snapshot.prev.json")


def journal_file() -> str:
    return os.path.join(state_dir(), "journal.jsonl")


def intents_file() -> str:
    return os.path.join(state_dir(), "intents.jsonl")


def reflected_file() -> str:
    """The uuids (hashed) of transcript records already handed to a reflector."""
    return os.path.join(state_dir(), "reflected-records.bin")


def checks_table_file() -> str:
    """The compiled table of live checks the PreToolUse check hook reads."""
    return os.path.join(state_dir(), "checks.table")


def reflector_dir() -> str:
    """Working directory of reflector child sessions; events from under it never count."""
    return os.path.join(state_dir(), "reflector")


def windows_dir() -> str:
    """Each job's redacted window, kept so the promoter can re-check evidence."""
    return os.path.join(state_dir(), "windows")


def replays_dir() -> str:
    """Copies of transcripts `autoharnessctl replay` plays through the daemon (a transcript root)."""
    return os.path.join(state_dir(), "replays")


def sync_dir() -> str:
    """The user layer's sync repository (`repo/`), its round lock and its state."""
    return os.path.join(state_dir(), "sync")


def sync_state_file() -> str:
    return os.path.join(sync_dir(), "state.json")


def quarantine_dir() -> str:
    return os.path.join(state_dir(), "quarantine")


def report_log_file() -> str:
    """What the report needs that nothing else keeps: model usage per call, SessionStart
    context sizes, skill loads with their turn, sessions' tool calls."""
    return os.path.join(state_dir(), "report.jsonl")


def log_file() -> str:
    return os.path.join(state_dir(), "daemon.log")


def claude_dir() -> str:
    return os.environ.get("CLAUDE_CONFIG_DIR") or os.path.expanduser("~/.claude")


def claude_projects_dir() -> str:
    return os.path.join(claude_dir(), "projects")


def claude_state_file() -> str:
    """Claude Code's own user state (`skillUsage` among it): `.claude.json` in its config dir
    when CLAUDE_CONFIG_DIR is set, else in the home directory. autoharness only reads it."""
    d = os.environ.get("CLAUDE_CONFIG_DIR")
    return os.path.join(d, ".claude.json") if d else os.path.expanduser("~/.claude.json")


def user_skills_dir() -> str:
    return os.path.join(claude_dir(), "skills")


def project_skills_dir(project_root: str) -> str:
    return os.path.join(project_root, ".claude", "skills")


def project_slug(path: str) -> str:
    """Claude Code's project directory name: every non-alphanumeric character becomes '-'."""
    return "".join(c if c.isalnum() and c.isascii() else "-" for c in path)


# ---- install/service targets (used by `autoharnessctl install|service|doctor`) --------------


def user_settings_file() -> str:
    return os.path.join(claude_dir(), "settings.json")


def project_settings_file(project_root: str, local: bool = False) -> str:
    """`.claude/settings.json` (shared) or `.claude/settings.local.json` (personal) of a project."""
    return os.path.join(project_root, ".claude", "settings.local.json" if local else "settings.json")


def user_commands_dir() -> str:
    return os.path.join(claude_dir(), "commands")


def project_commands_dir(project_root: str) -> str:
    return os.path.join(project_root, ".claude", "commands")


PLUGIN_NAME = "autoharness"  # Claude Code namespaces a plugin's commands with its name


def slash_command(name: str, plugin: bool = False) -> str:
    """A slash command as it exists in the install in effect: `/learn` from the commands dir
    the settings install fills, `/autoharness:learn` from the plugin."""
    return f"/{PLUGIN_NAME}:{name}" if plugin else f"/{name}"


def install_dir() -> str:
    """What `autoharnessctl install` remembers: its record of what it created, settings backups."""
    return os.path.join(state_dir(), "install")


def systemd_user_dir() -> str:
    """Where systemd looks for the user's own units (not affected by AUTOHARNESS_HOME)."""
    base = os.environ.get("XDG_CONFIG_HOME", "").strip() or os.path.expanduser("~/.config")
    return os.path.join(base, "systemd", "user")


def launch_agents_dir() -> str:
    return os.path.expanduser("~/Library/LaunchAgents")
