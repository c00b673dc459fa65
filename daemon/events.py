"""What follows a fact, as typed events fanned out on the event loop by one outbox.

The part that sees a fact publishes it; the parts that act on it subscribe to its type in
their own constructors. So what follows a Stop reads at `TurnCounted`'s publisher (the hooks)
and its subscribers (the review loop), not in the daemon's wiring, and no part holds a
callback into another. Chosen over callbacks because a publisher cannot be held up or broken
by what follows (delivery is a separate step, each subscriber on its own), and over a queue
per consumer because the order of facts is one order for everyone.

  event          published by                  subscribed by
  TurnCounted    hooks (a main session's Stop)  review: re-judge that layer, wake
  SkillUsed      hooks (Skill, read SKILL.md)   review: record the use
  CallHeard      hooks (a checked tool call)    review: count it for adherence
  JobDone        reflector pool                 review: wake; library: count for the curator
  IntentsQueued  batch runner, learnings save   review: wake

Invariants:
- `publish` is synchronous, never raises and never runs a subscriber; on the loop only.
- A publisher publishes only once the book (or the intent queue) has made durable what the
  event reports: acknowledged means journaled, and nobody acts on a change a crash could
  take back. Delivery runs in its own task, so it also comes after the publisher's step.
- Delivered by one task (`run`), in publish order; each subscriber of a type in the order it
  subscribed, awaited if it is async. A subscriber that raises is logged; the others still
  get the event and delivery goes on.
- Subscriptions are made at construction, before `run` starts: a later one is refused.
- In memory, like the queues it feeds: an event pending at a stop is lost (a start re-judges
  every layer the turns name and promotes what is queued; skill uses and calls heard were
  never durable).
"""

import inspect
from collections import deque
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import anyio
import msgspec
import structlog

log = structlog.get_logger("autoharness")


class TurnCounted(msgspec.Struct, frozen=True):
    """A main session's Stop was journaled as one turn of the user layer and of `project`."""

    project: str | None


class SkillUsed(msgspec.Struct, frozen=True):
    """A main session loaded a skill: by name (`Skill`) or by reading its SKILL.md (`path`)."""

    kind: Literal["name", "path"]
    value: str
    project: str | None
    session: str


class CallHeard(msgspec.Struct, frozen=True):
    """A main session's call of a tool a check can name (`call`: the event as the check hook
    reads it)."""

    call: dict
    project: str | None


class JobDone(msgspec.Struct, frozen=True):
    """A reflector job ended well and was journaled; its intents (if any) are queued."""

    job_id: str
    kind: str
    cwd: str | None


class IntentsQueued(msgspec.Struct, frozen=True):
    """Intents were queued outside a job (a batch's results, a save of markers)."""

    source: str


E = TypeVar("E")


class Events:
    """The outbox: `publish` appends, `run` delivers (see the module doc)."""

    def __init__(self) -> None:
        self._subscribers: dict[type, list[Callable[[Any], object]]] = {}
        self._outbox: deque[object] = deque()
        self._ready = anyio.Event()
        self._running = False

    def subscribe(self, kind: type[E], subscriber: Callable[[E], object]) -> None:
        if self._running:
            raise RuntimeError("events are subscribed to at construction, before they run")
        self._subscribers.setdefault(kind, []).append(subscriber)

    def publish(self, event: object) -> None:
        if type(event) in self._subscribers:  # nobody listening (a dry run): nothing kept
            self._outbox.append(event)
            self._ready.set()

    async def run(self) -> None:
        self._running = True
        while True:
            await self._ready.wait()
            self._ready = anyio.Event()
            await self.deliver()

    async def deliver(self) -> None:
        """Deliver everything published so far (and what its subscribers publish)."""
        while self._outbox:
            event = self._outbox.popleft()
            for subscriber in self._subscribers[type(event)]:
                try:
                    out = subscriber(event)
                    if inspect.isawaitable(out):
                        await out
                except Exception:
                    log.exception("event subscriber failed", kind=type(event).__name__,
                                  subscriber=getattr(subscriber, "__qualname__", "?"))
