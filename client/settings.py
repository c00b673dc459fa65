"""Claude Code's settings files as autoharness reads and edits them (pure, but for reading).

What autoharness wires (its hook groups, the child write guard, the plugin's hooks and shim),
how its own entries are recognised — by the hook program's name (`autoharness-hook`, whatever
directory it lives in) or by the child guard's marker, so a stale entry from another
installation is replaced — and the edits themselves: `wire` and `unwire` change only
autoharness's entries, and every other hook and setting keeps its place and content. The
install (client/install.py) plans and writes files with these; doctor reads with them.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
from dataclasses import dataclass

from ..protocol import paths
from .errors import CtlError
from .hook import CHILD_DENIED_TOOLS, CHILD_DENY

HOOK = "autoharness-hook"
PLUGIN = "autoharness"
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "Stop", "SessionEnd")
CHILD_MATCHER = "|".join(CHILD_DENIED_TOOLS)
GUARD_MARK = "autoharness-child-guard"
# The check hook's entry runs the same program in check mode (client/checkhook.py), only for
# the tools a check can name: a call of any other tool starts no process for it.
CHECK_MARK = "AUTOHARNESS_HOOK=check"
CHECK_MATCHER = "Bash|Edit|MultiEdit|Write|NotebookEdit|Read"
CHECK_TIMEOUT = 5
COMMANDS = ("learn.md", "save-learnings.md")

# Timeouts are seconds (Claude Code's unit). SessionStart is synchronous because its output is
# the context; the hook itself gives up after ~2 s. Stop is synchronous because `claude -p` kills
# async hooks still running at exit, and a lost Stop is a lost threshold (the hook costs ~15 ms,
# once per turn). All SessionEnd hooks share 1.5 s. Async hooks never hold a tool call; the
# timeout only bounds versions of Claude Code that run them inline.
SESSION_START_TIMEOUT = 5
STOP_TIMEOUT = 5
SESSION_END_TIMEOUT = 1
# UserPromptSubmit is synchronous: its output (a reminder of a learned skill the prompt calls
# for) must reach the model with the prompt. The hook waits ~0.25 s for the daemon, then none.
PROMPT_TIMEOUT = 5
ASYNC_TIMEOUT = 5
GUARD_TIMEOUT = 5

# Reflector children must not write files. This decides from the environment alone, inside the
# shell Claude Code starts anyway: no Python, no daemon round trip, and it never counts.
CHILD_GUARD = (f': {GUARD_MARK}; [ "$AUTOHARNESS_CHILD_SESSION" = 1 ] && '
               f"printf '%s\\n' '{CHILD_DENY}'; exit 0")
# The plugin cannot know where autoharness was pip-installed, so its hooks run a shim shipped in
# the plugin (`hooks/run-hook`) that runs the hook from PATH and does nothing when it is missing:
# a hook must never fail a tool call. Claude Code sets CLAUDE_PLUGIN_ROOT for plugin hooks. The
# plugin's `hooks/hooks.json` holds `hook_groups(PLUGIN_HOOK)` (a test holds them equal).
PLUGIN_SHIM = "hooks/run-hook"
PLUGIN_HOOK = f'"${{CLAUDE_PLUGIN_ROOT}}/{PLUGIN_SHIM}"'


class SettingsError(CtlError):
    """A settings file autoharness will not edit (unreadable, not JSON, not the expected
    shape); nothing has been written."""


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
    check = {"type": "command", "command": check_command(hook_cmd), "timeout": CHECK_TIMEOUT}
    return {
        "SessionStart": [{"hooks": [run(SESSION_START_TIMEOUT)]}],
        "UserPromptSubmit": [{"hooks": [run(PROMPT_TIMEOUT)]}],
        # One matcher-less counting group: a second counting group would count a call twice.
        "PreToolUse": [{"hooks": [run(ASYNC_TIMEOUT, True)]},
                       {"matcher": CHILD_MATCHER, "hooks": [guard]},
                       {"matcher": CHECK_MATCHER, "hooks": [check]}],
        "Stop": [{"hooks": [run(STOP_TIMEOUT)]}],
        "SessionEnd": [{"hooks": [run(SESSION_END_TIMEOUT)]}],
    }


def check_command(hook_cmd: str) -> str:
    """The check hook's command: the hook command with AUTOHARNESS_HOOK=check in its env."""
    via = "AUTOHARNESS_VIA=settings "
    if via in hook_cmd:
        return hook_cmd.replace(via, via + CHECK_MARK + " ", 1)
    return f"{CHECK_MARK} {hook_cmd}"


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
    return is_ours(cmd) and GUARD_MARK not in cmd and CHECK_MARK not in cmd


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
        raise SettingsError(f"{path}: `hooks` is not a JSON object; nothing was changed. "
                           "Fix it by hand, then rerun this command")
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            raise SettingsError(f"{path}: `hooks.{event}` is not a list; nothing was changed. "
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


def read_settings(path: str) -> tuple[bytes | None, dict]:
    """(raw bytes or None if absent, parsed object). Malformed → SettingsError, file untouched."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None, {}
    except OSError as e:
        raise SettingsError(f"cannot read {path}: {e.strerror}") from None
    if not raw.strip():
        return raw, {}
    try:
        data = json.loads(raw)
    except ValueError as e:
        where = f" (line {e.lineno}, column {e.colno}: {e.msg})" if isinstance(
            e, json.JSONDecodeError) else f" ({e})"
        raise SettingsError(
            f"{path} is not valid JSON{where}; nothing was changed. Fix the file by hand "
            "(Claude Code cannot read it either), then rerun this command") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{path} does not hold a JSON object; nothing was changed. "
                           "Fix the file by hand, then rerun this command")
    _check_shape(path, data)
    return raw, data


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
    except SettingsError as e:
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
