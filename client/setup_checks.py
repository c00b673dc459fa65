"""The doctor's checks of what is wired into Claude Code: autoharness's hooks (settings or
plugin; complete and runnable), duplicate hooks, and the slash commands. Plain functions of the
settings files as read (`settings.Source`) and an environment, like client/checks.py's."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping

from ..protocol.paths import slash_command
from . import settings
from .checks import Check
from .files import find_script


def _scope_of(src: settings.Source) -> str:
    return "user" if src.label == "user settings" else "project"


def _program_problem(prog: str, path_env: str | None) -> str | None:
    """Why a hook program cannot run, or None. A moved venv leaves the script with a `#!` line
    naming an interpreter that is gone: the file exists but every hook call fails."""
    path = prog if os.sep in prog else shutil.which(prog, path=path_env)
    if not path:
        return f"`{prog}` is not on PATH"
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return f"{path} is not an executable"
    try:
        with open(path, "rb") as f:
            first = f.readline(512)
    except OSError as e:
        return f"{path} cannot be read ({e.strerror})"
    words = first[2:].split() if first.startswith(b"#!") else []
    if words and not os.path.exists(words[0]):
        return f"{path} starts {os.fsdecode(words[0])}, which does not exist"
    return None


def _command_problem(cmd: str, path_env: str | None) -> str | None:
    """Why an autoharness hook command cannot run its hook, or None. `PYTHON -I -S HOOK` needs
    both; a command that runs the script itself needs the script and its `#!` interpreter."""
    prog = settings.hook_program(cmd)
    if not prog:
        return None
    python = settings.hook_interpreter(cmd)
    if python is None:
        return _program_problem(prog, path_env)
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        return f"its interpreter {python} is gone"
    if not os.path.isfile(prog):
        return f"{prog} is gone"
    return None


def check_hooks(sources: list[settings.Source], env: Mapping[str, str]) -> Check:
    """autoharness's hooks are wired (settings or plugin), complete, and runnable."""
    path_env = env.get("PATH", os.defpath)
    broken = [s for s in sources if s.error]
    if broken:
        return Check("hooks", False, broken[0].error or "",
                     f"fix the JSON in {broken[0].path}; Claude Code cannot read it either")
    found, problems = [], []
    for src in sources:
        if src.data is None:
            continue
        plugin = settings.enabled_plugin(src.data)
        if plugin:
            found.append(f"plugin {plugin[0]}")
            if not shutil.which(settings.HOOK, path=path_env):
                problems.append((f"the plugin runs `{settings.HOOK}` from PATH, which has none",
                                 "install autoharness so its scripts are on PATH (e.g. "
                                 "`pipx install claude-autoharness`)"))
        ours = [(ev, cmd) for ev, _, cmd in settings.iter_entries(src.data) if settings.is_ours(cmd)]
        if not ours:
            continue
        found.append(f"{src.label} ({src.path})")
        fix = f"`autoharnessctl install --scope {_scope_of(src)}` rewrites them"
        counting = {ev for ev, cmd in ours if settings.is_counting(cmd)}
        missing = [ev for ev in settings.EVENTS if ev not in counting]
        if missing:
            problems.append((f"{src.path} has no autoharness hook for {', '.join(missing)}", fix))
        if not any(settings.GUARD_MARK in cmd for ev, cmd in ours if ev == "PreToolUse"):
            problems.append((f"{src.path} lacks the child write guard (reflector sessions could "
                             "edit files)", fix))
        for ev, cmd in ours:
            why = _command_problem(cmd, path_env)
            if why:
                silent = ("the hook does nothing (it exits 0 in silence)"
                          if settings.is_guarded(cmd) else "Claude Code shows a hook error")
                problems.append((f"{src.path} runs the hook for {ev}, but {why}: autoharness "
                                 f"moved or was uninstalled, and {silent} until it is wired "
                                 "again", f"point the hooks at this installation: {fix} (or "
                                 f"reinstall autoharness first: `pipx install --force "
                                 f"claude-autoharness`, then `autoharnessctl install --scope "
                                 f"{_scope_of(src)}`)"))
                break
    if not found:
        return Check("hooks", False, "no autoharness hooks in the user or project settings, "
                     "and the plugin is not enabled", "`autoharnessctl install` (or "
                     "`--scope project` for this project only)")
    if problems:
        return Check("hooks", False, problems[0][0], problems[0][1])
    return Check("hooks", True, "installed in " + ", ".join(found))


