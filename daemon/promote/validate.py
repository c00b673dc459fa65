"""Deterministic checks a shaped change must pass before it may touch the skill tree.

Families: well_formed, attributable, safe, contained, owned. Every check runs and
every finding is returned, so an operator sees all that is wrong at once. Checks read the
filesystem but never write it; nothing here follows a symlink below the layer root.
"""

import os
import re
import stat
from dataclasses import dataclass, field

from claude_autoharness.daemon.promote import guard, records, skillfile
from claude_autoharness.daemon.promote.evidence import evidence_in_window
from claude_autoharness.daemon.proposals import Finding, Proposal
from claude_autoharness.protocol import paths

SKILL_MD = "SKILL.md"
# autoharness's own files inside a skill: provenance record and evidence quotes.
PROVENANCE_DIR = ".autoharness"
PROVENANCE_FILE = "provenance.json"
# Far above what years of landings write; a bigger file is not one of ours.
MAX_PROVENANCE_BYTES = 4 * 1024 * 1024
SUPPORT_DIRS = ("references", "scripts", "templates", "assets")
# Temp files of atomic writes; recover() sweeps whatever a crash left with this prefix.
TMP_PREFIX = ".ah-tmp-"
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_FILES = 8
MAX_FILE_BYTES = 64 * 1024
MAX_TOTAL_BYTES = 256 * 1024

_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# Upper-case markers only: "a todo list" is prose, "TODO" is an unfinished skill.
_PLACEHOLDER = re.compile(r"\bTODO\b|\bFIXME\b|(?i:<placeholder>)")
_REDACTED = re.compile(r"\[REDACTED")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# "Says when to use the skill": the description must carry a trigger, not just a topic.
_WHEN = re.compile(r"\b(?:when|whenever|use|using|before|after|if|while|during)\b", re.IGNORECASE)
_HOME_PATH = re.compile(
    r"(?<![\w.-])(?:/home/[^/\s]+|/Users/[^/\s]+|/root(?![\w.-])|[A-Za-z]:\\Users\\)")

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class Plan:
    """A change shaped in memory: what the skill directory will hold after landing."""

    action: str
    layer: str
    name: str
    root: str  # the layer's skills directory, symlinks resolved
    anchor: str | None = None  # a directory `root` must stay inside (the project root)
    exists: bool = False  # something (anything) is at root/name now
    skill_md: str | None = None  # the new SKILL.md; None when unchanged or archived
    writes: dict[str, str] = field(default_factory=dict)  # supporting file → new text
    removes: list[str] = field(default_factory=list)
    live: dict[str, int] = field(default_factory=dict)  # files there now → size
    state: str | None = None  # the promoter's state dir (landing records); None: the default

    @property
    def skill_dir(self) -> str:
        return os.path.join(self.root, self.name)


def check(plan: Plan, *, max_body_lines: int, redactor, home: str | None = None) -> list[Finding]:
    """Every finding of the well_formed, safe, contained and owned families for `plan`."""
    texts = dict(plan.writes)
    if plan.skill_md is not None:
        texts[SKILL_MD] = plan.skill_md
    findings = contained(plan)
    if plan.skill_md is not None:
        findings += well_formed(plan.skill_md, plan.name, max_body_lines)
    for rel, text in plan.writes.items():
        findings += _text_hygiene(rel, text)
    findings += guard.scan(texts, redactor)
    findings += owned(plan, texts, home if home is not None else os.path.expanduser("~"))
    return findings


# -- well_formed ---------------------------------------------------------------------------

def well_formed(text: str, dir_name: str, max_body_lines: int) -> list[Finding]:
    """Claude Code's SKILL.md format plus our house rules on size and finish."""
    def bad(code, message):
        return Finding(family="well_formed", code=code, message=message)

    try:
        fields, body = skillfile.parse(text)
    except skillfile.SkillFormatError as e:
        return [bad("frontmatter", str(e))] + _text_hygiene(SKILL_MD, text)
    out = []
    name = fields.get("name", "")
    if not name:
        out.append(bad("name", "frontmatter has no `name`"))
    elif len(name) > MAX_NAME or not _NAME.fullmatch(name):
        out.append(bad("name", f"name must be kebab-case [a-z0-9-], at most {MAX_NAME} chars"))
    if name and name != dir_name:
        out.append(bad("name_mismatch", "frontmatter name differs from the directory name"))
    desc = fields.get("description", "")
    if not desc.strip():
        out.append(bad("description", "frontmatter has no `description`"))
    elif len(desc) > MAX_DESCRIPTION:
        out.append(bad("description", f"description longer than {MAX_DESCRIPTION} chars"))
    elif not _WHEN.search(desc):
        out.append(bad("description", "description must say when to use the skill"))
    lines = [ln for ln in body.splitlines() if ln.strip()]
    if not lines:
        out.append(bad("body", "body is empty"))
    elif len(lines) > max_body_lines:
        out.append(bad("body", f"body has {len(lines)} non-blank lines (max {max_body_lines})"))
    return out + _text_hygiene(SKILL_MD, text)


