"""The daemon's book: its state in memory, the journal that makes every acknowledged change
durable, and the snapshot that shortens replay.

Invariants: acknowledged means journaled. An event's effect (the session's post-state, the
jobs it created, its id, a turn) and every job change are appended to the journal with one
`write()` on the event loop before anyone is told, so a process crash at any instant loses
nothing acknowledged; `sync` (fsync, against power loss) runs at least every
`fsync_interval_s`. The latest event ids are remembered durably, so a second copy of an event
counts nothing.

A persist writes what changed, not the state: the sessions changed outside an event (marked
by `_mark_dirty(session)`), the other snapshot fields' changed leaves (`persist.parts`) and what
pruning dropped, as journal records. The snapshot is rewritten only when the journal since the
last one has grown to SNAPSHOT_JOURNAL_FACTOR times its size (and SNAPSHOT_MIN_JOURNAL_BYTES),
or a snapshot failed or is owed, or at stop: the bytes written per change, snapshots included,
stay within 1 + 1/SNAPSHOT_JOURNAL_FACTOR of the journal's however large the state. A
snapshot is written by one writer at a time; the one it replaces is kept as the previous one,
with the journal segments since it, so an unreadable snapshot loses nothing. Blocking I/O runs
in worker threads (`persist_now` is for startup and shutdown, when nothing else runs).

State stays bounded: sessions quiet past the retention (`session_retention_days`) whose count
is spent are pruned, unfinished jobs older than it are ended with the reason, finished ones
beyond `KEEP_DONE_JOBS` dropped; each prune is journaled. Pruning runs on the book's clock
(`prune_due`), whether anything else changed or not.

`Book` is what the other parts see through small protocols: the pool's `JobBook` and
`Counters`, the server's `ConnectionCounters` (the tallies are `Tallies`'s, in tallies.py).
"""

import os
import random
from collections.abc import Callable, Iterable

import anyio
import structlog

from ..protocol import paths
from . import sessions as sm
from .jobchanges import JobBook, created_by
from .persist import document
from .persist import state as st
from .persist.checksum import seal
from .persist.dirs import write_private
from .persist.health import PersistenceHealth
from .persist.journal import Journal, encoder
from .persist.parts import Parts
from .persist.replay import apply_records
from .tallies import Tallies

log = structlog.get_logger("autoharness")

KEEP_DONE_JOBS = 200
KEEP_ENDED_SESSIONS_S = 7 * 86_400
KEEP_EVENT_IDS = 4096  # the latest event ids besides replays: a copy arrives within seconds
DEFAULT_RETENTION_S = 14 * 86_400
PARK_AFTER_INTERRUPTIONS = 3  # a job that was running when the daemon died this often waits
SNAPSHOT_MIN_JOURNAL_BYTES = 1 << 20
SNAPSHOT_JOURNAL_FACTOR = 4  # a start replays at most this many snapshots' size of journal
PRUNE_EVERY_S = 60.0
TABLES = ("watcher", "markers")  # the State fields other parts fill in (`Book.tables`)


def _light(session: sm.Session | None) -> sm.Session | None:
    return None if session is None else st.light(session)


