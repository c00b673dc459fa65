"""Which plugins a session's listing includes, as Claude Code 2.1.328 loads them: each one
`enabledPlugins` turns on (user, then project, then local settings: a later `false` turns
it off; the first mention keeps its place) and `plugins/installed_plugins.json` in Claude
Code's config dir records for this session (a `user` or `managed` install anywhere, a
`project` or `local` one in its own project only). A plugin's listing entries are named
`plugin:NAME`, its commands first (`plugin:sub:NAME` from subdirectories), then its skills;
all the plugins' commands come before all their skills.

A plugin given on the command line (`--plugin-dir`) is listed too, before these, but no
file says so: the prediction cannot see it. Read-only, bounded, no symlink followed.
"""

import os

from ...protocol import paths
from .claudefiles import read_json, settings_files

MAX_JSON_BYTES = 4 * 1024 * 1024
EVERYWHERE = ("user", "managed")


def _json(path: str) -> dict:
    return read_json(path, MAX_JSON_BYTES)


def enabled(project_root: str | None) -> list[str]:
    """The ids (`name@marketplace`) the settings enable, in Claude Code's order."""
    merged: dict[str, bool] = {}
    for f in settings_files(project_root):
        v = _json(f).get("enabledPlugins")
        if isinstance(v, dict):
            merged.update({k: x is True for k, x in v.items() if isinstance(k, str)})
    return [k for k, on in merged.items() if on]


def _install_path(records, project_root: str | None) -> str | None:
    for r in records if isinstance(records, list) else []:
        if not isinstance(r, dict) or not isinstance(r.get("installPath"), str):
            continue
        here = project_root is not None and r.get("projectPath") == project_root
        if r.get("scope") in EVERYWHERE or here:
            return r["installPath"]
    return None


def roots(project_root: str | None) -> list[tuple[str, str]]:
    """(listing prefix, plugin dir) of each plugin the session loads, in its order; the
    prefix is the manifest's `name` (else the id's part before `@`) and a colon."""
    installed = _json(os.path.join(paths.claude_dir(), "plugins", "installed_plugins.json"))
    records = installed.get("plugins") if installed.get("version") == 2 else None
    if not isinstance(records, dict):
        return []
    out = []
    for pid in enabled(project_root):
        root = _install_path(records.get(pid), project_root)
        if root is None or not os.path.isdir(root):
            continue
        name = _json(os.path.join(root, ".claude-plugin", "plugin.json")).get("name")
        out.append((f"{name if isinstance(name, str) and name else pid.split('@')[0]}:", root))
    return out
