"""The book's tallies: the counters the snapshot carries (events by kind, rejections, jobs done,
tokens, windows cut), changed only through these methods, on the event loop. A mixin of
`Book`, which owns `state` and journals: a counter is made durable by the persist that
follows its `dirty` mark, or, for an event's own counts, by the event's record (see
`event_received`)."""

from collections.abc import Callable

from . import sessions as sm
from . import tokens
from .capture.packet import Packet, count_window
from .persist import state as st


class Tallies:
    state: st.State
    dirty: bool
    clock: Callable[[], float]

    def _mark_dirty(self, session: sm.Session | None = None) -> None:
        raise NotImplementedError

    def job_finished(self, ok: bool) -> None:
        if ok:
            self.state.jobs_done += 1
        else:
            self.state.jobs_failed += 1
        self.dirty = True

    def tokens_on(self, day: str, backend: str = "") -> int:
        return tokens.tokens_on(self.state.tokens, day, backend)

    def add_tokens(self, day: str, n: int, backend: str = "") -> None:
        tokens.charge(self.state.tokens, day, n, backend)
        self.dirty = True

    def captured(self, packet: Packet, session_id: str = "") -> None:
        count_window(self.state.capture, packet, session_id)
        self.dirty = True

    def refused(self, path: str, reason: str) -> None:
        """A transcript path that was not read (see `capture.source`)."""
        self.state.capture.refused += 1
        self.state.capture.last_refused = st.Refusal(path, reason, self.clock())
        self.dirty = True

    def peer_rejected(self) -> None:
        self.state.events.peer_rejected += 1
        self.dirty = True

    def request_rejected(self) -> None:
        """A frame too large or cut short, or one that is no request this daemon serves."""
        ev = self.state.events
        ev.malformed_frames += 1
        ev.received += 1
        ev.rejected += 1
        self.dirty = True

    def event_received(self) -> None:
        """A hook event arrived (live or spooled), before it is decoded. Not marked dirty on
        its own: what follows (`record_event`, whose record counts it again on replay, or a
        rejection or duplicate) makes it durable, and a persist in between would count it
        twice on replay."""
        self.state.events.received += 1

    def event_rejected(self) -> None:
        """An event not acted on (undecodable, an invalid session id, an unreadable spool
        record)."""
        self.state.events.rejected += 1
        self._mark_dirty()

    def event_duplicate(self) -> None:
        """A copy of an event already counted: it counts nothing else."""
        self.state.events.duplicates += 1
        self._mark_dirty()

    def event_kind(self, name: str) -> bool:
        """Count an event by its hook name; False for a kind this daemon does not know, which
        is counted as unknown and nothing else. A known one is made durable by its
        `record_event` or `event_duplicate` (as `event_received`)."""
        ev = self.state.events
        if name in sm.KNOWN_EVENTS:
            ev.by_kind[name] = ev.by_kind.get(name, 0) + 1
            return True
        ev.unknown_kinds += 1
        self._mark_dirty()
        return False

    def spool_replayed(self, n: int) -> None:
        self.state.events.spool_replayed += n
        self._mark_dirty()