def check_duplicates(sources: list[settings.Source]) -> Check:
    """Duplicate hooks as Claude Code runs them: the same command at several scopes runs once
    (Claude Code de-duplicates identical commands), different ones (the plugin's shim and a
    settings install, two installations) all run. The daemon counts a tool call once however
    many hooks report it, and injects the session start context once; what is left is a
    warning: every tool call starts one hook process per command."""
    runs: dict[str, list[str]] = {}  # counting command -> where it is wired
    plugins = []
    for src in sources:
        if src.data is None:
            continue
        for key in settings.enabled_plugin(src.data):
            plugins.append(key)
            runs.setdefault(settings.PLUGIN_HOOK, []).append(f"the plugin {key} ({src.label})")
        for ev, _, cmd in settings.iter_entries(src.data):
            if ev == "PreToolUse" and settings.is_counting(cmd):
                where = f"{src.label} {src.path}"
                if where not in runs.setdefault(cmd, []):
                    runs[cmd].append(where)
    if len(runs) <= 1:
        [wheres] = runs.values() or [[]]
        if len(wheres) > 1:
            return Check("duplicates", True, f"the same hook command in {' and '.join(wheres)}: "
                         "Claude Code runs it once")
        return Check("duplicates", True, "one counting PreToolUse hook" if wheres
                     else "no counting hook to duplicate")
    places = "; ".join(", ".join(w) + ("" if cmd == settings.PLUGIN_HOOK else
                                       f": {settings.hook_program(cmd) or cmd}")
                       for cmd, w in runs.items())
    detail = (f"{len(runs)} different autoharness hooks run for every event ({places}): each "
              f"tool call starts {len(runs)} hook processes (the daemon counts it once and "
              "gives a session its start context once)")
    if plugins:
        scopes = sorted({_scope_of(s) for s in sources if s.data is not None and any(
            ev == "PreToolUse" and settings.is_counting(c)
            for ev, _, c in settings.iter_entries(s.data))})
        fix = ("keep one: the plugin (`autoharnessctl install --remove --scope "
               f"{scopes[0] if scopes else 'user'}`), or the settings install (`claude plugin "
               f"disable {plugins[0]}`)")
    else:
        fix = ("keep one: `autoharnessctl install --remove --scope project` (or `--scope "
               "user`), or run `autoharnessctl install` at both scopes from one installation "
               "so the commands are identical")
    return Check("duplicates", True, detail, fix, warning=True)


def check_commands(command_dirs: list[str], plugin: bool, env: Mapping[str, str]) -> Check:
    """/learn and /save-learnings exist (the plugin's are /autoharness:learn and
    /autoharness:save-learnings), and the `autoharnessctl` they run is on PATH."""
    have = [d for d in command_dirs
            if all(os.path.isfile(os.path.join(d, n)) for n in settings.COMMANDS)]
    if not have and not plugin:
        return Check("commands", False, "/learn and /save-learnings are not installed",
                     "`autoharnessctl install` (adds them with the hooks)")
    if not shutil.which("autoharnessctl", path=env.get("PATH", os.defpath)):
        here = find_script("autoharnessctl")
        where = f"add {os.path.dirname(here)} to PATH" if here else "put autoharnessctl on PATH"
        return Check("commands", False, "the slash commands run `autoharnessctl`, which is not "
                     "on PATH", f"{where} (or `pipx install claude-autoharness`)")
    names = []
    if have:
        names.append(f"{slash_command('learn')} and {slash_command('save-learnings')} in {', '.join(have)}")
    if plugin:
        names.append(f"{slash_command('learn', True)} and {slash_command('save-learnings', True)} from the "
                     "plugin")
    return Check("commands", True, "; ".join(names))
