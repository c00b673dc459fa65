"""The reflector pool: runs pending jobs off the event loop, with a concurrency limit.

Order: `/learn` jobs first, then oldest first; one job per session at a time, so a session's
windows follow each other without overlap. A job's proposals are durably queued as intents
*before* the job is marked done and the session watermark advances (at-least-once); a job that
already has intents (a crash after intake) is finished without asking the model again.

The steps of one reflection (cut, prompt, ask, take in, charge) are the shared `Reflection`
(`reflect/pipeline`); the pool schedules jobs, bounds each step in time and keeps the jobs'
records. It sees the rest of the daemon through small protocols: the `JobBook` (jobs and
sessions, durably recorded), a `Counters` sink (its tallies), the `IntentSink` (intake, through
the `Reflection`), the `SeenRecords`, the `Projects` and the `Curator`'s skills; what follows a
finished job is its `JobDone` event. It is unit-testable with in-memory stand-ins.
"""

import copy
import os
import random
import time
from collections.abc import Callable, Iterable
from typing import Protocol

import anyio
import structlog

from ..capture.final import final_answer_written
from ..capture.packet import Packet
from ..capture.source import (
    TranscriptRefused,
    resolve,
    stat_transcript,
    transcript_roots,
)
from ..capture.window import tail_start
from ..events import Events, JobDone
from ..jobchanges import JobBook
from ..persist.health import describe
from ..sessions import Job, backoff
from . import backends
from .backends import routing
from .curate import (
    CuratedSkill,
    build_curate_request,
    wants_model,
)
from .pipeline import Reflection, evidence_of

log = structlog.get_logger("autoharness")

SETTLE_S = 1.0
SETTLE_POLL_S = 0.1
SETTLE_MAX_S = 5.0
FINAL_WAIT_S = 10.0  # how long a Stop's job waits for the turn's final answer to be written
FINAL_POLL_S = 0.1
IDLE_POLL_S = 30.0
STATE_DIR_RETRY_S = 5.0  # a job the state dir refused (a full disk) waits at least this long
CURATOR_MAX_INTENTS = 10  # a merge is one update plus an archive per absorbed skill


class StepStuck(Exception):
    """A job step did not finish within its bound."""


def order_runnable(jobs: list[Job], *, now: float, busy_sessions: set[str]) -> list[Job]:
    """Pending jobs that may start now: /learn first, then oldest; at most one per session and
    only the session's oldest pending job (its windows must follow each other)."""
    pending = sorted((j for j in jobs if j.status == "pending"), key=lambda j: (j.created_at, j.id))
    seen: set[str] = set(busy_sessions)
    out = []
    for j in pending:
        if j.session_id in seen:
            continue
        seen.add(j.session_id)
        if j.next_attempt_at <= now:
            out.append(j)
    return sorted(out, key=lambda j: (j.kind != "learn", j.created_at, j.id))


class Counters(Protocol):
    """Where the pool's tallies go (its tokens go through the `Reflection`)."""

    def job_finished(self, ok: bool) -> None: ...

    def captured(self, packet: Packet, session_id: str = "") -> None: ...

    def refused(self, path: str, reason: str) -> None:
        """A transcript that was not read (outside the roots, not a regular file...)."""
        ...


class SeenRecords(Protocol):
    """The records already handed to a reflector (by uuid), durable once `add` returns."""

    def __contains__(self, uuid: object) -> bool: ...

    def add(self, uuids: Iterable[str]) -> int: ...


class Projects(Protocol):
    def root_of(self, cwd: str | None) -> str | None:
        """The project (main worktree) a cwd belongs to."""


class Curator(Protocol):
    def curator_skills(self, layer: str, root: str | None) -> list[CuratedSkill]:
        """One layer's live autoharness skills, whole (blocking)."""