def _text_hygiene(rel: str, text: str) -> list[Finding]:
    out = []
    if _PLACEHOLDER.search(text):
        out.append(Finding(family="well_formed", code="placeholder",
                           message=f"{rel}: placeholder text (TODO, FIXME, <placeholder>)"))
    # Capture redacted something the proposal relied on: landing it would ship a broken skill.
    if _REDACTED.search(text):
        out.append(Finding(family="well_formed", code="redacted",
                           message=f"{rel}: contains a [REDACTED] marker"))
    if _CONTROL.search(text):
        out.append(Finding(family="well_formed", code="control_chars",
                           message=f"{rel}: contains control characters"))
    return out


# -- attributable --------------------------------------------------------------------------

def attributable(p: Proposal, window: str | None) -> list[Finding]:
    """A reason, and evidence quoted verbatim from the recorded window."""
    def bad(code, message):
        return Finding(family="attributable", code=code, message=message)

    out = []
    if not p.reason.strip():
        out.append(bad("no_reason", "proposal gives no reason"))
    if not p.evidence.strip():
        out.append(bad("no_evidence", "proposal quotes no evidence"))
    elif window is None:
        out.append(bad("no_window", "no recorded window to check the evidence against"))
    elif not evidence_in_window(p.evidence, window):
        out.append(bad("evidence_not_found", "evidence is not a verbatim quote from the window"))
    return out


# -- contained -----------------------------------------------------------------------------

def name_is_contained(name: str) -> bool:
    """A single, ordinary path component: no traversal, separators, dotfiles or NULs."""
    return bool(name) and len(name) <= 255 and _PART.fullmatch(name) is not None


def path_problem(rel: str) -> str | None:
    """Why a supporting file path is not allowed, or None when it is."""
    if not rel:
        return "empty path"
    if "\\" in rel:
        return "backslash in path"
    if rel.startswith("/"):
        return "absolute path"
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return "path traversal or empty component"
    if any(p.startswith(".") for p in parts):
        return "dotfile or dot-directory"
    if not all(_PART.fullmatch(p) for p in parts):
        return "unusual characters in path"
    if len(parts) < 2 or parts[0] not in SUPPORT_DIRS:
        return f"supporting files go under {', '.join(d + '/' for d in SUPPORT_DIRS)}"
    return None


def contained(plan: Plan) -> list[Finding]:
    """Names cannot escape, sizes are bounded, and no symlink sits on or below the skill dir.

    Runs before any write: a planted symlink is a rejection, not something to write through.
    """
    def bad(code, message):
        return Finding(family="contained", code=code, message=message)

    out = []
    if not name_is_contained(plan.name):
        return [bad("name", "skill name is not a plain directory name (traversal, separator, "
                            "absolute path or dotfile)")]
    if plan.anchor is not None:
        anchor = os.path.realpath(plan.anchor)
        if os.path.commonpath([anchor, plan.root]) != anchor:
            out.append(bad("symlink", f"the skills dir resolves outside {plan.anchor} "
                                      f"(to {plan.root}): a symlink on the way is refused"))
    if os.path.lexists(plan.root) and not os.path.isdir(plan.root):
        out.append(bad("not_a_directory", "the skills directory is not a directory"))
    skill_dir = plan.skill_dir
    if os.path.islink(skill_dir):
        out.append(bad("symlink", f"skill directory {plan.name} is a symlink"))
        return out
    if os.path.lexists(skill_dir) and not os.path.isdir(skill_dir):
        out.append(bad("not_a_directory", f"{plan.name} is not a directory"))
        return out
    for rel in scan_tree(skill_dir)[1]:
        out.append(bad("symlink", f"{rel} is a symlink"))
    for rel in list(plan.writes) + plan.removes:
        problem = path_problem(rel)
        if problem:
            out.append(bad("path", f"{rel!r}: {problem}"))
        else:
            out += [bad("not_a_directory", m) for m in _landing_path_problems(skill_dir, rel)]
    sizes = {rel: n for rel, n in plan.live.items() if rel not in plan.removes}
    sizes.update({rel: len(text.encode()) for rel, text in plan.writes.items()})
    if plan.skill_md is not None:
        sizes[SKILL_MD] = len(plan.skill_md.encode())
    for rel, text in list(plan.writes.items()) + [(SKILL_MD, plan.skill_md or "")]:
        if len(text.encode()) > MAX_FILE_BYTES:
            out.append(bad("file_too_large", f"{rel} is over {MAX_FILE_BYTES // 1024} KB"))
    if plan.action != "archive":
        if len([r for r in sizes if r != SKILL_MD]) > MAX_FILES:
            out.append(bad("too_many_files", f"more than {MAX_FILES} supporting files"))
        if sum(sizes.values()) > MAX_TOTAL_BYTES:
            out.append(bad("too_large", f"skill over {MAX_TOTAL_BYTES // 1024} KB in total"))
    return out


