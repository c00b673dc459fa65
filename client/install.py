"""`autoharnessctl install`: wire autoharness into Claude Code.

It edits one settings file — `$CLAUDE_CONFIG_DIR/settings.json` (user scope) or
`<project>/.claude/settings.json` (project scope) — and installs the `/learn` and
`/save-learnings` commands next to it. Only autoharness's own entries are ever touched: they are
recognised by the hook program's name (`autoharness-hook`, whatever directory it lives in) or by
the child guard's marker, so a stale entry from another installation is replaced and every other
hook and setting keeps its place and content. A record in the state dir remembers which keys,
files and directories the install created, so `--remove` takes out exactly those.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from importlib import resources

from claude_autoharness.daemon.offline import write_atomic
from claude_autoharness.protocol import paths, private

HOOK = "autoharness-hook"
PLUGIN = "autoharness"
EVENTS = ("SessionStart", "PreToolUse", "Stop", "SessionEnd")
CHILD_MATCHER = "Write|Edit|MultiEdit|NotebookEdit"
GUARD_MARK = "autoharness-child-guard"
COMMANDS = ("learn.md", "save-learnings.md")

# Timeouts are seconds (Claude Code's unit). SessionStart is synchronous because its output is
# the context; the hook itself gives up after ~2 s. Stop is synchronous because `claude -p` kills
# async hooks still running at exit, and a lost Stop is a lost threshold (the hook costs ~15 ms,
# once per turn). All SessionEnd hooks share 1.5 s. Async hooks never hold a tool call; the
# timeout only bounds versions of Claude Code that run them inline.
SESSION_START_TIMEOUT = 5
STOP_TIMEOUT = 5
SESSION_END_TIMEOUT = 1
ASYNC_TIMEOUT = 5
GUARD_TIMEOUT = 5

_DENY = json.dumps(
    {"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "autoharness reflector sessions may not modify files",
    }},
    separators=(",", ":"),
)
# Reflector children must not write files. This decides from the environment alone, inside the
# shell Claude Code starts anyway: no Python, no daemon round trip, and it never counts.
CHILD_GUARD = (f': {GUARD_MARK}; [ "$AUTOHARNESS_CHILD_SESSION" = 1 ] && '
               f"printf '%s\\n' '{_DENY}'; exit 0")
# The plugin cannot know where autoharness was pip-installed, so its hooks run a shim shipped in
# the plugin (`hooks/run-hook`) that runs the hook from PATH and does nothing when it is missing:
# a hook must never fail a tool call. Claude Code sets CLAUDE_PLUGIN_ROOT for plugin hooks.
PLUGIN_SHIM = "hooks/run-hook"
PLUGIN_HOOK = f'"${{CLAUDE_PLUGIN_ROOT}}/{PLUGIN_SHIM}"'
# AUTOHARNESS_VIA tells the daemon which install ran the hook, so that what it tells the model
# names the slash commands as they exist there (the plugin's are `/autoharness:learn`).
PLUGIN_SHIM_TEXT = f"""#!/bin/sh
# autoharness Claude Code plugin: run the installed `{HOOK}` (pip install claude-autoharness)
# with the hook event on stdin. Without it, succeed at once and print nothing: a hook must
# never fail or slow a tool call. (Generated: claude_autoharness.client.install.PLUGIN_SHIM_TEXT.)
if command -v {HOOK} >/dev/null 2>&1; then
    export AUTOHARNESS_VIA=plugin
    exec {HOOK}
