"""Turn unprocessed markers into journal, wiki, doc drafts and marker intents.

Every step is idempotent on its own: each entry carries its marker id in an anchor comment and a
step adds only what is missing, so a save that crashed part-way is completed by running it again,
without duplicates. The state is updated last: until then the markers are still reported.

Everything is written under `<project>/.claude/` with atomic replaces; nothing else is touched.
"""

import os
import re
import time
from collections.abc import Callable, Iterable
from datetime import datetime

import msgspec

from ...protocol.replies import LearningsSaved
from ..persist.files import write_atomic
from ..proposals import Intent, Proposal
from .markers import Marker, dedupe, is_processed
from .state import LearningState

INTENT_KINDS = ("pattern", "anti-pattern", "convention", "bug-fix")
_LABEL = {"pattern": "Do", "anti-pattern": "Avoid", "convention": "Convention",
          "bug-fix": "Bug fix", "decision": "Decision", "discovery": "Discovery"}
_TARGETS = {"readme": "README", "docs": "the docs site", "both": "README and the docs site",
            "breaking": "README and the docs site"}
_ANCHOR = "<!-- ah:entry id={id}{extra} -->"
_ANCHOR_RE = re.compile(r"^<!-- ah:entry id=([0-9a-f]{16})(?: at=(\S*))? -->$", re.M)


def _write(path: str, text: str) -> None:
    """The one writer of project files (tests make it fail to simulate a crash)."""
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    write_atomic(path, text.encode(), 0o644)


class _Project:
    """Paths under `<root>/.claude/`, refusing anything that would resolve outside it.

    `.claude` itself must resolve inside the project (like the promoter's project skills dir):
    a `.claude` symlinked elsewhere would otherwise carry every write out of the project.
    """

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.claude = os.path.join(self.root, ".claude")

    def path(self, *parts: str) -> str:
        p = os.path.join(self.claude, *parts)
        real_root = os.path.realpath(self.root)
        real_base = os.path.realpath(self.claude)
        if os.path.commonpath([real_root, real_base]) != real_root or real_base == real_root:
            raise ValueError(f"refusing to write to {self.claude}: it resolves to {real_base}, "
                             f"outside the project {self.root} (a symlink?); nothing was saved")
        real = os.path.realpath(p)
        if os.path.commonpath([real_base, real]) != real_base:
            raise ValueError(f"refusing to write outside {self.claude}: {p} resolves to {real} "
                             "(a symlink?); nothing more was saved")
        return p

    def rel(self, path: str) -> str:
        return os.path.relpath(path, self.root)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def _when(m: Marker) -> datetime | None:
    try:
        return datetime.fromisoformat(m.timestamp.replace("Z", "+00:00")).astimezone()
    except ValueError:
        return None


def _day(m: Marker, now: float | None = None) -> str:
    """Local date of the marker (these pages are read by people), else of the save."""
    when = _when(m)
    if when is None:
        return datetime.fromtimestamp(now).strftime("%Y-%m-%d") if now else "undated"
    return when.strftime("%Y-%m-%d")


def _one_line(text: str) -> str:
    return " ".join(text.split())


# -- journal ----------------------------------------------------------------------------------

def _journal_entry(m: Marker) -> str:
    when = _when(m)
    clock = when.strftime("%H:%M") if when else "--:--"
    where = " · ".join(x for x in (f"session {m.session_id}" if m.session_id else "",
                                  os.path.basename(m.transcript)) if x)
    tail = f"\n_{where}_\n" if where else ""
    return (f"{_ANCHOR.format(id=m.id, extra='')}\n"
            f"## {clock} [{m.kind}] {m.topic} (doc-impact: {m.doc_impact})\n\n{m.body}\n{tail}\n")


def _journal_ids(journal_dir: str) -> set[str]:
    """Ids already journaled on any day: a rerun on another day must not add them again."""
    ids: set[str] = set()
    try:
        names = os.listdir(journal_dir)
    except FileNotFoundError:
        return ids
    for name in names:
        if name.endswith(".md"):
            ids.update(i for i, _ in _ANCHOR_RE.findall(_read(os.path.join(journal_dir, name))))
    return ids


def _save_journal(proj: _Project, todo: list[Marker], now: float, dry: bool) -> list[str]:
    jdir = proj.path("journal")
    have = _journal_ids(jdir)
    by_day: dict[str, list[Marker]] = {}
    for m in todo:
        if m.id not in have:
            by_day.setdefault(_day(m, now), []).append(m)
    written = []
    for day, ms in sorted(by_day.items()):
        path = proj.path("journal", f"{day}.md")
        text = _read(path) or f"# Journal {day}\n\n"
        text += "".join(_journal_entry(m) for m in ms)
        if not dry:
            _write(path, text)
        written.append(proj.rel(path))
    return written