def _landing_path_problems(skill_dir: str, rel: str) -> list[str]:
    # Symlinks are reported by scan_tree; here: a file where a directory must go, or the reverse.
    out, here = [], skill_dir
    parts = rel.split("/")
    for i, part in enumerate(parts):
        here = os.path.join(here, part)
        if not os.path.lexists(here) or os.path.islink(here):
            break
        last = i == len(parts) - 1
        if not last and not os.path.isdir(here):
            out.append(f"{'/'.join(parts[:i + 1])} is not a directory")
        if last and os.path.isdir(here):
            out.append(f"{rel} is a directory")
    return out


def scan_tree(skill_dir: str) -> tuple[dict[str, int], list[str]]:
    """(regular files → size, symlinks) under `skill_dir`, never following a link.

    autoharness's own provenance files are not counted as the skill's files, but a symlink
    among them is reported like any other: landing writes there too.
    """
    files: dict[str, int] = {}
    links: list[str] = []
    if os.path.islink(skill_dir) or not os.path.isdir(skill_dir):
        return files, links
    for here, dirs, names in os.walk(skill_dir, followlinks=False):
        rel_here = os.path.relpath(here, skill_dir)
        for name in dirs + names:
            rel = name if rel_here == "." else f"{rel_here}/{name}"
            st = os.lstat(os.path.join(here, name))
            if stat.S_ISLNK(st.st_mode):
                links.append(rel)
            elif (stat.S_ISREG(st.st_mode) and rel.split("/")[0] != PROVENANCE_DIR
                  and not name.startswith(TMP_PREFIX)):
                files[rel] = st.st_size
    return files, sorted(links)


# -- owned ---------------------------------------------------------------------------------

def owned(plan: Plan, texts: dict[str, str], home: str) -> list[Finding]:
    """autoharness changes only what it created; user-layer skills carry no home paths."""
    out = []
    if plan.exists and not is_owned(plan.skill_dir, plan.state):
        out.append(Finding(family="owned", code="not_owned",
                           message=f"{plan.name} exists and was not created by autoharness"))
    if plan.layer == "user":
        for rel, text in texts.items():
            if _HOME_PATH.search(text) or (len(home) > 1 and home in text):
                out.append(Finding(family="owned", code="home_path",
                                   message=f"{rel}: absolute home path in a user-layer skill "
                                           "(use ~ or a relative path)"))
    return out


def read_provenance(skill_dir: str) -> dict | None:
    """The skill's provenance record, or None when absent, unreadable or not of our shape.

    The file sits in the skill tree, where a repository or a user can put anything: it is
    read without following symlinks, bounded in size, and never raises.
    """
    data = read_nofollow(skill_dir, f"{PROVENANCE_DIR}/{PROVENANCE_FILE}",
                         limit=MAX_PROVENANCE_BYTES)
    return None if data is None else records.parse_provenance(data)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def promote_state_dir() -> str:
    """Where the promoter keeps its landing records."""
    return os.path.join(paths.state_dir(), "promote")


def is_owned(skill_dir: str, state: str | None = None) -> bool:
    """Landed by autoharness *at this path*, by autoharness's own records.

    The provenance file alone proves nothing — a repository can ship one — so it must name
    this path *and* share a landing (id and SKILL.md hash) with the landing records in the
    state dir. A copied or moved skill dir is not adopted, and nothing sitting where
    autoharness last archived a skill is ours until a restore records it again.
    """
    rec = read_provenance(skill_dir)
    if rec is None or rec["target"] != skill_dir:
        return False
    state = state or promote_state_dir()
    entries = records.read_history(state, skill_dir)
    if not entries:  # merged from a git-mode review branch: its landings are the mirror's
        from claude_autoharness.daemon.promote.gitmode import twin
        mirror = twin(state, skill_dir)
        entries = records.read_history(state, mirror) if mirror else []
    if not entries or entries[-1]["action"] == "archive":
        return False
    claimed = {(x["landing"], x["skill_md"]) for x in rec["landings"] if x["skill_md"]}
    return any((e["landing"], e["files"].get(SKILL_MD)) in claimed for e in entries)


# -- reading without following symlinks ----------------------------------------------------


def open_dir(base: str, parts: list[str], *, create: bool = False) -> int:
    """An fd for base/parts..., refusing a symlink at every step below `base`.

    With `create`, missing directories are made (and their parent fsynced).
    """
    fd = os.open(base, _DIR_FLAGS)
    try:
        for part in parts:
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                    os.fsync(fd)
                except FileExistsError:
                    pass
            nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_nofollow(base: str, rel: str, *, limit: int | None = None) -> bytes | None:
    """The bytes of base/rel, or None when missing, not a regular file, behind a symlink,
    or (given `limit`) larger than `limit` bytes."""
    parts = rel.split("/")
    try:
        dfd = open_dir(base, parts[:-1])
    except OSError:
        return None
    try:
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                     dir_fd=dfd)
    except OSError:
        return None
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    # O_NONBLOCK above and this check: a planted FIFO, device or directory must not hang,
    # feed or fail us (a directory opens fine but cannot be read as a file).
    if not stat.S_ISREG(st.st_mode) or (limit is not None and st.st_size > limit):
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as f:
        data = f.read() if limit is None else f.read(limit + 1)
    return None if limit is not None and len(data) > limit else data
