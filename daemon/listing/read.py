"""What the listing prediction reads: the skills and commands Claude Code will list, its
settings, and its usage ranking. Read-only: Claude Code's state (`.claude.json`) is read, never
written. Files are read without following a symlink and bounded in size; a file that cannot be
read is left out (as Claude Code would fail to list it) rather than guessed at.
"""

import json
import os
import re
import time
from dataclasses import dataclass

from ...protocol import paths
from ..promote.skilltree import read_nofollow
from . import bundled, plugins
from .claudefiles import read_json, settings_files
from .predict import DEFAULT_MAX_DESC, Entry, usage_score

MAX_SKILL_BYTES = 64 * 1024
MAX_STATE_BYTES = 16 * 1024 * 1024  # .claude.json holds every project's history: bounded
BUDGET_VAR = "SLASH_COMMAND_TOOL_CHAR_BUDGET"
_KEY = re.compile(r"([A-Za-z0-9_-]+):[ \t]*(.*)")
# skillOverrides values that keep an entry out of the model's listing altogether
HIDDEN = ("off", "user-invocable-only")


@dataclass(frozen=True)
class Settings:
    """What Claude Code's settings say about the listing (user, then project, then local:
    the later wins)."""

    env_budget: str | None = None
    fraction: float | None = None
    max_desc: int = DEFAULT_MAX_DESC
    overrides: dict[str, str] | None = None


def frontmatter(text: str) -> dict[str, str]:
    """The scalar keys of a SKILL.md or command file's frontmatter, leniently: hand-written
    files use YAML this project does not write (block scalars, quotes), and Claude Code reads
    them all. A file without frontmatter has none."""
    lines = text.replace("\r\n", "\n").split("\n")
    if not lines or lines[0].strip() != "---":
        return {}
    out: dict[str, str] = {}
    i = 1
    while i < len(lines) and lines[i].strip() != "---":
        m = _KEY.fullmatch(lines[i].rstrip())
        i += 1
        if not m:
            continue
        key, raw = m.group(1), m.group(2).strip()
        if raw in ("|", ">", "|-", ">-", "|+", ">+", ""):
            block = []
            while i < len(lines) and lines[i].strip() != "---" and (
                    not lines[i].strip() or lines[i][:1] in (" ", "\t")):
                block.append(lines[i].strip())
                i += 1
            joiner = "\n" if raw.startswith("|") else " "
            out[key] = joiner.join(b for b in block if b).strip()
            continue
        if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
            raw = raw[1:-1].replace("''", "'") if raw[0] == "'" else _unquote(raw)
        out[key] = raw
    return out


def _unquote(raw: str) -> str:
    try:
        v = json.loads(raw)
        return v if isinstance(v, str) else raw[1:-1]
    except ValueError:
        return raw[1:-1]


def listed_description(fields: dict[str, str]) -> str:
    """The description Claude Code lists: `description`, then ` - when_to_use` if given."""
    desc = fields.get("description", "")
    when = fields.get("when_to_use", "")
    return f"{desc} - {when}" if when else desc


def _truthy(v: str | None) -> bool:
    return (v or "").strip().lower() in ("true", "yes", "on", "1")


def shown_name(key: str, declared: str) -> str:
    """The name a listing line shows: the entry's own name (its directory, `plugin:` first
    for a plugin's), with the frontmatter `name` after it in brackets when that differs."""
    return key if not declared or declared == key or key.endswith(f":{declared}") \
        else f"{key} ({declared})"


def _listed(fields: dict[str, str], plugin: bool) -> bool:
    """Whether Claude Code lists an entry: never with `disable-model-invocation`; a plugin's
    only with a `description` or `when_to_use` of its own."""
    if _truthy(fields.get("disable-model-invocation")):
        return False
    return not plugin or "description" in fields or bool(fields.get("when_to_use"))


def skill_entries(skills_dir: str, layer: str, owners: dict[str, str],
                  prefix: str = "") -> list[Entry]:
    """The skills of one skills dir Claude Code lists to the model, sorted by name (its
    order). `owners`: skill name -> `autoharness` for the ones autoharness owns; `prefix`:
    a plugin's `name:` (its skills are listed only with a description)."""
    try:
        names = sorted(os.listdir(skills_dir))
    except OSError:
        return []
    out = []
    for name in names:
        data = read_nofollow(skills_dir, f"{name}/SKILL.md", limit=MAX_SKILL_BYTES)
        if data is None:
            continue
        fields = frontmatter(data.decode("utf-8", "replace"))
        if not _listed(fields, bool(prefix)):
            continue
        declared = fields.get("name", "")
        out.append(Entry(name=shown_name(prefix + name, declared and prefix + declared),
                         description=listed_description(fields), layer=layer,
                         owner=owners.get(name, "plugin" if prefix else "hand-written"),
                         key=prefix + name))
    return out


