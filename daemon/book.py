"""The daemon's book: its state in memory, the journal that makes every acknowledged change
durable, and the snapshot that shortens replay.

Invariants: acknowledged means journaled. An event's effect (the session's post-state, the
jobs it created, its id, a turn) and every job change are appended to the journal with one
`write()` on the event loop before anyone is told, so a process crash at any instant loses
nothing acknowledged; `sync` (fsync, against power loss) runs at least every
`fsync_interval_s`. The latest event ids are remembered durably, so a second copy of an event
counts nothing. A snapshot is written by one writer at a time, and only then is the journal
compacted down to what it covers, keeping the unfinished jobs and live sessions so a corrupt
snapshot does not drop them. Blocking I/O runs in worker threads (`persist_now` is for
startup and shutdown, when nothing else runs).

`Book` is what the other parts see through small protocols: the pool's `JobBook` and
`Counters`, the server's `ConnectionCounters`.
"""

from collections.abc import Callable, Iterable

import anyio
import structlog

from claude_autoharness.daemon import sessions as sm
from claude_autoharness.daemon import store
from claude_autoharness.daemon.capture.packet import CaptureStats, Packet
from claude_autoharness.daemon.persistence import PersistenceHealth
from claude_autoharness.protocol import paths

log = structlog.get_logger("autoharness")

KEEP_DONE_JOBS = 200
KEEP_ENDED_SESSIONS_S = 7 * 86_400
KEEP_EVENT_IDS = 4096  # the latest event ids besides replays: a copy arrives within seconds