fi
exit 0
"""


class InstallError(Exception):
    """Something the user must fix first; nothing has been written."""


# ---- what autoharness installs -------------------------------------------------------------


def hook_groups(hook_cmd: str) -> dict[str, list[dict]]:
    """The hook groups autoharness wants, per event, for a given hook command."""

    def run(timeout: int, is_async: bool = False) -> dict:
        entry: dict[str, object] = {"type": "command", "command": hook_cmd}
        if is_async:
            entry["async"] = True
        entry["timeout"] = timeout
        return entry

    guard = {"type": "command", "command": CHILD_GUARD, "timeout": GUARD_TIMEOUT}
    return {
        "SessionStart": [{"hooks": [run(SESSION_START_TIMEOUT)]}],
        # One matcher-less counting group: a second counting group would count a call twice.
        "PreToolUse": [{"hooks": [run(ASYNC_TIMEOUT, True)]},
                       {"matcher": CHILD_MATCHER, "hooks": [guard]}],
        "Stop": [{"hooks": [run(STOP_TIMEOUT)]}],
        "SessionEnd": [{"hooks": [run(SESSION_END_TIMEOUT)]}],
    }


def plugin_hooks() -> dict:
    """The Claude Code plugin's `hooks/hooks.json` (the top-level copy must equal this)."""
    return {
        "description": "autoharness: report hook events to the local autoharness daemon "
                       "(needs `autoharness-hook` on PATH: pip install claude-autoharness)",
        "hooks": hook_groups(PLUGIN_HOOK),
    }


def dumps(data) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def dumps_like(data, raw: bytes | None) -> bytes:
    """`data` as JSON in the style of `raw` (the file it replaces): the same indent unit (tabs,
    2 or 4 spaces) and the same trailing newline, so a user's file is not re-indented."""
    if not raw or not raw.strip():
        return dumps(data).encode()
    text = raw.decode("utf-8", "replace")
    indent: str | int = 2
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            indent = line[: len(line) - len(stripped)]
            break
    out = json.dumps(data, indent=indent, ensure_ascii=False)
    return (out + "\n" * (len(text) - len(text.rstrip("\n")))).encode()


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


def find_script(name: str) -> str | None:
    """An installed script of this installation: pip puts them in the interpreter's scripts dir."""
    for d in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return os.path.abspath(p)
    found = shutil.which(name)
    return os.path.abspath(found) if found else None


def hook_path() -> str:
    p = find_script(HOOK)
    if not p:
        raise InstallError(
            f"cannot find the `{HOOK}` script next to this Python "
            f"({os.path.dirname(sys.executable)}) or on PATH: reinstall autoharness "
            "(`pip install --force-reinstall claude-autoharness`), then rerun this command")
    return p


def script_python(script: str) -> str | None:
    """The interpreter a pip-installed script names on its `#!` line, when that is a plain
    absolute path to a program that exists (pip writes a `/bin/sh` trampoline instead for paths
    with spaces or too long for a `#!` line: then None)."""
    try:
        with open(script, "rb") as f:
            first = f.readline(512)
    except OSError:
        return None
    words = first[2:].split() if first.startswith(b"#!") else []
    if len(words) != 1:
        return None
    exe = os.fsdecode(words[0])
    name = os.path.basename(exe)
    ok = os.path.isabs(exe) and name.startswith("python") and os.access(exe, os.X_OK)
    return exe if ok else None


def settings_command(hook: str, python: str | None) -> str:
    """The hook command the settings install writes: the script's own interpreter started with
    `-I -S` (no `site` setup, no user paths: the fastest start measured, see
    bench/hook_latency.py), guarded so that a vanished install (a deleted venv, a moved pipx
    home) exits 0 in silence instead of failing every turn; `doctor` reports it."""
    q = shlex.quote
    if python is None:  # no interpreter to name: run the script itself, as guarded
        return f"[ -x {q(hook)} ] && AUTOHARNESS_VIA=settings exec {q(hook)}; exit 0"
    return (f"[ -x {q(python)} ] && [ -f {q(hook)} ] && AUTOHARNESS_VIA=settings "
            f"exec {q(python)} -I -S {q(hook)}; exit 0")


# ---- recognising autoharness's entries ------------------------------------------------------