class ReflectorPool:
    def __init__(self, book: JobBook, counters: Counters, reflection: Reflection, *,
                 projects: Projects, events: Events, curator: Curator | None = None,
                 seen: SeenRecords | None = None,
                 clock: Callable[[], float] = time.time):
        """`reflection` does each job's steps (and holds the ledger the session's calls go
        to); `projects` maps a job's cwd to its project; `events` hears each `JobDone`;
        `curator` gives the skills the curator reads; `seen` knows the records already
        reflected, which later windows of any session leave out (a forked session's copies
        of its parent's)."""
        self.book = book
        self.counters = counters
        self.reflection = reflection
        self.intents = reflection.intents
        self.live = reflection.live
        self.projects = projects
        self.events = events
        self.curator = curator
        self.seen = seen
        self.clock = clock
        self.running: dict[str, str] = {}  # job id -> session id
        self.waiting_reason = ""

    # ---- scheduling ----------------------------------------------------------------------

    def blocked_reason(self, job_kind: str = "") -> str:
        """Why a job of `job_kind` (default: a window's reflection) may not start right now
        ("" when it may): its backend is missing, or today's budget (overall or its
        backend's) is spent."""
        cfg = routing.for_work(self.live.cfg.reflector, routing.work_of(job_kind, skills=2))
        avail = backends.available(cfg)
        if avail["backend"] == "none":
            return avail["reason"]
        return self.reflection.budget_spent("jobs", avail["backend"])

    def _startable(self, jobs: list[Job], ready: list[Job]) -> tuple[list[Job], str]:
        """The ready jobs whose backend may run now, and why the first pending job that may
        not waits (with none pending: what the first job will meet)."""
        pending = [j for j in jobs if j.status == "pending"]
        reasons = {kind: self.blocked_reason(kind) for kind in {j.kind for j in pending} | {""}}
        blocked = [j for j in pending if reasons[j.kind]]
        why = reasons[blocked[0].kind] if blocked else "" if pending else reasons[""]
        return [j for j in ready if not reasons.get(j.kind, "")], why

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            while True:
                changed = self.book.watch()
                timeout = IDLE_POLL_S
                now = self.clock()
                free = self.live.cfg.reflector.concurrency - len(self.running)
                jobs = list(self.book.jobs())
                ready = order_runnable(jobs, now=now, busy_sessions=set(self.running.values()))
                ready, self.waiting_reason = self._startable(jobs, ready)
                for job in ready[:max(0, free)]:
                    self.running[job.id] = job.session_id
                    tg.start_soon(self._guarded, job)
                later = [j.next_attempt_at - now for j in jobs
                         if j.status == "pending" and j.next_attempt_at > now]
                if later:
                    timeout = max(0.01, min(timeout, min(later)))
                with anyio.move_on_after(timeout):
                    await changed.wait()

    async def step(self, what: str, fn, *args, limit_s: float | None = None):
        """Run one blocking step of a job in a worker thread, bounded in time: a step still
        running after `limit_s` (default `reflector.step_timeout_s`) is abandoned (its thread
        is left to finish or hang on its own) and raises StepStuck, which fails the job."""
        limit = self.live.cfg.reflector.step_timeout_s if limit_s is None else limit_s
        with anyio.move_on_after(limit) as scope:
            return await anyio.to_thread.run_sync(fn, *args, abandon_on_cancel=True)
        if scope.cancelled_caught:
            raise StepStuck(f"stuck {what} for more than {limit:g} s; abandoned")
        raise AssertionError("unreachable")

    async def _guarded(self, job: Job) -> None:
        try:
            try:
                await self.run_job(job)
            except StepStuck as e:  # its slot is free again; a retry would likely stick too
                await self._fail(job, str(e))
            except OSError as e:  # the state dir (a full disk): not the job's fault, no attempt
                log.warning("job interrupted", job=job.id, reason=describe(e))
                await self._retry_or_fail(job, describe(e), transient=True,
                                          retry_after=STATE_DIR_RETRY_S)
            except Exception as e:  # a bug in one job must not stop the pool
                log.exception("job crashed", job=job.id)
                self.book.call_failed(job)  # counted, or a job that always trips it would never end
                await self._retry_or_fail(job, f"internal error: {type(e).__name__}",
                                          transient=True)
        except Exception:
            log.exception("job bookkeeping failed", job=job.id)
        finally:
            self.running.pop(job.id, None)
            self.book.changed()

    # ---- one job -------------------------------------------------------------------------

    async def run_job(self, job: Job) -> None:
        book = self.book
        await book.job_started(job)
        if self.intents.job_recorded(job.id):  # intake happened before a crash: don't ask twice
            done_before = [i for i in self.intents.list() if i.job_id == job.id]
            await self._finish(job, [i.id for i in done_before], None)
            return
        if job.kind == "curate":
            await self.run_curator(job)
            return
        stand_in = None
        if job.transcript_path:
            stand_in = await self.wait_final(job)
            await self.wait_settled(job.transcript_path)
        try:
            packet, fresh, before = await self.step("reading the transcript", self.cut, job,
                                                    stand_in, self._resume_at(job))
        except FileNotFoundError:
            await self._fail(job, "transcript not found")
            return
        except TranscriptRefused as e:  # nothing was read: no retry will change that
            log.warning("transcript refused", job=job.id, path=e.path, reason=e.reason)
            self.counters.refused(e.path, e.reason)
            await self._fail(job, f"transcript refused: {e.reason}")
            return
        except OSError as e:
            await self._retry_or_fail(job, f"cannot read transcript: {e.strerror}", transient=True)
            return
        if packet is not None:
            self.counters.captured(packet, job.session_id)
            await book.job_windowed(job, packet)
        evidence_window = evidence_of(packet)
        if job.text:
            evidence_window += "\n" + job.text  # /learn: the user's words are evidence too
            if fresh is not None:
                fresh += "\n" + job.text
        if not job.text and (packet is None or not packet.kept_records):
            # nothing new was written, or a reflector had all of it: no model call
            await self._finish(job, [], packet)
            return
        project_root = self.projects.root_of(job.cwd)
        prompt = await self.step("listing the skills", self.reflection.prompt, packet, job.text,
                                 project_root)
        result = await self._ask(job, prompt)
        if result is None:
            return
        source = "learn" if job.kind == "learn" else "reflector"
        intents, dups = await self.reflection.take_in(job.id, job.session_id, source, result,
                                                      evidence_window, project_root,
                                                      feedback_window=fresh,
                                                      loaded_before=before,
                                                      window_at=job.created_at)
        log.info("job reflected", job=job.id, kind=job.kind, proposals=len(result.proposals),
                 intents=len(intents), feedback=len(result.feedback), duplicates=dups,
                 tokens=result.tokens)
        await self._finish(job, [i.id for i in intents], packet, duplicates=dups)

    async def _ask(self, job: Job, prompt, work: str = "") -> backends.ReflectResult | None:
        """One model call for the job; None when it failed (the job is retried or failed).

        `attempts` counts the calls that came back with an error (an error reply, a timeout):
        it is recorded only then, so a call in flight when the daemon is killed costs none and
        the job simply runs again (see `sessions.resume_interrupted`)."""
        cfg = routing.for_work(self.live.cfg.reflector, work or routing.work_of(job.kind))
        backend = backends.choose_backend(cfg)
        try:
            # the backend has its own timeout; the step's bound is the backstop behind it
            result = await self.step("waiting for the model", self.reflection.ask, backend,
                                     prompt, cfg, limit_s=max(cfg.step_timeout_s, cfg.timeout_s + 30))
        except backends.BackendError as e:
            self.book.call_failed(job)
            await self._charge(job, backend, cfg, routing.model_of(cfg, backend), e.usage or {},
                               ok=False)
            if isinstance(e, backends.TransientError):
                await self._retry_or_fail(job, e.reason, transient=True,
                                          retry_after=e.retry_after)
            else:
                await self._fail(job, e.reason)
            return None
        except StepStuck:
            self.book.call_failed(job)
            raise
        await self._charge(job, backend, cfg, result.model or routing.model_of(cfg, backend),
                           result.usage)
        self.book.call_answered(job, result.usage)
        return result

    async def _charge(self, job: Job, backend: str, cfg, model: str, usage: dict, *,
                      ok: bool = True) -> None:
        # charged per attempt: a retry is another call, and the crash after one costs its record
        await self.reflection.charge(usage, job=job.id, attempt=job.attempts, kind=job.kind,
                                     backend=backend, model=model, ok=ok,
                                     local=routing.runs_locally(cfg, backend))

    async def run_curator(self, job: Job) -> None:
        """The curator: one layer's autoharness skills in, merges and archives out, as
        ordinary intents whose evidence must quote the skills that were sent."""
        layer = job.layer or "user"
        root = job.cwd if layer == "project" else None
        skills = [] if self.curator is None else await self.step(
            "reading the skills", self.curator.curator_skills, layer, root)
        if not wants_model(skills):  # nothing to merge or repair: no model call
            await self._finish(job, [], None)
            return
        redactor = self.live.redactor
        prompt, window, left_out = build_curate_request(
            skills, layer=layer, max_intents=CURATOR_MAX_INTENTS,
            max_bytes=self.live.cfg.capture.max_window_bytes,
            redact=lambda t: redactor.redact(t)[0])
        result = await self._ask(job, prompt, routing.work_of(job.kind, skills=len(skills) - left_out))
        if result is None:
            return
        intents, _ = await self.reflection.take_in(job.id, job.session_id, "curator", result,
                                                   window, root, max_intents=CURATOR_MAX_INTENTS,
                                                   drop_saved=False)
        log.info("curator ran", job=job.id, layer=layer, skills=len(skills) - left_out,
                 left_out=left_out, intents=len(intents), tokens=result.tokens)
        await self._finish(job, [i.id for i in intents], None)

    async def wait_final(self, job: Job) -> str | None:
        """A Stop's job waits until the transcript holds the turn's final answer (Claude Code
        may write it after the Stop hook), at most FINAL_WAIT_S (a job's retry does not wait
        again); returns the Stop event's final text when it never came (the window carries it
        instead), else None."""
        if not job.final_text or not job.transcript_path:
            return None
        roots = transcript_roots(self.live.cfg.capture.transcript_roots)
        redactor = self.live.redactor

        def written() -> bool:
            path = resolve(job.transcript_path or "", roots)
            return final_answer_written(path, job.final_text or "", job.prompt_id, redactor,
                                        roots=roots)

        # a retry looks once: the first attempt already waited
        deadline = time.monotonic() + (0.0 if job.attempts else FINAL_WAIT_S)
        while True:
            try:
                if await self.step("looking for the turn's final answer", written):
                    return None
            except OSError:  # the cut says what is wrong with the transcript
                return None
            if time.monotonic() >= deadline:
                log.info("final answer not in the transcript", job=job.id,
                         waited_s=FINAL_WAIT_S)
                return job.final_text
            await anyio.sleep(FINAL_POLL_S)

    async def wait_settled(self, path: str) -> None:
        """Claude Code writes the transcript after Stop: give the last records a moment to land
        (unmodified for SETTLE_S, waiting at most SETTLE_MAX_S) so the window does not end
        short. A file already quiet costs one stat."""
        waited = 0.0
        while waited < SETTLE_MAX_S:
            try:
                st = await self.step("checking the transcript", os.stat, path)
            except OSError:
                return
            quiet_for = time.time() - st.st_mtime  # file times are wall-clock times
            if quiet_for >= SETTLE_S:
                return
            step = min(SETTLE_POLL_S, SETTLE_S - quiet_for)
            await anyio.sleep(step)
            waited += step

    def _resume_at(self, job: Job) -> tuple[int, int | None, int | None]:
        """Where the job's window starts, and the transcript's inode and size there (None: not
        known), from the session's watermark: read on the loop, which moves it."""
        s = self.book.session(job.session_id)
        if s is None:
            return job.window_start, None, None
        return max(job.window_start, s.watermark), s.wm_inode or None, s.wm_size or None

    def cut(self, job: Job, final_text: str | None,
            resume_at: tuple[int, int | None, int | None]
            ) -> tuple[Packet | None, str | None, list[str]]:
        """The job's packet, from where the session's previous job stopped (`_resume_at`),
        without the records a reflector already had, ending with `final_text` when given
        (blocking I/O); with the text its verdicts may quote (None: the whole window) and the
        session's skill loads up to the window's end.

        `/learn` with nothing new re-reads the recent past on purpose (the user asks about
        it), but its verdicts may quote only records no reflector had: each is judged once."""
        if not job.transcript_path:
            return None, None, []  # the hooks never named a transcript: only /learn text
        capture = self.live.cfg.capture
        roots = transcript_roots(capture.transcript_roots)
        path = resolve(job.transcript_path, roots)
        start, inode, size = resume_at
        seen: SeenRecords | tuple[()] | None = self.seen
        fresh = None
        if job.kind == "learn":
            st = stat_transcript(path, roots)
            if start >= st.st_size:  # nothing new: reflect on the recent past instead
                start = tail_start(path, capture.max_window_bytes, roots=roots)
                inode = size = None
                if seen is not None:
                    fresh = self.reflection.cut(path, start, roots=roots, reflected=seen,
                                                final_text=final_text).window
                seen = ()
        packet = self.reflection.cut(path, start, expect_inode=inode, expect_size=size,
                                     roots=roots, reflected=seen, final_text=final_text)
        return packet, fresh, self.reflection.session_loads.before(path, packet.watermark_to, roots)

    async def _finish(self, job: Job, intent_ids: list[str], packet: Packet | None, *,
                      duplicates: int = 0) -> None:
        if packet is not None and packet.uuids:  # (only a window that went to a model has them)
            await self._remember(job, packet.uuids)
        s = self.book.session(job.session_id)
        if s is not None and job.kind != "curate":
            # the session's calls so far: the book forgets sessions, the report needs them
            await anyio.to_thread.run_sync(self.reflection.ledger.record_calls,
                                           copy.copy(s))  # as it is now
        self.counters.job_finished(ok=True)
        await self.book.job_done(job, intent_ids, packet, now=self.clock(), duplicates=duplicates)
        self.events.publish(JobDone(job_id=job.id, kind=job.kind, cwd=job.cwd))  # journaled

    async def _remember(self, job: Job, uuids: list[str]) -> None:
        """The window's records were handed to a reflector: later windows leave them out."""
        seen = self.seen
        if seen is None:
            return
        try:
            await anyio.to_thread.run_sync(seen.add, uuids)
        except OSError as e:  # kept in memory; at worst a fork re-sends them after a restart
            log.warning("reflected records not saved", job=job.id, error=e.strerror)

    async def _fail(self, job: Job, reason: str) -> None:
        self.counters.job_finished(ok=False)
        log.warning("job failed", job=job.id, kind=job.kind, reason=reason)
        await self.book.job_failed(job, reason, now=self.clock())

    async def _retry_or_fail(self, job: Job, reason: str, *, transient: bool,
                             retry_after: float | None = None) -> None:
        rcfg = self.live.cfg.reflector
        if not transient or job.attempts >= rcfg.max_attempts:
            await self._fail(job, f"{reason} (after {job.attempts} attempts)")
            return
        wait = backoff(job.attempts, rcfg.backoff_base_s, random.random)
        if retry_after:
            wait = max(wait, retry_after)
        log.info("job retry", job=job.id, attempt=job.attempts, wait_s=round(wait, 2), reason=reason)
        await self.book.job_retry(job, reason, at=self.clock() + wait)