class Book:
    def __init__(self, *, clock: Callable[[], float]):
        self.clock = clock
        self.state = store.State()
        self.journal = store.Journal(paths.journal_file())
        self.capture_stats = CaptureStats()
        self.quarantined: list[str] = []
        self.dirty = False
        self.last_snapshot_at: float | None = None
        self.health = PersistenceHealth(clock)  # a failing state dir, said in status
        self._persist_lock = anyio.Lock()
        self._changed = anyio.Event()
        self.seen: dict[str, None] = {}  # the latest event ids, oldest first
        self.keep_ids = KEEP_EVENT_IDS  # how many `seen` holds (more while spools replay)
        self._last_pass = 0  # records of the previous replay pass (ids loaded, before the first)
        # Called just before a snapshot is encoded: parts copy their tables into the state.
        self.before_snapshot: Callable[[store.State], None] = lambda state: None

    # ---- loading -------------------------------------------------------------------------

    def load(self, *, max_attempts: int) -> None:
        """Snapshot, then the journal records newer than it; quarantine whatever is corrupt.

        A job found running was interrupted: it runs again. `attempts` counts model calls, so
        only a job that took us down inside its model call `max_attempts` times is failed; one
        interrupted while waiting for its transcript or cutting its window costs nothing.
        """
        qdir = paths.quarantine_dir()
        self.state, bad = store.load_snapshot(paths.snapshot_file(), qdir)
        self.quarantined += bad
        records, bad = self.journal.replay(self.state.journal_seq, qdir)
        self.quarantined += bad
        # Every id loaded is kept until the first replay pass is over: the spool may hold a
        # copy of any of them (a reply lost just before the crash, behind a long replay).
        self.keep_ids = KEEP_EVENT_IDS + len(self.state.seen_ids) + len(records)
        for eid in self.state.seen_ids:
            self.remember(eid)
        for rec in records:
            self.apply(rec)
        self._last_pass = len(self.seen)
        for job in self.state.jobs.values():
            if job.status != "running":
                continue
            if job.attempts >= max_attempts:  # it keeps taking us down
                job.status, job.finished_at = "failed", self.clock()
                job.last_error = f"interrupted {job.attempts} times"
                self.state.jobs_failed += 1
            else:  # interrupted by a crash or stop: run it again
                job.status = "pending"
        self.capture_stats.from_state(self.state.capture)

    def apply(self, rec: store.JournalRecord) -> None:
        """Replay one journal record. Records carry post-states: applying one twice changes
        nothing, except a turn, whose record is applied once (its seq is newer than the
        snapshot's only until a snapshot covers it)."""
        for job in ([rec.job] if rec.job is not None else []) + rec.jobs:
            self.state.jobs[job.id] = job
        if rec.session is not None:
            s = rec.session
            prev = self.state.sessions.get(s.session_id)
            s.tool_ids = list(prev.tool_ids) if prev is not None else []
            s.tool_at = list(prev.tool_at) if prev is not None else []
            for tool_use_id in rec.calls:  # made no later than journaled: `at` bounds them
                sm.remember_call(s, tool_use_id, rec.at)
            self.state.sessions[s.session_id] = s
        if rec.op == "turn" or rec.turn:
            self.state.turns.add(rec.project)
        if rec.kind:  # an event record: the counters a snapshot would have carried
            ev = self.state.events
            ev.received += 1
            ev.by_kind[rec.kind] = ev.by_kind.get(rec.kind, 0) + 1
        self.remember(rec.eid)

    def remember(self, eid: str) -> None:
        if not eid:
            return
        self.seen[eid] = None
        while len(self.seen) > self.keep_ids:
            del self.seen[next(iter(self.seen))]

    def replay_pass(self, n: int) -> None:
        """A spool replay of `n` records begins. An event acknowledged while it runs whose reply
        was lost (a busy loop) is spooled and comes back in the next pass: until then neither
        pass may push its id out, so the memory holds both passes' ids besides the latest
        KEEP_EVENT_IDS."""
        self.keep_ids = KEEP_EVENT_IDS + self._last_pass + n
        self._last_pass = n

    def seen_before(self, eid: str) -> bool:
        """Whether an event with this id was already acknowledged (a spooled copy, a retry)."""
        return bool(eid) and eid in self.seen

    def open(self) -> None:
        """Start journaling (after `load` and any recovery)."""
        for path in self.quarantined:
            log.warning("quarantined", file=path)
        self.journal.open()
        self.dirty = True

    def close(self) -> None:
        self.journal.close()

    # ---- snapshots -----------------------------------------------------------------------

    def snapshot_bytes(self) -> tuple[bytes, int, bytes]:
        """The snapshot, the journal size it covers, and what the compacted journal keeps."""
        self.before_snapshot(self.state)
        self.state.capture = self.capture_stats.to_state()
        self.state.seen_ids = list(self.seen)
        self.state.journal_seq = self.journal.seq
        self.state.saved_at = self.clock()
        self._prune()
        unfinished = [j for j in self.state.jobs.values() if j.status in ("pending", "running")]
        live = [s for s in self.state.sessions.values() if s.ended_at is None or s.activity > 0]
        carry = self.journal.carry(self.journal.seq, unfinished, live)
        return store.encode_state(self.state), self.journal.size, carry

    async def persist(self) -> None:
        """Write the snapshot if dirty; then the journal is compacted to what it does not cover
        (and the unfinished jobs and live sessions, in case the snapshot is ever unreadable).

        One at a time: two writers finishing out of order could put an older snapshot last.
        """
        async with self._persist_lock:
            if not self.dirty:
                return
            self.dirty = False
            try:
                data, size, carry = self.snapshot_bytes()
                await anyio.to_thread.run_sync(store.write_private, paths.snapshot_file(), data)
                self.last_snapshot_at = self.clock()
                await anyio.to_thread.run_sync(self.journal.compact, size, carry)
            except BaseException as e:
                self.dirty = True
                if isinstance(e, OSError):
                    self.health.failed(e)
                raise
            self.health.ok()

    def persist_now(self) -> None:
        """Blocking persist for shutdown and startup, when nothing else runs."""
        data, size, carry = self.snapshot_bytes()
        store.write_private(paths.snapshot_file(), data)
        self.last_snapshot_at = self.clock()
        self.dirty = False
        self.journal.compact(size, carry)

    async def sync(self) -> None:
        """fsync what was appended since the last sync (a process crash loses nothing
        appended; this bounds what a power loss can take)."""
        try:
            await anyio.to_thread.run_sync(self.journal.sync)
        except OSError as e:
            self.health.failed(e)
            raise

    def _prune(self) -> None:
        finished = [j for j in self.state.jobs.values() if j.status in ("done", "failed")]
        if len(finished) > KEEP_DONE_JOBS:
            finished.sort(key=lambda j: j.finished_at or j.created_at)
            for j in finished[: len(finished) - KEEP_DONE_JOBS]:
                del self.state.jobs[j.id]
        busy = {j.session_id for j in self.state.jobs.values() if j.status in ("pending", "running")}
        sm.forget_ended(self.state.sessions, now=self.clock(), keep_s=KEEP_ENDED_SESSIONS_S, busy=busy)

    def mark_dirty(self) -> None:
        """Something in the state changed that the next snapshot must carry."""
        self.dirty = True

    # ---- the job book (what the reflector pool reads and writes) -------------------------

    def jobs(self) -> Iterable[sm.Job]:
        return list(self.state.jobs.values())

    def session(self, session_id: str) -> sm.Session | None:
        return self.state.sessions.get(session_id)

    async def record_jobs(self, jobs: list[sm.Job], session: sm.Session | None = None) -> None:
        """Journal new or changed jobs (and a moved watermark) before anyone is told: one
        `write()` on the loop, so records stay in the order the changes were made."""
        if not jobs:
            return
        self._append("job", jobs=jobs, session=session)

    def record_event(self, eid: str, kind: str, *, session: sm.Session | None,
                     jobs: list[sm.Job], calls: list[str], turn: bool = False,
                     project: str | None = None) -> None:
        """One acknowledged hook event: its id, the session's post-state with the tool call it
        counted, the jobs it created and, for a main session's Stop (`turn`), one turn of the
        user layer and of `project`. One record, so they are durable together."""
        if turn:
            self.state.turns.add(project)
        self.remember(eid)
        self._append("event", jobs=jobs, session=session, eid=eid, kind=kind, calls=calls,
                     turn=turn, project=project)

    def record_calls(self, session: sm.Session, calls: list[str]) -> None:
        """Tool calls counted from the session's transcript (no hook event reported them)."""
        self._append("calls", jobs=[], session=session, calls=calls)

    def _append(self, op: str, *, jobs: list[sm.Job], session: sm.Session | None = None,
                **fields) -> None:
        for job in jobs:
            self.state.jobs[job.id] = job
        self.dirty = True
        try:
            self.journal.append(op, jobs=jobs, session=session, **fields)
        except OSError as e:
            self.health.failed(e)
            raise
        if jobs:
            self._changed.set()

    def watch(self) -> anyio.Event:
        """An event set at the next change to the jobs (take it before looking at them)."""
        self._changed = anyio.Event()
        return self._changed

    def changed(self) -> None:
        """Wake whoever watches the jobs (a pool slot came free)."""
        self._changed.set()

    # ---- counters (the pool's and the server's tallies, carried by the snapshot) ---------

    def job_finished(self, ok: bool) -> None:
        if ok:
            self.state.jobs_done += 1
        else:
            self.state.jobs_failed += 1
        self.dirty = True

    def tokens_on(self, day: str) -> int:
        return self.state.tokens.get(day, 0)

    def add_tokens(self, day: str, n: int) -> None:
        """Charge `n` tokens to `day` and the total; only today's count is kept."""
        t = self.state.tokens
        for k in [k for k in t if k.startswith("day:") and k != day]:
            del t[k]
        t[day] = t.get(day, 0) + n
        t["total"] = t.get("total", 0) + n
        self.dirty = True

    def captured(self, packet: Packet) -> None:
        self.capture_stats.add(packet)
        self.dirty = True

    def refused(self, path: str, reason: str) -> None:
        self.capture_stats.refuse(path, reason, self.clock())
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
