"""The install behind `autoharnessctl install`: plan it, then write it.

It edits one settings file — `$CLAUDE_CONFIG_DIR/settings.json` (user scope) or
`<project>/.claude/settings.json` (project scope), through client/settings.py, which touches
only autoharness's own entries — and installs the `/learn` and `/save-learnings` commands next
to it. A record in the state dir remembers which keys, files and directories the install
created, so `--remove` takes out exactly those. A plan is computed first (nothing written) so
that `--dry-run` shows it and a refusal leaves every file as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import time
from dataclasses import dataclass, field
from importlib import resources

from ..daemon.offline import write_atomic
from ..protocol import paths, private
from .errors import CtlError
from .files import (
    atomic_write,
    default_mode,
    find_script,
    missing_dirs,
    private_dir,
)
from .preflight import dir_problem, state_problem
from .settings import (
    COMMANDS,
    HOOK,
    Source,
    created_keys,
    dumps,
    dumps_like,
    enabled_plugin,
    is_counting,
    iter_entries,
    read_settings,
    script_python,
    settings_command,
    settings_sources,
    unwire,
    wire,
)


class InstallError(CtlError):
    """Something the user must fix first; nothing has been written."""


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def original_settings(rec: dict | None, unwired: dict) -> bytes | None:
    """The settings file's bytes from before autoharness first wired it, if taking autoharness
    out leaves exactly that content: then `--remove` gives back the very same bytes."""
    path = (rec or {}).get("original_backup")
    if not path or rec is None:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
        if _sha(data) != rec.get("original_sha256") or json.loads(data) != unwired:
            return None
    except (OSError, ValueError):
        return None
    return data


def command_text(name: str) -> bytes:
    return (resources.files("claude_autoharness.client") / "commands" / name).read_bytes()


def hook_path() -> str:
    p = find_script(HOOK)
    if not p:
        raise InstallError(
            f"cannot find the `{HOOK}` script next to this Python "
            f"({os.path.dirname(sys.executable)}) or on PATH: reinstall autoharness "
            "(`pip install --force-reinstall claude-autoharness`), then rerun this command")
    return p


def backup(path: str, data: bytes) -> str:
    """Keep `data` (the file as it was) under the state dir, private: settings may hold keys."""
    bdir = os.path.join(paths.install_dir(), "backups")
    try:
        private_dir(bdir)
    except private.NotPrivate as e:  # made by an older version, or by hand: no copy goes there
        raise InstallError(f"{e.unsafe.what}; settings backups (they may hold keys) go there, "
                           f"so nothing was changed: {e.unsafe.fix}") from None
    stem = os.path.join(bdir, f"{paths.project_slug(os.path.abspath(path)).strip('-')}."
                              f"{time.strftime('%Y%m%dT%H%M%S')}")
    out, n = stem, 0
    while True:
        try:
            fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            break
        except FileExistsError:
            n += 1
            out = f"{stem}-{n}"
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    return out


def _record_file() -> str:
    return os.path.join(paths.install_dir(), "record.json")


def load_record() -> dict:
    try:
        with open(_record_file(), "rb") as f:
            data = json.loads(f.read())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def save_record(record: dict) -> None:
    private_dir(paths.install_dir())
    # replaced, never written through: a link planted as the record is not followed
    write_atomic(_record_file(), dumps(record).encode(), 0o600)


# ---- the plan -------------------------------------------------------------------------------


@dataclass
class Change:
    path: str
    action: str  # create | update | delete | unchanged | kept
    old: bytes | None = None
    new: bytes | None = None
    note: str = ""
    mode: int | None = None  # the mode to write `new` with (None: keep the file's)


@dataclass
class Plan:
    scope: str
    settings_path: str
    changes: list[Change] = field(default_factory=list)
    record: dict = field(default_factory=dict)
    hook: str | None = None
    warnings: list[str] = field(default_factory=list)  # what --force went past

    @property
    def changed(self) -> bool:
        return any(c.action in ("create", "update", "delete") for c in self.changes)


def targets(scope: str, project: str) -> tuple[str, str]:
    if scope == "user":
        return paths.user_settings_file(), paths.user_commands_dir()
    return paths.project_settings_file(project), paths.project_commands_dir(project)


def conflicts(scope: str, settings_path: str, sources: list[Source]) -> list[str]:
    """Reasons an install would make Claude Code count each call twice."""
    out = []
    me = os.path.realpath(settings_path)
    for src in sources:
        if src.data is None:
            continue
        for key in enabled_plugin(src.data):
            out.append(f"the autoharness Claude Code plugin is enabled ({src.label} {src.path}: "
                       f"enabledPlugins \"{key}\"), and its hooks already report every call; "
                       f"keep the plugin, or disable it (/plugin) and rerun")
        if os.path.realpath(src.path) == me:
            continue
        if any(ev == "PreToolUse" and is_counting(cmd) for ev, _, cmd in iter_entries(src.data)):
            other = "user" if src.label == "user settings" else "project"
            out.append(f"autoharness hooks are already in the {src.label} ({src.path}); "
                       f"remove them first (`autoharnessctl install --remove --scope {other}`) "
                       f"or keep that install")
    return out


REPLACING = "replacing your own file"


def plan_install(scope: str, project: str, *, force: bool = False) -> Plan:
    settings_path, commands_dir = targets(scope, project)
    raw, settings = read_settings(settings_path)  # malformed: stop before anything else
    found = conflicts(scope, settings_path, settings_sources(project))
    if found and not force:
        raise InstallError(
            "not installing: " + "; ".join(found) + ". Two sets of autoharness hooks would "
            "both run for every event (each call is still counted once, but every tool call "
            "starts two hooks). Pass --force to install anyway")
    hook = hook_path()
    plan = Plan(scope, settings_path, hook=hook, warnings=found)
    key = os.path.realpath(settings_path)
    rec = dict(load_record().get(key) or {})
    rec.setdefault("scope", scope)
    rec.setdefault("created_file", raw is None)
    rec["created_keys"] = sorted(set(rec.get("created_keys") or []) | created_keys(settings))
    dirs = list(rec.get("created_dirs") or [])

    new = wire(settings, settings_command(hook, script_python(hook)))
    if raw is None:
        dirs += [d for d in missing_dirs(settings_path) if d not in dirs]
        plan.changes.append(Change(settings_path, "create", None, dumps(new).encode()))
    elif new != settings:
        if not rec.get("original_sha256"):  # the file as the user had it, kept for --remove
            rec["original_sha256"] = _sha(raw)
        plan.changes.append(Change(settings_path, "update", raw, dumps_like(new, raw)))
    else:
        plan.changes.append(Change(settings_path, "unchanged", raw, raw))

    for name in COMMANDS:
        p = os.path.join(commands_dir, name)
        want = command_text(name)
        try:
            with open(p, "rb") as f:
                have = f.read()
        except (FileNotFoundError, NotADirectoryError):  # a file in the way: check_writable
            for d in missing_dirs(p):
                if d not in dirs:
                    dirs.append(d)
            plan.changes.append(Change(p, "create", None, want))
            continue
        if have == want:
            plan.changes.append(Change(p, "unchanged", have, have))
        elif b"autoharnessctl" in have:
            plan.changes.append(Change(p, "update", have, want, "older autoharness version"))
        elif force:
            plan.changes.append(Change(p, "update", have, want, REPLACING))
        else:
            raise InstallError(
                f"{p} exists and is not autoharness's; nothing was changed. Rename it to keep "
                "it, or pass --force to replace it (a backup is kept)")
    rec["created_dirs"] = dirs
    plan.record = rec
    return plan


def replaced_original(rec: dict | None, path: str) -> tuple[bytes, int] | None:
    """The user's own file that an install with --force replaced at `path` (its bytes and
    mode, from the backup kept then), if that backup is still there and intact."""
    entry = ((rec or {}).get("replaced") or {}).get(path)
    if not isinstance(entry, dict):
        return None
    try:
        with open(entry["backup"], "rb") as f:
            data = f.read()
    except (OSError, KeyError, TypeError):
        return None
    if _sha(data) != entry.get("sha256"):
        return None
    mode = entry.get("mode")
    return data, mode if isinstance(mode, int) else default_mode()


def plan_remove(scope: str, project: str) -> Plan:
    settings_path, commands_dir = targets(scope, project)
    raw, settings = read_settings(settings_path)
    key = os.path.realpath(settings_path)
    rec = load_record().get(key)
    created = set(rec.get("created_keys") or []) if rec else None
    plan = Plan(scope, settings_path, record=rec or {})
    if raw is not None:
        new = unwire(settings, created)
        if new == settings:
            plan.changes.append(Change(settings_path, "unchanged", raw, raw))
        elif not new and rec and rec.get("created_file"):
            plan.changes.append(Change(settings_path, "delete", raw, None))
        else:
            restored = original_settings(rec, new) or dumps_like(new, raw)
            plan.changes.append(Change(settings_path, "update", raw, restored))
    for name in COMMANDS:
        p = os.path.join(commands_dir, name)
        try:
            with open(p, "rb") as f:
                have = f.read()
        except FileNotFoundError:
            continue
        if have == command_text(name) or b"autoharnessctl" in have:
            original = replaced_original(rec, p)
            if original is not None:  # the user's own file comes back, byte for byte
                plan.changes.append(Change(p, "update", have, original[0],
                                           "your own file put back", mode=original[1]))
            else:
                plan.changes.append(Change(p, "delete", have, None))
        else:
            plan.changes.append(Change(p, "kept", have, have, "not autoharness's"))
    return plan


def check_writable(plan: Plan) -> None:
    """Raise InstallError, before anything is written, when the plan could not finish: the
    state dir, where the record and the backups go, is not a private dir of ours that can be
    written (checked from the top down before anything is made in it), or a file's directory
    cannot be written. A plan with no record to keep and nothing to change needs neither."""
    if not plan.changed and not plan.record:
        return
    why = state_problem(os.path.join(paths.install_dir(), "backups"))
    for c in plan.changes:
        if why:
            break
        if c.action in ("create", "update", "delete"):
            why = dir_problem(os.path.dirname(c.path))
    if why:
        raise InstallError(f"{why}; nothing was changed")


def apply(plan: Plan, *, remove: bool) -> dict[str, str]:
    """Write the plan; return {path: backup path} for every existing file changed. Checked
    first (`check_writable`): the state dir, where the record and backups go, must be private
    and usable, and the plan must be able to finish; otherwise nothing is changed."""
    check_writable(plan)
    backups = {}
    for c in plan.changes:
        if c.action not in ("create", "update", "delete"):
            continue
        if c.old is not None and c.old != c.new:
            if c.path == plan.settings_path or c.old != command_text(os.path.basename(c.path)):
                backups[c.path] = backup(c.path, c.old)
            if c.note == REPLACING and c.path not in (plan.record.get("replaced") or {}):
                # kept so that --remove puts the user's file back as it was
                st = os.stat(c.path)
                plan.record.setdefault("replaced", {})[c.path] = {
                    "backup": backups[c.path], "sha256": _sha(c.old),
                    "mode": stat.S_IMODE(st.st_mode)}
            if (c.path == plan.settings_path and not remove
                    and plan.record.get("original_sha256") == _sha(c.old)
                    and not plan.record.get("original_backup")):
                plan.record["original_backup"] = backups[c.path]
        if c.action == "delete":
            os.unlink(c.path)
        else:
            for d in missing_dirs(c.path):
                os.makedirs(d, exist_ok=True)
            atomic_write(c.path, c.new or b"", c.mode)
    record = load_record()
    key = os.path.realpath(plan.settings_path)
    if remove:
        for d in sorted(plan.record.get("created_dirs") or [], key=len, reverse=True):
            try:
                os.rmdir(d)  # only if empty: anything the user put there stays
            except OSError:
                pass
        if record.pop(key, None) is not None:
            save_record(record)
    elif plan.changed or record.get(key) != plan.record:
        record[key] = plan.record
        save_record(record)
    return backups
