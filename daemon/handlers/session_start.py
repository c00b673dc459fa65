"""The context autoharness gives a session at its start: the marker report, the promoter summary
and the marker rule, under one budget (`learnings.context`).

Built in a worker thread (it reads files) from what the event loop took for it (`StartInputs`),
and it changes no state: what went out comes back in `StartContext`, and the loop applies that
to the book (`Book.context_delivered`, `Book.mark_project_seen`).

The rule and the report go out on startup, clear and compact (compaction drops earlier
context) and on resume only if the session never got them; the promoter summary once a session.
"""

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from ...protocol.replies import SyncConflict
from ...protocol.words import plural
from ..intents import IntentQueue
from ..learnings import context as lctx
from ..learnings import report as lreport
from ..learnings.markers import MarkerIndexer, slug_for
from ..learnings.service import slug_of
from ..learnings.state import load as load_learning_state
from ..live import Live
from ..proposals import ACTIONS, LAYERS, Intent, Proposal
from ..skillsync import rounds as sync_rounds

PROMOTER_SUMMARY_CHARS = 1_000
SKILL_NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class StartInputs:
    """What the loop reads for one session start (copies: the thread reads no state)."""

    session_id: str
    source: str  # startup, resume, clear, compact
    sent: frozenset[str]  # the parts this session was given before
    root: str | None  # its project
    transcript_path: str | None
    since: float  # when this project's promoter summary last went out
    at: float  # now: the project's mark if the summary goes out
    plugin: bool  # the plugin's hook delivered it: its commands are the plugin's
    teach: bool  # `learnings.teach`


@dataclass(frozen=True)
class StartContext:
    text: str  # "" when there is nothing to say
    delivered: frozenset[str]  # the parts that fitted the budget


class SessionStartContext:
    def __init__(self, live: Live, *, markers: MarkerIndexer, intents: IntentQueue,
                 catch_up: Callable[[str], None]):
        """`catch_up` reads a project directory's transcripts now (blocking)."""
        self.live = live
        self.markers = markers
        self.intents = intents
        self.catch_up = catch_up

    def build(self, start: StartInputs) -> StartContext:
        """The context for one session start (blocking: a worker thread)."""
        fresh = start.source != "resume"
        parts: list[tuple[str, str]] = []
        if start.transcript_path:
            slug: str | None = slug_for(start.transcript_path)
        else:
            slug = slug_of(start.root) if start.root else None
        if slug and (fresh or "report" not in start.sent):
            if start.transcript_path:  # markers the watcher has not read yet count too
                self.catch_up(os.path.dirname(start.transcript_path))
            processed = set(load_learning_state(slug).processed_ids)
            report = lreport.session_start_report(self.markers.unprocessed(slug, processed),
                                                  plugin=start.plugin)
            if report:
                parts.append(("report", report))
        if start.root and "promoter" not in start.sent:
            summary = self.promoter_summary(start.root, start.since)
            if summary:
                parts.append(("promoter", summary))
        if fresh or "listing" not in start.sent:
            note = self.listing_note(start.root)
            if note:
                parts.append(("listing", note))
        if start.teach and (fresh or "rule" not in start.sent):
            parts.append(("rule", lctx.rule_text()))
        text = lctx.session_start_context(parts)
        # only what fitted the budget counts as delivered
        delivered = frozenset(name for name, part in parts if part.splitlines()[0] in text)
        return StartContext(text=text, delivered=delivered)

    def listing_note(self, root: str | None) -> str:
        """The learned skills Claude Code lists by name only in this session, said to the
        model (their descriptions are not in its skill list) with why (blocking)."""
        from ..listing.view import project_summary

        try:
            s = project_summary(self.live.cfg, root, self.live.promoter.list_skills(root))
        except Exception:  # a note: the session's context goes on without it
            return ""
        if not s.autoharness_name_only:
            return ""
        names = ", ".join(s.autoharness_name_only[:8])
        return (f"📋 autoharness: Claude Code's skill listing is over its budget ({s.text}). "
                f"These learned skills appear by name only, without their descriptions: "
                f"{names}. When a task matches one, load it with the Skill tool by name. "
                f"(For the user: {s.fix}.)")

    def promoter_summary(self, root: str, since: float) -> str:
        """What landed or was rejected for this project since `since` (blocking)."""
        done = [i for i in self.intents.list()
                if i.project_root == root and i.status in ("landed", "rejected", "held")
                and i.updated_at > since and i.proposal is not None]
        retired = self.live.promoter.archived_since(root, since)
        conflicts = [c for c in sync_rounds.load().conflicts if c.at > since]
        stale = self.live.promoter.stale_skills(root)
        lines = [*map(_conflict_line, conflicts[-3:]), *map(_archived_line, retired[-4:]),
                 *(_stale_line(name, missing) for name, missing in stale[:4]),
                 *(_decided_line(i, i.proposal) for i in done[-8:] if i.proposal)]
        if not lines:
            return ""
        if len(done) > 8:
            lines.append(f"  … and {len(done) - 8} more: autoharnessctl queue list")
        if len(retired) > 4:
            lines.append(f"  … and {len(retired) - 4} more archived: autoharnessctl skills list")
        lines.insert(0, "🛠 autoharness skills since your last session:")
        text = "\n".join(lines)
        while len(text) > PROMOTER_SUMMARY_CHARS and len(lines) > 2:
            lines.pop(-1)
            text = "\n".join(lines)
        return text


# The lines of a promoter summary. Every name in them was checked before it got here (sync
# names when the round read them, archive names when they landed, stale skills' paths matched
# a strict pattern); a proposal's words were a model's, so only well-formed ones are shown.

def _conflict_line(c: SyncConflict) -> str:
    return (f"  sync conflict on {c.skill} [user]: machine {c.kept}'s version is live, machine "
            f"{c.other}'s is in its history (autoharnessctl skills history {c.skill})")


def _archived_line(meta: dict) -> str:
    why = (meta["why"] if meta.get("reason") in ("harmful", "stale")
           and isinstance(meta.get("why"), str) else
           f"{meta['reason']}: {plural(meta.get('uses', 0), 'use')} in "
           f"{plural(meta.get('turns', 0), 'turn')}")
    return (f"  archived {meta['name']} [{meta['layer']}] ({why}); "
            f"undo: autoharnessctl skills restore {meta['name']}")


def _stale_line(name: str, missing: list[str]) -> str:
    return (f"  stale {name} [project]: names missing "
            + ", ".join(missing[:3]) + (" …" if len(missing) > 3 else ""))


def _decided_line(i: Intent, p: Proposal) -> str:
    why = f" ({', '.join(f.code for f in i.findings[:2])})" if i.status == "rejected" else ""
    name = p.skill if SKILL_NAME_RE.match(p.skill or "") else "(invalid name)"
    action = p.action if p.action in ACTIONS else "(invalid action)"
    layer = p.layer if p.layer in LAYERS else "?"
    return f"  {i.status} {action} {name} [{layer}]{why}"
