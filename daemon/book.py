"""The daemon's book: its state in memory, the journal that makes job changes durable, and the
snapshot that makes everything else durable.

Invariants: a job change is in the table and fsynced in the journal before anyone is told of
it; a snapshot is written by one writer at a time, and the journal records it covers are
dropped only after it is durable. Blocking I/O runs in worker threads (`persist_now` is for
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
        for rec in records:
            if rec.op == "job" and rec.job is not None:
                self.state.jobs[rec.job.id] = rec.job
            elif rec.op == "session" and rec.session is not None:
                self.state.sessions[rec.session.session_id] = rec.session
            elif rec.op == "turn":
                self.state.turns.add(rec.project)
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

    def open(self) -> None:
        """Start journaling (after `load` and any recovery)."""
        for path in self.quarantined:
            log.warning("quarantined", file=path)
        self.journal.open()
        self.dirty = True

    def close(self) -> None:
        self.journal.close()

    # ---- snapshots -----------------------------------------------------------------------

    def snapshot_bytes(self) -> tuple[bytes, int]:
        self.before_snapshot(self.state)
        self.state.capture = self.capture_stats.to_state()
        self.state.journal_seq = self.journal.seq
        self.state.saved_at = self.clock()
        self._prune()
        return store.encode_state(self.state), self.journal.seq

    async def persist(self) -> None:
        """Write the snapshot if dirty; then the journal records it covers can go.

        One at a time: two writers finishing out of order could put an older snapshot last.
        """
        async with self._persist_lock:
            if not self.dirty:
                return
            self.dirty = False
            try:
                data, seq = self.snapshot_bytes()
                await anyio.to_thread.run_sync(store.write_private, paths.snapshot_file(), data)
                self.last_snapshot_at = self.clock()
                await anyio.to_thread.run_sync(self.journal.truncate_if, seq)
            except BaseException as e:
                self.dirty = True
                if isinstance(e, OSError):
                    self.health.failed(e)
                raise
            self.health.ok()

    def persist_now(self) -> None:
        """Blocking persist for shutdown and startup, when nothing else runs."""
        data, seq = self.snapshot_bytes()
        store.write_private(paths.snapshot_file(), data)
        self.last_snapshot_at = self.clock()
        self.dirty = False
        self.journal.truncate_if(seq)

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
        """Journal (fsync) new or changed jobs (and a moved watermark) before anyone is told."""
        if not jobs:
            return
        # In the table first: a snapshot taken while the journal write runs then includes them,
        # so truncating the journal after that snapshot can never lose them.
        for job in jobs:
            self.state.jobs[job.id] = job
        self.dirty = True

        def write() -> None:
            for job in jobs:
                self.journal.append("job", job=job)
            if session is not None:
                self.journal.append("session", session=session)

        try:
            await anyio.to_thread.run_sync(write)
        except OSError as e:
            self.health.failed(e)
            raise
        self._changed.set()

    async def record_turn(self, project_root: str | None) -> None:
        """A main session's Stop: one turn of the user layer and of its project, journaled."""
        self.state.turns.add(project_root)
        self.dirty = True
        await anyio.to_thread.run_sync(lambda: self.journal.append("turn", project=project_root))

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