# -- wiki -------------------------------------------------------------------------------------

def _wiki_entry(m: Marker) -> str:
    day = _day(m)
    return (f"{_ANCHOR.format(id=m.id, extra=f' at={m.timestamp}')}\n"
            f"### {day} · {m.kind} · doc-impact: {m.doc_impact}\n\n{m.body}\n\n")


def _wiki_entries(text: str) -> list[tuple[str, str, str]]:
    """(at, id, chunk) of each history entry of an existing wiki page."""
    found = list(_ANCHOR_RE.finditer(text))
    out = []
    for i, a in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        chunk = text[a.start():end].rstrip("\n") + "\n\n"
        out.append((a.group(2) or "", a.group(1), chunk))
    return out


def _entry_summary(chunk: str) -> tuple[str, str]:
    """(heading, body) of a history entry chunk."""
    lines = chunk.strip("\n").split("\n")
    heading = lines[1][4:] if len(lines) > 1 and lines[1].startswith("### ") else ""
    return heading, "\n".join(lines[2:]).strip()


def _wiki_page(topic: str, entries: list[tuple[str, str, str]]) -> str:
    entries = sorted(entries, key=lambda e: (e[0], e[1]), reverse=True)  # newest first
    heading, body = _entry_summary(entries[0][2])
    page = (f"# {topic}\n\n"
            "<!-- Maintained by autoharness from learning markers: the newest lesson is the\n"
            "     current truth; older ones are kept below, newest first. -->\n\n"
            f"{body}\n\n_{heading}_\n\n## History\n\n" + "".join(e[2] for e in entries))
    return page.rstrip("\n") + "\n"


def _save_wiki(proj: _Project, todo: list[Marker], dry: bool) -> list[str]:
    by_topic: dict[str, list[Marker]] = {}
    for m in todo:
        by_topic.setdefault(m.topic, []).append(m)
    written = []
    for topic, ms in sorted(by_topic.items()):
        path = proj.path("wiki", f"{topic}.md")
        entries = _wiki_entries(_read(path))
        have = {e[1] for e in entries}
        new = [(m.timestamp, m.id, _wiki_entry(m)) for m in ms if m.id not in have]
        if not new:
            continue
        if not dry:
            _write(path, _wiki_page(topic, entries + new))
        written.append(proj.rel(path))
    return written


# -- doc drafts -------------------------------------------------------------------------------

def _draft(m: Marker) -> str:
    lines = [f"# Doc draft: {m.topic}", "", _ANCHOR.format(id=m.id, extra=""), "",
             "Status: draft for review. autoharness changed nothing outside `.claude/`.", "",
             f"- Update: {_TARGETS[m.doc_impact]} (doc-impact: {m.doc_impact})"]
    if m.doc_impact == "breaking":
        lines += ["- Breaking change: add a CHANGELOG entry and migration notes"]
    lines += ["", "## What changed", "", m.body, "",
              f"_From a {m.kind} marker of {_day(m)}._", ""]
    return "\n".join(lines)


def _save_drafts(proj: _Project, todo: list[Marker], dry: bool) -> list[str]:
    written = []
    for m in todo:
        if m.doc_impact == "none":
            continue
        path = proj.path("doc-drafts", f"{m.topic}-{m.id}.md")
        if os.path.exists(path):
            continue  # drafts are the user's to edit once written: never overwrite
        if not dry:
            _write(path, _draft(m))
        written.append(proj.rel(path))
    return written


# -- marker intents ---------------------------------------------------------------------------

def skill_name(topic: str) -> str:
    """Skill names are kebab-case: dots of versioned topics become hyphens."""
    return topic.replace(".", "-")[:64].strip("-")


def lesson_line(m: Marker) -> str:
    return f"- {_LABEL[m.kind]}: {_one_line(m.body)}"


def _anchor_of(text: str) -> str | None:
    """The shortest tail of `text` (whole lines) that occurs exactly once: a patch's `old`."""
    lines = text.rstrip("\n").split("\n")
    for k in range(1, len(lines) + 1):
        old = "\n".join(lines[-k:])
        if old.strip() and text.count(old) == 1:
            return old
    return None


