"""`status`: the daemon's counters as a typed reply.

In-memory tables are read on the event loop (they change there); what needs files (the spool's
length, per-project marker state, which reflector backend is usable) is read in a worker thread.
"""

import heapq
import os
from collections.abc import Callable
from dataclasses import dataclass

import anyio

from ...protocol import PROTOCOL, VERSION
from ...protocol import messages as m
from ...protocol import replies as r
from ...protocol.config import autostarted
from .. import spool
from ..book import Book
from ..capture.packet import capture_summary
from ..deliveries import Deliveries
from ..intents import IntentQueue
from ..learnings import report as lreport
from ..learnings.markers import MarkerIndexer
from ..learnings.state import load as load_learning_state
from ..listener import Connections
from ..live import Live
from ..persist import quarantine
from ..reflect import backends
from ..reflect.backends import routing
from ..reflect.batches import BatchRunner
from ..reflect.pipeline import today
from ..reflect.pool import ReflectorPool
from ..spool import SpoolReplayer
from ..watcher import TranscriptIndex, TranscriptWatcher
from .library import Library
from .review import Review
from .sync import SyncRounds

DAY_S = 86_400


RECENT_FAILURES = 5  # failed jobs `status` lists with their reasons


@dataclass
class StatusSources:
    """The parts status reads, besides the book and the live config (each read on the loop)."""

    intents: IntentQueue
    markers: MarkerIndexer
    transcripts: TranscriptIndex
    watcher: TranscriptWatcher
    pool: ReflectorPool  # why it starts no job
    review: Review  # the last landing
    library: Library  # skills per lifecycle stage
    batches: BatchRunner  # Message Batches in flight, tokens
    sync: SyncRounds  # the user layer's sync rounds
    deliveries: Deliveries  # which installs deliver each session's events
    connections: Connections  # open connections against the cap
    spool: SpoolReplayer  # events hooks could keep neither way, since start
    socket_path: str
    started_at: float