def command_entries(commands_dir: str, layer: str, prefix: str = "") -> list[Entry]:
    """The slash commands of one commands dir (`NAME.md`), sorted by name; a command without a
    `description` is listed with its first line of text. A plugin's (`prefix`: its `name:`)
    include its subdirectories' (`plugin:sub:NAME`) and only those with a description."""
    out = []
    for rel in _command_files(commands_dir, depth=3 if prefix else 0):
        data = read_nofollow(commands_dir, rel, limit=MAX_SKILL_BYTES)
        if data is None:
            continue
        text = data.decode("utf-8", "replace")
        fields = frontmatter(text)
        if not _listed(fields, bool(prefix)):
            continue
        desc = listed_description(fields) or _first_line(text)
        out.append(Entry(name=prefix + rel[:-3].replace("/", ":"), description=desc,
                         layer=layer, owner="plugin" if prefix else "hand-written",
                         kind="command"))
    return sorted(out, key=lambda e: e.name)


def _command_files(root: str, depth: int, rel: str = "") -> list[str]:
    """The `.md` files under `root` (relative paths), `depth` levels of subdirectories down;
    symlinked directories are not followed."""
    try:
        items = list(os.scandir(os.path.join(root, rel) if rel else root))
    except OSError:
        return []
    out = []
    for it in items:
        path = f"{rel}/{it.name}" if rel else it.name
        if it.name.endswith(".md") and it.is_file(follow_symlinks=False):
            out.append(path)
        elif depth and it.is_dir(follow_symlinks=False):
            out += _command_files(root, depth - 1, path)
    return out


def _first_line(text: str) -> str:
    body = text.split("\n---", 2)[-1] if text.startswith("---") else text
    for ln in body.splitlines():
        if ln.strip() and ln.strip() != "---":
            return ln.strip()
    return ""


def settings(project_root: str | None, env: dict[str, str] | None = None) -> Settings:
    """The listing's settings as a session in `project_root` sees them: the budget variable
    from the environment or a settings file's `env`, the fraction, the description cap and
    `skillOverrides` (later files win, as in Claude Code)."""
    env_budget = (env if env is not None else os.environ).get(BUDGET_VAR)
    fraction: float | None = None
    max_desc = DEFAULT_MAX_DESC
    overrides: dict[str, str] = {}
    for f in settings_files(project_root):
        s = read_json(f, MAX_SKILL_BYTES * 4)
        e = s.get("env")
        if isinstance(e, dict) and isinstance(e.get(BUDGET_VAR), (str, int, float)):
            env_budget = str(e[BUDGET_VAR])
        v = s.get("skillListingBudgetFraction")
        if isinstance(v, (int, float)) and 0 < v <= 1:
            fraction = float(v)
        v = s.get("skillListingMaxDescChars")
        if isinstance(v, int) and v > 0:
            max_desc = v
        v = s.get("skillOverrides")
        if isinstance(v, dict):
            overrides.update({k: x for k, x in v.items() if isinstance(x, str)})
    return Settings(env_budget=env_budget, fraction=fraction, max_desc=max_desc,
                    overrides=overrides)


def usage_scores(now: float | None = None) -> dict[str, float]:
    """Skill name -> Claude Code's usage score, from `skillUsage` in its user state file."""
    state = read_json(paths.claude_state_file(), MAX_STATE_BYTES)
    usage = state.get("skillUsage")
    if not isinstance(usage, dict):
        return {}
    now_ms = (time.time() if now is None else now) * 1000
    out = {}
    for name, rec in usage.items():
        if isinstance(rec, dict):
            count, last = rec.get("usageCount"), rec.get("lastUsedAt")
            if isinstance(count, (int, float)) and isinstance(last, (int, float)):
                out[name] = usage_score(count, last, now_ms)
    return out


def entries(project_root: str | None, owners: dict[tuple[str, str], str],
            overrides: dict[str, str] | None = None,
            bundled_chars: int | None = None) -> list[Entry]:
    """Every entry of the listing a session in `project_root` gets, in Claude Code's order:
    user skills, project skills, user commands, project commands, the enabled plugins'
    commands then their skills, then its own.
    `owners`: (layer, name) -> owner of the skills autoharness knows."""
    by_layer = {layer: {n: o for (lay, n), o in owners.items() if lay == layer}
                for layer in ("user", "project")}
    out = skill_entries(paths.user_skills_dir(), "user", by_layer["user"])
    if project_root:
        out += skill_entries(paths.project_skills_dir(project_root), "project", by_layer["project"])
    out += command_entries(paths.user_commands_dir(), "user")
    if project_root:
        out += command_entries(paths.project_commands_dir(project_root), "project")
    found = plugins.roots(project_root)
    out += [e for pre, root in found
            for e in command_entries(os.path.join(root, "commands"), "plugin", pre)]
    out += [e for pre, root in found
            for e in skill_entries(os.path.join(root, "skills"), "plugin", {}, pre)]
    out += bundled.entries(bundled_chars)
    return apply_overrides(out, overrides or {})


def apply_overrides(entries_: list[Entry], overrides: dict[str, str]) -> list[Entry]:
    """`skillOverrides`: `off` (and `user-invocable-only`) entries are not listed; `name-only`
    ones are listed by name whatever the budget."""
    from dataclasses import replace

    out = []
    for e in entries_:
        v = overrides.get(e.ident)
        if v in HIDDEN:
            continue
        # a name-only line shows the entry's own name, never `dir (name)`
        out.append(replace(e, name_only=True, name=e.ident, key="") if v == "name-only" else e)
    return out
