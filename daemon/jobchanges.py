"""The named changes of a reflection job's life, written once for every job book.

A job in the daemon's state changes only through these: each sets the job's fields (and, when
a job ends, its session's watermark) and journals the job with `record_jobs` before it
returns, so a crash at any instant finds the job as it was last journaled. The book is the
one writer of the state; the pool asks it for these changes and never sets a field itself.
`JobBook` is what the reflector pool sees of the book: an abstract base, so the daemon's
`Book` and the in-memory books (a dry-run replay, the seam tests) share these changes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # nothing but the standard library at run time: the offline facade loads it
    import anyio

    from ..protocol.replies import Packet
    from .sessions import Job, Session


class JobBook(ABC):
    """Where jobs and sessions live; `record_jobs` is durable before it returns."""

    @abstractmethod
    def jobs(self) -> Iterable[Job]: ...

    @abstractmethod
    def session(self, session_id: str) -> Session | None: ...

    @abstractmethod
    async def record_jobs(self, jobs: list[Job], session: Session | None = None) -> None:
        """Journal new or changed jobs (and the session whose watermark moved)."""

    @abstractmethod
    def watch(self) -> anyio.Event:
        """An event set at the next change to the jobs."""

    @abstractmethod
    def changed(self) -> None: ...

    async def job_started(self, job: Job) -> None:
        job.status = "running"
        await self.record_jobs([job])

    async def job_windowed(self, job: Job, packet: Packet) -> None:
        """The window is fixed: a crash after intake still knows where it ended."""
        _set_window(job, packet)
        await self.record_jobs([job])

    def call_failed(self, job: Job) -> None:
        """A model call came back with an error (or got stuck): one attempt more. Journaled
        with the job's next change (a retry or a failure), which always follows; a call in
        flight at a crash costs no attempt."""
        job.attempts += 1

    def call_answered(self, job: Job, usage: dict[str, int]) -> None:
        """A model call was answered: the job keeps its usage, journaled with its end."""
        job.usage = dict(usage)

    async def job_done(self, job: Job, intent_ids: list[str], packet: Packet | None, *,
                       now: float, duplicates: int = 0) -> None:
        """The job ended well. Its session's watermark moves to the window's end, unless a
        `/learn` looked back before it (re-reading the past must not rewind the session)."""
        job.status, job.intents, job.finished_at, job.last_error = "done", intent_ids, now, None
        if duplicates:  # proposals left out: the agent's own marker already carries them
            job.duplicates = duplicates
        if packet is not None:
            _set_window(job, packet)
        s = self.session(job.session_id)
        if s is not None and job.window_end is not None and not (
                job.kind == "learn" and job.window_start < s.watermark):
            s.watermark, s.wm_inode, s.wm_size = job.window_end, job.wm_inode, job.wm_size
        await self.record_jobs([job], session=s)

    async def job_failed(self, job: Job, reason: str, *, now: float) -> None:
        job.status, job.last_error, job.finished_at = "failed", reason, now
        await self.record_jobs([job])

    async def job_retry(self, job: Job, reason: str, *, at: float) -> None:
        """Back to pending, to run again at `at` (or later)."""
        job.status, job.last_error, job.next_attempt_at = "pending", reason, at
        await self.record_jobs([job])


def created_by(jobs: list[Job], eid: str, *, final_text: str | None, prompt_id: str | None
               ) -> None:
    """The jobs a hook event created carry its id; a Stop's threshold job the turn's final
    text and prompt id. Journaled with the event's record (`Book.record_event`)."""
    for job in jobs:
        job.event_id = eid
        if job.kind == "threshold" and final_text is not None:
            job.final_text, job.prompt_id = final_text, prompt_id


def _set_window(job: Job, packet: Packet) -> None:
    job.window_start, job.window_end = packet.watermark_from, packet.watermark_to
    job.wm_inode, job.wm_size = packet.inode, packet.size