class StatusReport:
    def __init__(self, book: Book, live: Live, sources: StatusSources, *,
                 clock: Callable[[], float]):
        self.book = book
        self.live = live
        self.src = sources
        self.clock = clock

    async def cmd_status(self, req: m.Status) -> m.Reply:
        return m.Ok(data=await self.status(req))

    async def status(self, req: m.Status | None = None) -> r.Status:
        files = await anyio.to_thread.run_sync(self._from_files)
        return self.assemble(*files, page=req or m.Status())

    def sessions_page(self, page: m.Status) -> tuple[list[r.SessionInfo], int]:
        """One page of the live sessions, newest first, and how many there are."""
        live = [s for s in self.book.state.sessions.values() if s.ended_at is None]
        limit = max(0, min(page.sessions_limit, m.STATUS_MAX_SESSIONS))
        start = max(0, page.sessions_offset)
        newest = heapq.nlargest(start + limit, live, key=lambda s: s.last_event_at)[start:]
        return [r.SessionInfo(session_id=s.session_id, activity=s.activity,
                              watermark=s.watermark, transcript_path=s.transcript_path,
                              last_event_at=s.last_event_at,
                              calls=r.CallCounts(hook=s.calls_hook, transcript=s.calls_transcript),
                              subagent_calls=s.subagent_calls,
                              seen=dict(self.book.state.capture.seen.get(s.session_id, {})))
                for s in newest], len(live)

    def _from_files(self) -> tuple[int, r.LearningsInfo, dict, list[str]]:
        learnings = lreport.status_json(
            self.src.markers, lambda slug: set(load_learning_state(slug).processed_ids))
        return (spool.pending(), r.LearningsInfo(**learnings),
                backends.available(self.live.cfg.reflector), quarantine.files())

    def assemble(self, spool_pending: int, learnings: r.LearningsInfo, avail: dict,
                 quarantined: list[str], *, page: m.Status) -> r.Status:
        st = self.book.state
        sessions, total = self.sessions_page(page)
        rcfg = self.live.cfg.reflector
        ev = st.events
        return r.Status(
            version=VERSION, protocol=PROTOCOL, pid=os.getpid(),
            uptime_s=round(self.clock() - self.src.started_at, 3),
            socket=self.src.socket_path, paused=st.paused,
            sessions=sessions, sessions_total=total, sessions_offset=max(0, page.sessions_offset),
            events=r.EventCounts(received=ev.received, rejected=ev.rejected,
                                 by_kind=dict(ev.by_kind), unknown_kinds=ev.unknown_kinds,
                                 malformed_frames=ev.malformed_frames,
                                 peer_rejected=ev.peer_rejected,
                                 duplicates=ev.duplicates),
            jobs=self.job_counts(),
            connections=self.src.connections.stats(),
            spool=r.SpoolInfo(replayed=ev.spool_replayed, pending=spool_pending,
                              lost=self.src.spool.lost),
            persistence=r.PersistenceInfo(last_snapshot_at=self.book.last_snapshot_at,
                                          quarantined=quarantined,
                                          failing=self.book.health.failing()),
            watcher={**self.src.transcripts.stats(), "watching": self.src.watcher.watching,
                     "refused": len(self.src.watcher.refused)},
            capture=capture_summary(self.book.state.capture),
            intents=self.src.intents.counts(),
            reflector=r.ReflectorInfo(
                backend=avail["backend"], configured=rcfg.backend,
                model=routing.model_of(rcfg, avail["backend"]), reason=avail["reason"] or None,
                destination=avail["destination"],
                output=avail["openai"]["output"] if avail["backend"] == "openai" else None,
                routes=avail["routes"],
                tokens_today=st.tokens.get(today(self.clock()), 0),
                tokens_total=st.tokens.get("total", 0),
                daily_token_budget=rcfg.daily_token_budget or None),
            promoter=self.promoter_info(),
            library=self.src.library.status(),
            learnings=learnings,
            batches=self.src.batches.status(),
            sync=self.src.sync.info(),
            settings=r.SettingsInfo(started_by="autostart" if autostarted() else "explicit",
                                    sources=dict(self.live.sources)),
            delivery=self.src.deliveries.info(self.clock()),
        )

    def job_counts(self) -> r.JobCounts:
        st = self.book.state
        jobs = r.JobCounts(done=st.jobs_done, failed=st.jobs_failed, by_kind={},
                           waiting=self.src.pool.waiting_reason or None)
        last_err_at = -1.0
        day_ago = self.clock() - DAY_S
        for j in st.jobs.values():
            if j.status == "pending":
                jobs.pending += 1
            elif j.status == "running":
                jobs.running += 1
            if j.status == "failed" and (j.finished_at or 0) >= day_ago:
                jobs.failed_24h += 1
            jobs.by_kind[j.kind] = jobs.by_kind.get(j.kind, 0) + 1
            if j.last_error and (j.finished_at or j.created_at) > last_err_at:
                last_err_at = j.finished_at or j.created_at
                jobs.last_error = r.LastError(job=j.id, error=j.last_error, status=j.status)
        failed = sorted((j for j in st.jobs.values() if j.status == "failed"),
                        key=lambda j: -(j.finished_at or j.created_at))[:RECENT_FAILURES]
        jobs.recent_failures = [r.FailedJob(job=j.id, kind=j.kind, session_id=j.session_id,
                                            error=j.last_error or "", finished_at=j.finished_at)
                                for j in failed]
        return jobs

    def promoter_info(self) -> r.PromoterInfo:
        """Outcomes as the durable queue records them (they survive restarts)."""
        findings: dict[str, int] = {}
        counts = {"landed": 0, "rejected": 0, "held": 0}
        for i in self.src.intents.list():
            if i.status in counts:
                counts[i.status] += 1
            for f in i.findings:
                findings[f.family] = findings.get(f.family, 0) + 1
        return r.PromoterInfo(mode=self.live.cfg.promoter.mode, **counts,
                              last_landing_at=self.src.review.last_landing_at,
                              findings=findings)
