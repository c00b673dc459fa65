"""The batch runner's durable record, `<state>/batches.json`: every item and every batch id,
and the create request in flight. A typed document replaced atomically on every change; an
unreadable one is quarantined (where status and doctor show it) and the runner starts empty.

An item's life is the `Journal`'s named changes, and only those: nothing else sets a field of
an item or a batch (a test holds the runner to it). They run on the event loop; the runner
journals them (`save`, its write in a worker thread) before anything depends on them, as the
job book journals a job's changes.
"""

import os

import msgspec

from ...protocol import paths
from ..persist import document


class Item(msgspec.Struct, kw_only=True, omit_defaults=True):
    id: str  # the custom id, and the job id intake records the proposals under
    transcript: str
    start: int
    end: int
    session_id: str
    project: str | None = None
    status: str = "waiting"  # waiting | submitted | done | failed | canceled
    batch: str | None = None
    attempts: int = 0
    error: str | None = None
    intents: list[str] = []
    uuids: list[str] = []  # of the records its window carries: remembered once taken in


class Batch(msgspec.Struct, kw_only=True, omit_defaults=True):
    id: str
    items: list[str]
    status: str = "in_progress"  # in_progress | canceling | ended (results taken in)
    created_at: float = 0.0
    next_poll_at: float = 0.0
    interval: float = 0.0


class Creating(msgspec.Struct, kw_only=True):
    """A create request sent (or about to be) whose batch id is not journaled yet."""

    items: list[str]  # its custom ids, in order
    at: float  # when it went out (this machine's clock)


class Journal(msgspec.Struct, kw_only=True):
    items: dict[str, Item] = {}
    batches: dict[str, Batch] = {}
    creating: Creating | None = None
    tokens: int = 0
    requests: int = 0  # API requests made for batches (create, retrieve, results, cancel)

    def waiting(self) -> list[Item]:
        return [i for i in self.items.values() if i.status == "waiting"]

    def add(self, items: list[Item]) -> None:
        self.items.update((i.id, i) for i in items)

    def cancel_waiting(self) -> int:
        """Drop every item not sent yet; how many there were."""
        for i in (waiting := self.waiting()):
            self.canceled(i, "canceled before it was sent")
        return len(waiting)

    def sending(self, ids: list[str], uuids: dict[str, list[str]], at: float) -> None:
        """A create of the items `ids` is about to go out (journaled first: a lost answer is
        looked up); each keeps the uuids of the records its window carries."""
        for cid in ids:
            self.items[cid].uuids = uuids.get(cid, [])
        self.creating = Creating(items=ids, at=at)

    def create_lost(self) -> None:
        """The create never reached the API: its items go out again."""
        self.creating = None

    def submitted(self, batch_id: str, ids: list[str], *, now: float, interval: float) -> None:
        """`batch_id` carries the items `ids` (and no create is pending any more)."""
        for cid in ids:
            it = self.items[cid]
            it.status, it.batch, it.attempts = "submitted", batch_id, it.attempts + 1
        self.batches[batch_id] = Batch(id=batch_id, items=ids, created_at=now,
                                       interval=interval, next_poll_at=now + interval)
        self.creating = None

    def canceling(self, batch_id: str) -> None:
        b = self.batches[batch_id]
        b.status, b.next_poll_at = "canceling", 0.0

    def poll_later(self, b: Batch, *, interval: float, at: float) -> None:
        b.interval, b.next_poll_at = interval, at

    def ended(self, b: Batch) -> None:  # its results are taken in
        b.status = "ended"

    def counted(self, *, tokens: int = 0, requests: int = 0) -> None:
        self.tokens, self.requests = self.tokens + tokens, self.requests + requests

    def done(self, item: Item, intents: list[str]) -> None:
        item.status, item.intents, item.error = "done", intents, None

    def failed(self, item: Item, reason: str) -> None:
        item.status, item.error = "failed", reason

    def canceled(self, item: Item, reason: str) -> None:
        item.status, item.error = "canceled", reason

    def retry(self, item: Item, reason: str, *, max_attempts: int) -> None:
        """Errored, expired or lost: alone into a later batch, until `max_attempts`."""
        if item.attempts >= max_attempts:
            self.failed(item, reason)
        else:
            item.status, item.batch, item.error = "waiting", None, reason


def journal_path() -> str:
    return os.path.join(paths.state_dir(), "batches.json")


def load() -> Journal:
    """The journal as last saved (empty when there is none, or when it is unreadable: then it
    is quarantined). Batches still in flight are due for a poll at once."""
    j = document.load_or_set_aside(journal_path(), Journal) or Journal()
    for b in j.batches.values():
        if b.status != "ended":
            b.next_poll_at = 0.0  # resume polling right away
    return j


def save(j: Journal | msgspec.Raw) -> None:
    """Replace the journal on disk (atomically, 0600; never into a swapped state dir), given
    it or its encoding (blocking: the runner encodes on the loop and writes in a thread)."""
    paths.make_private_dirs(paths.state_dir())
    document.save(journal_path(), j)
