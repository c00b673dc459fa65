"""UserPromptSubmit: remind the model of a live learned skill the prompt calls for.

The match is deterministic (daemon/listing/remind.py) over the triggers of the session's
live skills (daemon/listing/triggers.py, in a worker thread). Each skill is named at most once
per session: what a session was reminded of is recorded with the parts of context it got
(`Book.context_delivered`, on the loop) and in the report's ledger (for recall with and
without a reminder). Off with `listing.reminders = false`; hand-written skills only with
`listing.remind_hand_written`. The hook waits for this only its short reply deadline: a
reminder that comes late is no reminder, and the prompt goes on without one.
"""

import anyio
import msgspec

from .. import sessions as sm
from ..book import Book
from ..listing.remind import matches, reminder
from ..listing.triggers import TriggerIndex
from ..live import Live
from ..projects import ProjectSwitches
from .ledger import Ledger

PREFIX = sm.REMINDED  # a context part: the skill (`<layer>/<name>`) the session was reminded of
MAX_PROMPT_CHARS = 20_000  # of a prompt, matched at most (a paste can be megabytes)


class PromptReminders:
    def __init__(self, book: Book, live: Live, *, projects: ProjectSwitches, ledger: Ledger):
        """The `ledger` records each reminder (blocking)."""
        self.book = book
        self.live = live
        self.projects = projects
        self.ledger = ledger
        self.index = TriggerIndex(lambda root: self.live.promoter.list_skills(root))

    async def output(self, ev: sm.HookEvent) -> str | None:
        """The hook output for this prompt, or None: nothing to remind of."""
        cfg = self.live.cfg.listing
        s = self.book.session(ev.session_id)
        if not cfg.reminders or not ev.prompt or s is None:
            return None
        root = self.projects.root(s.cwd) if s.cwd else None
        done = reminded(s.context_sent)
        text, keys = await anyio.to_thread.run_sync(
            self.build, ev.session_id, root, ev.prompt[:MAX_PROMPT_CHARS], done,
            cfg.remind_hand_written, cfg.reminder_max_chars)
        s = self.book.session(ev.session_id)
        if not keys or s is None or reminded(s.context_sent) & set(keys):
            return None  # a concurrent prompt of the session reminded of it meanwhile
        self.book.context_delivered(s.session_id, [PREFIX + k for k in keys])
        return msgspec.json.encode({"hookSpecificOutput": {
            "hookEventName": "UserPromptSubmit", "additionalContext": text}}).decode()

    def build(self, session: str, root: str | None, prompt: str, done: frozenset[str],
              hand_written: bool, max_chars: int) -> tuple[str, list[str]]:
        """Worker thread: the reminder text and the keys of the skills it names, recorded in
        the ledger here (one thread hop per prompt; two prompts of one session at once, the
        only case where the loop then sends none, are not a thing a user can type)."""
        found = matches(prompt, self.index.triggers(root, hand_written=hand_written), done)
        text, used = reminder(found, max_chars)
        keys = [t.key for t in used]
        if keys:
            self.ledger.record_reminder(session, root, keys)
        return text, keys


def reminded(sent) -> frozenset[str]:
    return frozenset(p[len(PREFIX):] for p in sent if p.startswith(PREFIX))
