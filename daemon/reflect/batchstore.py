"""The batch runner's durable record, `<state>/batches.json`: every item and every batch id,
and the create request in flight. Replaced atomically on every change; an unreadable file is
set aside and the runner starts empty."""

import os

import msgspec
import structlog

from claude_autoharness.daemon.atomic import write_atomic
from claude_autoharness.protocol import paths

log = structlog.get_logger("autoharness")


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


def load(now: float) -> Journal:
    """The journal as last saved (empty when there is none); an unreadable one is set aside
    as `batches.json.corrupt-<now>`. Batches still in flight are due for a poll at once."""
    try:
        with open(journal_path(), "rb") as f:
            j = msgspec.json.decode(f.read(), type=Journal)
    except FileNotFoundError:
        j = Journal()
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as e:
        bad = journal_path() + f".corrupt-{int(now)}"
        os.replace(journal_path(), bad)
        log.error("batch journal unreadable: set aside", path=bad, error=str(e))
        j = Journal()
    for b in j.batches.values():
        if b.status != "ended":
            b.next_poll_at = 0.0  # resume polling right away
    return j


def save(j: Journal) -> None:
    """Replace the journal on disk (atomically)."""
    os.makedirs(paths.state_dir(), mode=0o700, exist_ok=True)
    write_atomic(journal_path(), msgspec.json.encode(j))
