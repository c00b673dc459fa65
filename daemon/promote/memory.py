"""What the user already keeps beside the skills: Claude Code's own memory, read only.

Claude Code keeps `CLAUDE.md` files (the user's in `$CLAUDE_CONFIG_DIR`, the project's at its
root or in `.claude/`, and `CLAUDE.local.md`) and its auto memory
(`$CLAUDE_CONFIG_DIR/projects/<slug>/memory/`: `MEMORY.md` plus topic files). Each is split into
*lessons*: a topic file's frontmatter `description` (with its `name`), or one paragraph or list
item of any other file. The reflector sees a bounded index of them, and the duplicate guard
refuses a `create` that repeats one: a topic file's name, or a rule its description or body
says again, paraphrased or not (`restate`).

autoharness never writes these files. Reads are bounded (bytes per file, files, lessons),
regular files only, opened without blocking (a FIFO named CLAUDE.md cannot stall a job).
"""

import os
import re
import stat
from dataclasses import dataclass

from ...protocol import paths
from . import duplicate, restate, skillfile

MAX_FILE_BYTES = 64 * 1024
MAX_TOPIC_FILES = 50
MAX_LESSONS = 300
MAX_LESSON_CHARS = 300
MAX_INDEX_CHARS = 8_000
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


@dataclass(frozen=True)
class Lesson:
    source: str  # where it is kept, as the index shows it: `CLAUDE.md (user)`, `memory/x.md`
    text: str
    name: str = ""


def _read(path: str) -> str | None:
    try:
        fd = os.open(path, _FLAGS)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, MAX_FILE_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace")


def _flat(text: str) -> str:
    return " ".join(text.split())[:MAX_LESSON_CHARS]


def split_lessons(text: str) -> list[str]:
    """Paragraphs and list items of a markdown text (headings and code fences left out)."""
    out: list[str] = []
    cur: list[str] = []
    fenced = False

    def close():
        if cur:
            out.append(_flat(" ".join(cur)))
            cur.clear()

    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            close()
            continue
        if fenced:
            continue
        if not line.strip() or line.lstrip().startswith("#"):
            close()
            continue
        if _BULLET.match(line):
            close()
            line = _BULLET.sub("", line)
        cur.append(line.strip())
    close()
    return [t for t in out if t]


def _topic(path: str, rel: str) -> list[Lesson]:
    text = _read(path)
    if text is None:
        return []
    try:
        fields, body = skillfile.parse(text)
    except skillfile.SkillFormatError:
        return [Lesson(rel, t) for t in split_lessons(text)]
    desc = fields.get("description", "")
    if desc:
        return [Lesson(rel, _flat(desc), name=fields.get("name", ""))]
    return [Lesson(rel, t) for t in split_lessons(body)]


def memory_files(project_root: str | None) -> list[tuple[str, str]]:
    """(path, how the index names it) of every memory file that may exist, user first."""
    claude = paths.claude_dir()
    out = [(os.path.join(claude, "CLAUDE.md"), "CLAUDE.md (user)")]
    if project_root:
        out += [(os.path.join(project_root, "CLAUDE.md"), "CLAUDE.md (project)"),
                (os.path.join(project_root, ".claude", "CLAUDE.md"), ".claude/CLAUDE.md"),
                (os.path.join(project_root, "CLAUDE.local.md"), "CLAUDE.local.md")]
    return out


def lessons(project_root: str | None) -> list[Lesson]:
    """The lessons the user's Claude Code memory holds for this project (bounded)."""
    out: list[Lesson] = []
    for path, label in memory_files(project_root):
        text = _read(path)
        if text:
            out += [Lesson(label, t) for t in split_lessons(text)]
    if project_root:
        mem = os.path.join(paths.claude_projects_dir(), paths.project_slug(project_root),
                           "memory")
        text = _read(os.path.join(mem, "MEMORY.md"))
        if text:
            out += [Lesson("memory/MEMORY.md", t) for t in split_lessons(text)]
        try:
            names = sorted(n for n in os.listdir(mem) if n.endswith(".md") and n != "MEMORY.md")
        except OSError:
            names = []
        for n in names[:MAX_TOPIC_FILES]:
            out += _topic(os.path.join(mem, n), f"memory/{n}")
    return out[:MAX_LESSONS]


def index_text(items) -> str:
    """The index the reflector sees, `- [source] lesson` per line, cut at MAX_INDEX_CHARS."""
    lines, used = [], 0
    for it in items or ():
        src = it["source"] if isinstance(it, dict) else it.source
        text = it["text"] if isinstance(it, dict) else it.text
        line = f"- [{src}] {_flat(text)}"
        if used + len(line) > MAX_INDEX_CHARS:
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def near_lesson(name: str, description: str, found: list[Lesson],
                body: str = "") -> Lesson | None:
    """The first lesson a new skill would repeat: a topic file of its name, or a rule its
    description or body says again (`restate`)."""
    for lesson in found:
        if lesson.name and duplicate.normalize_name(lesson.name) == duplicate.normalize_name(
                name):
            return lesson
        if restate.restates(lesson.text, description, body):
            return lesson
    return None