def _words(cmd: str) -> list[str]:
    """A command's words as the shell splits them, `;` and `&&` words of their own."""
    lex = shlex.shlex(cmd, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    try:
        return list(lex)
    except ValueError:
        return cmd.split()


def is_ours(cmd) -> bool:
    """Does a hook command belong to autoharness (any path, any layout we ever wrote)?"""
    if not isinstance(cmd, str):
        return False
    if GUARD_MARK in cmd:
        return True
    return any(os.path.basename(w) == HOOK or w.startswith("claude_autoharness.client.hook")
               or w == PLUGIN_HOOK.strip('"') for w in _words(cmd))


def is_counting(cmd) -> bool:
    return is_ours(cmd) and GUARD_MARK not in cmd


def hook_program(cmd: str) -> str | None:
    """The `autoharness-hook` a command runs, as written (absolute path or a bare name)."""
    for w in _words(cmd):
        if os.path.basename(w) == HOOK:
            return w
    return None


def is_guarded(cmd: str) -> bool:
    """A command of the `settings_command` form: it exits 0 when its program is gone."""
    return cmd.startswith("[ -x ") and cmd.endswith("; exit 0")


def hook_interpreter(cmd: str) -> str | None:
    """The interpreter a command starts the hook with (`PYTHON -I -S HOOK`), or None when it
    runs the script itself."""
    words = _words(cmd)
    for i, w in enumerate(words[:-1]):
        if words[i + 1] == "-I" and os.path.basename(w).startswith("python"):
            return w
    return None


def _entry_is_ours(h) -> bool:
    return isinstance(h, dict) and is_ours(h.get("command"))


def _group_has_ours(g) -> bool:
    return isinstance(g, dict) and isinstance(g.get("hooks"), list) and any(
        _entry_is_ours(h) for h in g["hooks"])


def strip_groups(groups: list) -> list:
    """The groups without autoharness's entries; a group left empty by that is dropped."""
    out = []
    for g in groups:
        if _group_has_ours(g):
            kept = [h for h in g["hooks"] if not _entry_is_ours(h)]
            if kept:
                out.append({**g, "hooks": kept})  # dict order kept: matcher stays first
            continue
        out.append(g)
    return out


def our_groups(groups: list) -> list:
    return [g for g in groups if _group_has_ours(g)]


def iter_entries(settings: dict):
    """(event, matcher, command) for every command hook in a settings object."""
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            continue
        for g in groups:
            if not isinstance(g, dict) or not isinstance(g.get("hooks"), list):
                continue
            for h in g["hooks"]:
                if isinstance(h, dict) and isinstance(h.get("command"), str):
                    yield event, g.get("matcher"), h["command"]


def enabled_plugin(settings: dict) -> list[str]:
    """`enabledPlugins` keys that enable the autoharness plugin (`autoharness@<marketplace>`)."""
    ep = settings.get("enabledPlugins")
    if not isinstance(ep, dict):
        return []
    return [k for k, v in ep.items()
            if isinstance(k, str) and k.split("@", 1)[0] == PLUGIN and v not in (False, None, [])]


# ---- editing a settings object (pure) -------------------------------------------------------


def _check_shape(path: str, settings: dict) -> None:
    hooks = settings.get("hooks")
    if hooks is None:
        return
    if not isinstance(hooks, dict):
        raise InstallError(f"{path}: `hooks` is not a JSON object; nothing was changed. "
                           "Fix it by hand, then rerun this command")
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            raise InstallError(f"{path}: `hooks.{event}` is not a list; nothing was changed. "
                               "Fix it by hand, then rerun this command")


def wire(settings: dict, hook_cmd: str) -> dict:
    """Settings with exactly autoharness's groups; everything else untouched, in place.

    An event that already holds exactly the wanted groups is left as it is (so a second run
    changes nothing, wherever the user moved them); otherwise autoharness's entries are taken
    out and the wanted groups appended.
    """
    new = copy.deepcopy(settings)
    hooks = new.setdefault("hooks", {})
    wanted = hook_groups(hook_cmd)
    for event in list(hooks):  # an older layout may have used other events
        if event not in wanted:
            kept = strip_groups(hooks[event])
            if kept != hooks[event]:
                if kept:
                    hooks[event] = kept
                else:
                    del hooks[event]
    for event, groups in wanted.items():
        cur = hooks.get(event)
        if cur is None:
            hooks[event] = groups
        elif our_groups(cur) != groups:
            hooks[event] = strip_groups(cur) + groups
    return new


def unwire(settings: dict, created: set[str] | None) -> dict:
    """Settings without autoharness's entries. Containers left empty are removed only if the
    install created them (`created`; None = unknown, then every emptied one goes)."""
    new = copy.deepcopy(settings)
    hooks = new.get("hooks")
    if not isinstance(hooks, dict):
        return new
    removed = False
    for event in list(hooks):
        cur = hooks[event]
        kept = strip_groups(cur)
        if kept == cur:
            continue
        removed = True
        if kept or (created is not None and event not in created):
            hooks[event] = kept
        else:
            del hooks[event]
    if removed and not hooks and (created is None or "hooks" in created):
        del new["hooks"]
    return new


def created_keys(before: dict) -> set[str]:
    """Which containers an install adds to `before` (so `--remove` knows it may delete them)."""
    hooks = before.get("hooks")
    out = set() if isinstance(hooks, dict) else {"hooks"}
    hooks = hooks if isinstance(hooks, dict) else {}
    out.update(e for e in EVENTS if e not in hooks)
    return out


# ---- files ------------------------------------------------------------------------------------


def read_settings(path: str) -> tuple[bytes | None, dict]:
    """(raw bytes or None if absent, parsed object). Malformed → InstallError, file untouched."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None, {}
    except OSError as e:
        raise InstallError(f"cannot read {path}: {e.strerror}") from None
    if not raw.strip():
        return raw, {}
    try:
        data = json.loads(raw)
    except ValueError as e:
        where = f" (line {e.lineno}, column {e.colno}: {e.msg})" if isinstance(
            e, json.JSONDecodeError) else f" ({e})"
        raise InstallError(
            f"{path} is not valid JSON{where}; nothing was changed. Fix the file by hand "
            "(Claude Code cannot read it either), then rerun this command") from None
    if not isinstance(data, dict):
        raise InstallError(f"{path} does not hold a JSON object; nothing was changed. "
                           "Fix the file by hand, then rerun this command")
    _check_shape(path, data)
    return raw, data


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write(path: str, data: bytes, mode: int | None = None) -> None:
    """Replace `path` all at once, keeping its mode.

    A symlinked file (dotfile managers) is written through: the link stays a link.
    """
    target = os.path.realpath(path)
    if mode is None:
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:
            mode = _default_mode()
    write_atomic(target, data, mode)


def missing_dirs(path: str) -> list[str]:
    """The parent directories of `path` that do not exist yet, outermost first."""
    out = []
    d = os.path.dirname(os.path.abspath(path))
    while d and not os.path.exists(d):
        out.append(d)
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    return out[::-1]


def private_dir(d: str) -> None:
    """Create `d` and any missing parents 0700: the daemon refuses a state dir open to others."""
    paths.make_private_dirs(d)


def backup(path: str, data: bytes) -> str:
    """Keep `data` (the file as it was) under the state dir, private: settings may hold keys."""
    bdir = os.path.join(paths.install_dir(), "backups")
    private_dir(bdir)
    bad = private.private_problem(bdir)
    if bad:  # made by an older version, or by hand: never leave a copy of settings there
        raise InstallError(f"{bad.what}; settings backups (they may hold keys) go there, so "
                           f"nothing was changed: {bad.fix}")
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
    atomic_write(_record_file(), dumps(record).encode(), 0o600)


def worktree_top(start: str) -> str:
    """The worktree a project's `.claude/settings.json` lives in (git top level, else `start`)."""
    try:
        r = subprocess.run(["git", "-C", start, "rev-parse", "--show-toplevel"],
                           capture_output=True, text=True, timeout=10)
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return os.path.abspath(start)


@dataclass
class Source:
    """One settings file Claude Code reads, as found on disk."""

    label: str
    path: str
    data: dict | None = None  # None: absent or unreadable
    error: str | None = None


def read_source(label: str, path: str) -> Source:
    try:
        raw, data = read_settings(path)
    except InstallError as e:
        return Source(label, path, None, str(e))
    return Source(label, path, data if raw is not None else None)


def settings_sources(project: str | None) -> list[Source]:
    """User settings, then the project's shared and local settings (if a project is known)."""
    out = [read_source("user settings", paths.user_settings_file())]
    if project:
        shared = paths.project_settings_file(project)
        local = paths.project_settings_file(project, local=True)
        for label, p in (("project settings", shared), ("project local settings", local)):
            if os.path.realpath(p) != os.path.realpath(out[0].path):
                out.append(read_source(label, p))
    return out


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
        except FileNotFoundError:
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
    return data, mode if isinstance(mode, int) else _default_mode()


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


def apply(plan: Plan, *, remove: bool) -> dict[str, str]:
    """Write the plan; return {path: backup path} for every existing file changed."""
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


# ---- CLI --------------------------------------------------------------------------------------


def _diff(c: Change) -> str:
    old = (c.old or b"").decode("utf-8", "replace").splitlines(keepends=True)
    new = (c.new or b"").decode("utf-8", "replace").splitlines(keepends=True)
    return "".join(difflib.unified_diff(old, new, c.path if c.old is not None else "/dev/null",
                                        c.path if c.new is not None else "/dev/null"))


def report(plan: Plan, backups: dict[str, str], *, dry_run: bool, remove: bool) -> None:
    verb = {"create": "create", "update": "update", "delete": "remove"}
    for c in plan.changes:
        if c.action in verb:
            word = f"would {verb[c.action]}" if dry_run else f"{verb[c.action]}d"
            note = f" ({c.note})" if c.note else ""
            b = f"  [backup: {backups[c.path]}]" if c.path in backups else ""
            print(f"{word:<16} {c.path}{note}{b}")
        elif c.action == "kept":
            print(f"{'left alone':<16} {c.path} ({c.note})")
        else:
            print(f"{'no change':<16} {c.path}")
    if dry_run:
        for c in plan.changes:
            if c.action in verb and c.path == plan.settings_path:
                print(_diff(c), end="")
        print("dry run: nothing was written")
        return
    if not plan.changed:
        what = "nothing of autoharness's is installed" if remove else "already installed"
        print(f"no change: {what} ({plan.scope} scope)")
    elif remove:
        back = [c.path for c in plan.changes if c.action == "update" and c.mode is not None]
        print(f"autoharness removed from the {plan.scope} scope; your own hooks and settings "
              "are as they were" + (f", and your own {', '.join(back)} put back" if back else "")
              + ". Restart open Claude Code sessions to drop the hooks.")
    else:
        print(f"autoharness hooks installed ({plan.scope} scope): SessionStart, PreToolUse "
              f"(async, plus a child write guard), Stop, SessionEnd -> {plan.hook}")
        for w in plan.warnings:
            print(f"warning: {w}; both run for every event until you keep one "
                  "(`autoharnessctl doctor` shows it)")
        print("Claude Code reads hooks when a session starts: restart open sessions. "
              "Check everything with `autoharnessctl doctor`.")


def do_install(args) -> int:
    try:
        project = os.path.abspath(args.project) if args.project else worktree_top(os.getcwd())
        if args.scope == "project" and not os.path.isdir(project):
            raise InstallError(f"project directory {project} does not exist: pass an existing "
                               "directory with --project")
        if args.remove:
            plan = plan_remove(args.scope, project)
        else:
            plan = plan_install(args.scope, project, force=args.force)
        backups = {} if args.dry_run else apply(plan, remove=args.remove)
    except InstallError as e:
        print(f"autoharnessctl: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"autoharnessctl: cannot write {e.filename}: {e.strerror}; fix the permissions "
              "and rerun (files already written are complete, never half-written)",
              file=sys.stderr)
        return 1
    report(plan, backups, dry_run=args.dry_run, remove=args.remove)
    return 0


def add_parser(sub) -> None:
    s = sub.add_parser(
        "install", help="wire the hooks into Claude Code's settings.json and add /learn, "
        "/save-learnings",
        description="Add autoharness's hooks to Claude Code's settings (user: "
        "$CLAUDE_CONFIG_DIR/settings.json; project: .claude/settings.json) and install the "
        "/learn and /save-learnings commands. Your own hooks and settings are kept; a backup "
        "is kept under the state dir before any change.")
    s.add_argument("--scope", choices=("user", "project"), default="user",
                   help="user settings (default) or the project's .claude/settings.json")
    s.add_argument("--project", metavar="DIR",
                   help="project directory for --scope project (default: the git worktree "
                   "of the current directory)")
    s.add_argument("--dry-run", action="store_true", help="show what would change; write nothing")
    s.add_argument("--remove", action="store_true",
                   help="take out exactly what autoharness added")
    s.add_argument("--force", action="store_true",
                   help="install even if the plugin or the other scope already has the hooks, "
                   "or replace your own learn.md/save-learnings.md")
    s.set_defaults(func=do_install)