class Book(Tallies, JobBook):
    def __init__(self, *, clock: Callable[[], float],
                 tables: Callable[[], dict[str, object]] = dict,
                 retention_s: Callable[[], float] | None = None):
        """`tables()` is called before each persist: the parts' tables (State field name -> its
        value), which the book copies into the state (a table left out keeps its previous copy);
        `retention_s()` is how long a finished session is kept (read live)."""
        self.clock = clock
        self.state = st.State()
        self.journal: Journal[st.Record] = Journal(paths.journal_file(), st.Record)
        self.dirty = False
        self.last_snapshot_at: float | None = None
        self.health = PersistenceHealth(clock)  # a failing state dir, said in status
        self._persist_lock = anyio.Lock()
        self._changed = anyio.Event()
        self.seen: dict[str, None] = {}  # the latest event ids, oldest first
        self.keep_ids = KEEP_EVENT_IDS  # how many `seen` holds (more while spools replay)
        self._last_pass = 0  # records of the previous replay pass (ids loaded, before the first)
        self.tables = tables
        self.retention_s = retention_s or (lambda: DEFAULT_RETENTION_S)
        self.parts = Parts()
        self._touched: set[str] = set()  # sessions changed outside an event record
        self._resumed: list[sm.Job] = []  # jobs `load` changed, journaled at `open`
        self._snap_seq = 0  # the journal seq the newest durable snapshot covers
        self._snap_size = 0
        self._snapshot_owed = False  # the last one failed, or the journal read was not all sealed
        self._pruned_at = -PRUNE_EVERY_S

    # ---- loading -------------------------------------------------------------------------

    def load(self, *, backoff_base_s: float = 2.0,
             rand: Callable[[], float] = random.random) -> None:
        """Snapshot, then the journal records newer than it (`persist.replay`); whatever is
        corrupt is quarantined (a corrupt snapshot: the previous one and its segments are read).

        A job found running was interrupted: it runs again (`sessions.resume_interrupted`);
        one interrupted more than PARK_AFTER_INTERRUPTIONS times waits, backing off, first.
        """
        self.state = st.unpacked(document.load(paths.snapshot_file(), st.Snapshot,
                                               previous=paths.previous_snapshot_file())
                                 or st.Snapshot())
        self._snap_seq = self.state.journal_seq
        try:
            self._snap_size = os.path.getsize(paths.snapshot_file())
        except OSError:
            self._snap_size = 0
        records = self.journal.replay(self.state.journal_seq)
        # legacy lines sealed, damaged ones left behind in a segment no start reads again
        self._snapshot_owed = self.journal.legacy > 0 or self.journal.damaged > 0
        # Every id loaded is kept until the first replay pass is over: the spool may hold a
        # copy of any of them (a reply lost just before the crash, behind a long replay).
        self.keep_ids = KEEP_EVENT_IDS + len(self.state.seen_ids) + len(records)
        for eid in self.state.seen_ids:
            self.remember(eid)
        for eid in apply_records(self.state, records):
            self.remember(eid)
        self._last_pass = len(self.seen)
        self.parts.reset(self.state)  # what is on disk now
        for job in self.state.jobs.values():
            if job.status == "running":
                sm.resume_interrupted(
                    job, now=self.clock(), park_after=PARK_AFTER_INTERRUPTIONS,
                    wait=lambda n: sm.backoff(n, backoff_base_s, rand))
                self._resumed.append(job)
                if job.next_attempt_at > self.clock():
                    log.warning("job parked", job=job.id, reason=job.last_error)

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
        """Start journaling (after `load` and any recovery): first the jobs `load` resumed."""
        self.journal.open()
        resumed, self._resumed = self._resumed, []
        if resumed:
            self._append(st.JobsRecord(jobs=resumed), resumed)
        self.dirty = True

    def close(self) -> None:
        self.journal.close()

    # ---- persisting ----------------------------------------------------------------------

    def snapshot_due(self) -> bool:
        """A snapshot failed or is owed, there is none yet, or the journal outgrew the last."""
        if self._snap_size == 0 and not os.path.lexists(paths.snapshot_file()):
            return True
        return self._snapshot_owed or self.journal.appended >= max(
            SNAPSHOT_MIN_JOURNAL_BYTES, SNAPSHOT_JOURNAL_FACTOR * self._snap_size)

    def prune_due(self) -> bool:
        """Every PRUNE_EVERY_S of `clock`, changes or none: a quiet daemon lets go too."""
        return self.clock() - self._pruned_at >= PRUNE_EVERY_S

    def journal_changes(self) -> None:
        """Append what changed outside the per-change records (on the loop): pruning, the
        sessions marked changed, the snapshot fields' changed leaves."""
        self._copy_tables()
        if self.prune_due():
            self._pruned_at = self.clock()
            self._prune()
        touched = list(self._touched)
        self._touched.difference_update(touched)
        changed = [s for sid in touched if (s := self.state.sessions.get(sid)) is not None]
        put, gone = self.parts.changes(self.state)
        if not (changed or put or gone):
            return
        try:
            self._append(st.PartsRecord(sessions=[st.light(s) for s in changed], set=put,
                                        unset=gone))
        except OSError:
            self.parts.undo(put, gone)
            self._touched.update(touched)
            raise

    def snapshot_bytes(self) -> tuple[bytes, int]:
        """The snapshot and the journal seq it covers; the journal moves on to a new segment
        (on the loop, between appends: the snapshot covers every closed segment)."""
        self._copy_tables()
        self.state.seen_ids = list(self.seen)
        self.state.journal_seq = self.journal.seq
        data = seal(encoder.encode(st.packed(self.state)))
        self.parts.reset(self.state)
        self._touched.clear()
        self.journal.rotate()
        return data, self.state.journal_seq

    def write_snapshot(self, data: bytes, seq: int) -> None:
        """Write a snapshot (blocking): the one it replaces is kept as the previous one, and
        the journal segments that one covers are no longer needed."""
        self._snapshot_owed = True  # until it is on disk
        write_private(paths.snapshot_file(), data, previous=paths.previous_snapshot_file())
        self.journal.drop_segments(self._snap_seq)
        self._snap_seq, self._snap_size = seq, len(data)
        self._snapshot_owed = False
        self.last_snapshot_at = self.clock()

    async def persist(self, *, snapshot: bool = False) -> None:
        """Journal what changed (raises OSError if that fails); then write the snapshot when it
        is due or asked for. A snapshot that fails raises nothing: everything is journaled, the
        failure is in `health` (status, doctor) and the next persist retries it.

        One at a time: two writers finishing out of order could put an older snapshot last.
        """
        async with self._persist_lock:
            if not (self.dirty or snapshot or self._snapshot_owed or self.prune_due()):
                return
            self.dirty = False
            try:
                self.journal_changes()
            except BaseException as e:
                self.dirty = True
                if isinstance(e, OSError):
                    self.health.failed(e)
                raise
            if snapshot or self.snapshot_due():
                try:
                    data, seq = self.snapshot_bytes()
                    await anyio.to_thread.run_sync(self.write_snapshot, data, seq)
                except OSError as e:
                    self._snapshot_owed = True
                    self.health.failed(e)
                    return
            self.health.ok()

    def persist_now(self, *, snapshot: bool = True) -> None:
        """Blocking persist for shutdown and startup, when nothing else runs; the journal is
        fsynced too. At startup pass `snapshot=False`: it is written only when due."""
        self.journal_changes()
        if snapshot or self.snapshot_due():
            self.write_snapshot(*self.snapshot_bytes())
        self.dirty = False
        self.journal.sync()

    async def sync(self) -> None:
        """fsync what was appended since the last sync (a process crash loses nothing
        appended; this bounds what a power loss can take)."""
        try:
            await anyio.to_thread.run_sync(self.journal.sync)
        except OSError as e:
            self.health.failed(e)
            raise

    def _prune(self) -> None:
        """Bound the state (see the module doc); every change journaled."""
        now, retention = self.clock(), self.retention_s()
        expired = sm.expire_jobs(list(self.state.jobs.values()), now=now, max_age_s=retention,
                                 why="session_retention_days")
        for job in expired:
            self.state.jobs_failed += 1
            log.warning("job expired", job=job.id, kind=job.kind)
        if expired:
            self._append(st.JobsRecord(jobs=expired), expired)
        dropped = sm.drop_finished(self.state.jobs, keep=KEEP_DONE_JOBS)
        busy = {j.session_id for j in self.state.jobs.values() if j.status in ("pending", "running")}
        gone = sm.prune_sessions(self.state.sessions, now=now, keep_ended_s=KEEP_ENDED_SESSIONS_S,
                                 retention_s=retention, busy=busy)
        if gone or dropped:
            self._append(st.ForgetRecord(forget_sessions=gone, forget_jobs=dropped))

    def _copy_tables(self) -> None:
        for name, table in self.tables().items():
            if name in TABLES:
                setattr(self.state, name, table)

    def _mark_dirty(self, session: sm.Session | None = None) -> None:
        """Something in the state changed that the next persist must journal: a session
        changed outside an event record is named. Private: the named changes call it."""
        if session is not None:
            self._touched.add(session.session_id)
        self.dirty = True

    # ---- the job book (what the reflector pool reads; its changes are `JobBook`'s) -------

    def jobs(self) -> Iterable[sm.Job]:
        return list(self.state.jobs.values())

    def session(self, session_id: str) -> sm.Session | None:
        return self.state.sessions.get(session_id)

    def sessions(self) -> list[sm.Session]:
        return list(self.state.sessions.values())

    def paused(self) -> bool:
        return self.state.paused

    async def record_jobs(self, jobs: list[sm.Job], session: sm.Session | None = None, *,
                          sessions: Iterable[sm.Session] = ()) -> None:
        """Journal new or changed jobs (and a moved watermark, or the counters a flush reset)
        before anyone is told: one `write()` on the loop, so records stay in the order the
        changes were made."""
        if not jobs:
            return
        self._append(st.JobsRecord(jobs=jobs, session=_light(session),
                                   sessions=[st.light(s) for s in sessions]), jobs)

    def record_event(self, eid: str, kind: str, *, session: sm.Session | None,
                     jobs: list[sm.Job], calls: list[str], turn: bool = False,
                     project: str | None = None, final_text: str | None = None,
                     prompt_id: str | None = None) -> None:
        """One acknowledged hook event: its id, the session's post-state with the tool call it
        counted, the jobs it created (`created_by`) and, for a main session's Stop (`turn`), one
        turn of the user layer and of `project`. One record, so they are durable together."""
        created_by(jobs, eid, final_text=final_text, prompt_id=prompt_id)
        if turn:
            self.state.turns.add(project)
        self.remember(eid)
        self._append(st.EventRecord(eid=eid, kind=kind, session=_light(session), calls=calls,
                                    jobs=jobs, turn=turn, project=project), jobs)

    def _append(self, rec: st.Record, jobs: list[sm.Job] | None = None) -> None:
        """Journal `rec` (its `jobs` put into the state first) and mark the state dirty."""
        for job in jobs or ():
            self.state.jobs[job.id] = job
        self.dirty = True
        try:
            self.journal.append(rec)
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

    # ---- changes the handlers make (the only writers of the state besides the above) -----
    # Each is called on the event loop and journals its change or marks the book dirty itself:
    # nothing outside this module assigns to or mutates `state`. Work done in a worker thread
    # computes what to change and returns it; the loop applies it here.

    def apply_event(self, ev: sm.HookEvent, *, now: float, reflect_every: int,
                    make_id: Callable[[], str], counting: bool) -> list[sm.Job]:
        """Apply a validated event to its session (`sessions.apply_event`); return the jobs it
        creates. The caller journals the effect with `record_event` before it next awaits."""
        return sm.apply_event(self.state.sessions, ev, now=now, reflect_every=reflect_every,
                              make_id=make_id, counting=counting)

    def count_transcript_calls(self, s: sm.Session, calls: list[tuple[str, float]]) -> list[str]:
        """Count the tool calls a session's transcript shows that no hook event reported
        (`sessions.transcript_calls`); journaled like an event. Returns the ids counted."""
        added = sm.transcript_calls(s, calls)
        if added:
            self._append(st.CallsRecord(session=st.light(s), calls=added))
        return added

    async def flush(self, session_ids: list[str], *, kind: str, now: float,
                    make_id: Callable[[], str]) -> list[sm.Job]:
        """A job for each named session with activity, its counter reset (`sessions.flush`):
        the reset travels with the jobs, so a restart does not flush them again."""
        sessions = self.state.sessions
        jobs = sm.flush(sessions, session_ids, now=now, kind=kind, make_id=make_id)
        await self.record_jobs(jobs, sessions=[sessions[j.session_id] for j in jobs])
        return jobs

    def context_delivered(self, session_id: str, parts: Iterable[str]) -> None:
        """These parts of the SessionStart context reached the session: a resume sends only
        what it never got. Added to what it has (a concurrent start's parts are kept)."""
        s = self.state.sessions.get(session_id)
        if s is None:  # pruned meanwhile: nothing to remember it by
            return
        s.context_sent = sorted(set(s.context_sent) | set(parts))
        self._mark_dirty(s)

    def mark_project_seen(self, root: str, at: float) -> None:
        """The promoter summary for this project went out at `at`: the next one tells only
        what happened since."""
        self.state.project_marks[root] = at
        self._mark_dirty()

    def project_seen_at(self, root: str) -> float:
        """When the promoter summary for this project last went out (0: never)."""
        return self.state.project_marks.get(root, 0.0)

    def set_paused(self, paused: bool) -> bool:
        """Pause or resume counting; returns the state now in force."""
        self.state.paused = paused
        self._mark_dirty()
        return self.state.paused

    def count_reflection(self, every: int) -> bool:
        """One more reflection job finished. True when it completes a count of `every` (the
        curator is due, and the count starts again); never for `every` <= 0."""
        self.state.reflections_since_curate += 1
        self._mark_dirty()
        if every <= 0 or self.state.reflections_since_curate < every:
            return False
        self.state.reflections_since_curate = 0
        return True

    def tables_changed(self) -> None:
        """A table the parts copy in at each persist (`tables`: the markers, the watcher's)
        changed outside a scan: the next persist journals it."""
        self._mark_dirty()
