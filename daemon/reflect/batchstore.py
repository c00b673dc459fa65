"""The batch runner's durable record, `<state>/batches.json`: every item and every batch id,
and the create request in flight. A typed document replaced atomically on every change; an
unreadable one is quarantined (where status and doctor show it) and the runner starts empty."""

import os

import msgspec

from claude_autoharness.daemon.persist import document
from claude_autoharness.protocol import paths


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


def save(j: Journal) -> None:
    """Replace the journal on disk (atomically, 0600; never into a swapped state dir)."""
    paths.make_private_dirs(paths.state_dir())
    document.save(journal_path(), j)
