"""Skill loads: which skill of which layer an agent's tool call loaded, resolved as Claude
Code resolves it.

A load is one of the agent's own tool calls, never a mention in text:
- a `Skill` call naming the skill. Claude Code lists the user's skills before the project's
  and takes the first of a name, so a name both layers hold loads the user skill. A
  namespaced name (`plugin:name`) is a plugin's skill: never one of the library's;
- a `Read` of a skill's own `SKILL.md` in its own layer: `<user skills>/<name>/SKILL.md` or
  `<project>/.claude/skills/<name>/SKILL.md` (compared after resolving links). Any other
  `SKILL.md` (a vendored `vendor/lint-it/SKILL.md`) loads nothing of ours.

Loads are kept as *refs* (`skill:<name>`, `read:<path>`), read from a window or a transcript
without knowing the library, and resolved against the layers when a verdict is grounded.
"""

import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ...protocol import paths

SKILL_MD = "SKILL.md"
SKILL_REF = "skill:"
READ_REF = "read:"

# A `Skill` call or a `Read` of a SKILL.md in a record the JSON parse could not read (a
# clipped record): the tool_use's name, then its input's skill or file path.
_SKILL_CALL = re.compile(r'"name"\s*:\s*"Skill"\s*,\s*"input"\s*:\s*\{[^{}]*?'
                         r'"(?:skill|command|name)"\s*:\s*"([^"\\]+)"')
_READ_CALL = re.compile(r'"name"\s*:\s*"Read"\s*,\s*"input"\s*:\s*\{[^{}]*?'
                        r'"file_path"\s*:\s*"([^"]*?SKILL\.md)"')


def _walk(node, out: list[str]) -> None:
    if isinstance(node, dict):
        if node.get("type") == "tool_use" and isinstance(node.get("input"), dict):
            args = node["input"]
            if node.get("name") == "Skill":
                ref = args.get("skill") or args.get("command") or args.get("name")
                if isinstance(ref, str) and ref.strip():
                    out.append(SKILL_REF + ref.strip())
            elif node.get("name") == "Read" and isinstance(args.get("file_path"), str):
                if os.path.basename(args["file_path"]) == SKILL_MD:
                    out.append(READ_REF + args["file_path"])
        for v in node.values():
            _walk(v, out)
    elif isinstance(node, list):
        for v in node:
            _walk(v, out)


def line_refs(line: str) -> list[str]:
    """The loads one JSONL record shows, in order (a clipped record is searched as text)."""
    out: list[str] = []
    line = line.strip()
    if not line.startswith("{"):
        return out
    try:
        _walk(json.loads(line), out)
    except (ValueError, RecursionError):
        out += [SKILL_REF + m.strip() for m in _SKILL_CALL.findall(line)]
        out += [READ_REF + m for m in _READ_CALL.findall(line)]
    return out


def refs(window: str) -> list[str]:
    """Every load a window's records show, oldest first, each once."""
    return list(dict.fromkeys(r for line in window.splitlines() for r in line_refs(line)))


@dataclass(frozen=True)
class Layers:
    """The skills directories the agent's session saw: the user's, and its project's."""

    user: str
    project: str | None

    @classmethod
    def of(cls, project_root: str | None) -> "Layers":
        return cls(user=paths.user_skills_dir(),
                   project=paths.project_skills_dir(project_root) if project_root else None)

    def dirs(self) -> list[tuple[str, str]]:
        """(layer, dir) in Claude Code's order: a name both hold is the first's."""
        out = [("user", self.user)]
        if self.project:
            out.append(("project", self.project))
        return out


def _has(d: str) -> bool:
    return os.path.isfile(os.path.join(d, SKILL_MD))


def resolve_name(name: str, layers: Layers,
                 exists: Callable[[str], bool] = _has) -> tuple[str, str] | None:
    """(layer, skill dir) a `Skill` call of `name` loads, or None (a plugin's, or no such
    skill)."""
    name = name.strip().lstrip("/")
    if not name or ":" in name or "/" in name or name in (".", ".."):
        return None
    for layer, d in layers.dirs():
        if exists(os.path.join(d, name)):
            return layer, os.path.join(d, name)
    return None


def resolve_read(path: str, layers: Layers) -> tuple[str, str] | None:
    """(layer, skill dir) whose own SKILL.md `path` is, or None."""
    if os.path.basename(path) != SKILL_MD or not os.path.isabs(path):
        return None
    skill_dir = os.path.dirname(os.path.realpath(path))
    for layer, d in layers.dirs():
        if os.path.dirname(skill_dir) == os.path.realpath(d):
            return layer, os.path.join(d, os.path.basename(skill_dir))
    return None


def resolve(loads: Iterable[str], layers: Layers,
            exists: Callable[[str], bool] = _has) -> set[tuple[str, str]]:
    """The (layer, skill name) pairs these refs loaded."""
    out: set[tuple[str, str]] = set()
    for ref in loads:
        if ref.startswith(SKILL_REF):
            hit = resolve_name(ref[len(SKILL_REF):], layers, exists)
        elif ref.startswith(READ_REF):
            hit = resolve_read(ref[len(READ_REF):], layers)
        else:
            continue
        if hit is not None:
            out.add((hit[0], os.path.basename(hit[1])))
    return out