def _proposal(m: Marker, current: str | None) -> tuple[Proposal | None, str | None]:
    """(proposal, skill text after it lands); current is the skill's text as it will be, if any."""
    skill = skill_name(m.topic)
    line = lesson_line(m)
    reason = f"The agent flagged a {m.kind} lesson about `{m.topic}` with a learning marker."
    if current is None:
        body = (f"# {m.topic}\n\nLessons flagged while working in this project.\n\n"
                f"## Lessons\n\n{line}\n")
        # the promoter wants a description that says when to use the skill
        desc = (f"Use when working on {m.topic.replace('-', ' ')} in this project: "
                f"{_one_line(m.body)[:160]}")
        return Proposal(action="create", skill=skill, layer="project", reason=reason,
                        evidence=m.raw, description=desc, body=body), body
    if line in current:
        return None, current  # already folded into the skill
    old = _anchor_of(current)
    if old is None:
        return None, current
    new = f"{old}\n{line}"
    return (Proposal(action="patch", skill=skill, layer="project", reason=reason,
                     evidence=m.raw, old=old, new=new),
            current.replace(old, new, 1))


QueueIntent = Callable[[Intent], Iterable[str] | str | None]


def _queue_intents(proj: _Project, todo: list[Marker], state: LearningState, now: float,
                   queue_intent: QueueIntent | None, dry: bool) -> list[str]:
    queued = []
    texts: dict[str, str | None] = {}  # a skill's text as earlier intents of this run leave it
    for m in todo:
        if m.kind not in INTENT_KINDS or m.id in state.queued_intents:
            continue
        skill = skill_name(m.topic)
        if skill not in texts:
            path = os.path.join(proj.claude, "skills", skill, "SKILL.md")
            texts[skill] = _read(path) or None
        proposal, texts[skill] = _proposal(m, texts[skill])
        if proposal is None:
            continue
        intent = Intent(id=f"marker-{m.id}", source="marker", created_at=now, proposal=proposal,
                        session_id=m.session_id or None, project_root=proj.root)
        ids = [intent.id]
        if not dry:
            if queue_intent is None:
                continue
            got = queue_intent(intent)
            state.note_intents([m.id])
            if isinstance(got, str):
                ids = [got]
            elif got is not None:
                ids = list(got) or ids
        queued += ids
    return queued


# -- the save ---------------------------------------------------------------------------------

def pending(markers: Iterable[Marker], processed_ids) -> list[Marker]:
    """Markers not yet saved, each id once, oldest first (stable for equal timestamps)."""
    ms = [m for m in dedupe(markers) if not is_processed(m, processed_ids)]
    return sorted(ms, key=lambda m: m.timestamp)


def redact_marker(m: Marker, redactor) -> Marker:
    """The marker with its body and raw text redacted (capture's Redactor). Ids (and so
    dedup, anchors and state) stay those of the marker as written."""
    body, raw = redactor.redact(m.body)[0], redactor.redact(m.raw)[0]
    if body == m.body and raw == m.raw:
        return m
    return msgspec.structs.replace(m, body=body, raw=raw)


def save_markers(project_root: str, markers: Iterable[Marker], state: LearningState, *,
                 queue_intent: QueueIntent | None, dry_run: bool = False,
                 now: float | None = None, advance_time: bool = True,
                 redactor=None) -> LearningsSaved:
    """Save the unprocessed `markers` of a project; see the module docstring for guarantees.

    `queue_intent` must be durable before it returns and should ignore an intent it already
    holds (the intent's id, `marker-<marker id>`, is stable per marker). It may return the
    id(s) the queue stored it under, which `LearningsSaved.intents` then reports; returning None
    reports the intent's own id. With `queue_intent=None` no intent is queued (the markers are
    still recorded as saved). `dry_run` writes and queues nothing and reports what would be
    done. `advance_time=False` records the ids but leaves `last_processed_at`: for a save
    limited to some transcripts, whose cutoff must not hide the others' markers from the
    offline `--previous-transcripts` scan.

    Marker text is redacted with `redactor` (capture's Redactor; default:
    the packaged rules) before anything is written or queued: the journal, wiki and drafts
    under `.claude/` are often committed.
    """
    if redactor is None:
        from ..capture.redact import default_redactor

        redactor = default_redactor()
    now = time.time() if now is None else now
    markers = list(markers)
    todo = [redact_marker(m, redactor) for m in pending(markers, state.processed_ids)]
    skipped = [m.id for m in dedupe(markers) if is_processed(m, state.processed_ids)]
    proj = _Project(project_root)
    result = LearningsSaved(dry_run=dry_run, skipped=skipped, saved=[m.id for m in todo])
    if not todo:
        return result
    result.journal = _save_journal(proj, todo, now, dry_run)
    result.wiki = _save_wiki(proj, todo, dry_run)
    result.drafts = _save_drafts(proj, todo, dry_run)
    result.intents = _queue_intents(proj, todo, state, now, queue_intent, dry_run)
    if not dry_run:
        state.record(result.saved, now if advance_time else None)
    return result
