"""Requests that make or show work for the reflector: flush, /learn, capture, and the idle
flush of sessions that went quiet."""

from collections.abc import Callable, Container

import anyio
import structlog

from ...protocol import messages as m
from ...protocol import replies as r
from .. import sessions as sm
from ..book import Book
from ..capture.packet import build_packet
from ..capture.source import TranscriptRefused, resolve, transcript_roots
from ..live import Live, new_id
from ..watcher import TranscriptIndex

log = structlog.get_logger("autoharness")


class Jobs:
    def __init__(self, book: Book, live: Live, transcripts: TranscriptIndex, *,
                 clock: Callable[[], float], reflected: Container[str] | None = None):
        """`reflected`: the records already handed to a reflector, which a session's packet
        leaves out (as its next job would)."""
        self.book = book
        self.live = live
        self.transcripts = transcripts
        self.clock = clock
        self.reflected = reflected

    async def cmd_flush(self, req: m.Flush) -> m.Reply:
        sessions = self.book.state.sessions
        ids = list(sessions) if req.all else list(req.session_ids)
        bad = [s for s in ids if not sm.valid_session_id(s)]
        if bad:
            return m.Error(code="bad_request", message=f"invalid session id: {bad[0]!r}")
        unknown = [s for s in ids if s not in sessions]
        jobs = await self.book.flush(ids, kind="flush", now=self.clock(), make_id=new_id)
        await self.book.persist()
        return m.Ok(data=r.Flushed(
            jobs=[r.FlushedJob(id=j.id, session_id=j.session_id, kind=j.kind) for j in jobs],
            unknown=unknown))

    async def cmd_capture(self, req: m.Capture) -> m.Reply:
        """Exactly the packet a model would receive for a session (or a transcript)."""
        path, start, inode, size = req.transcript_path, req.start, None, None
        reflected = None
        if req.session_id:
            reflected = self.reflected
            s = self.book.state.sessions.get(req.session_id)
            if s is None:
                return m.Error(code="not_found", message=f"unknown session {req.session_id!r}")
            path = path or s.transcript_path
            if start is None:
                start, inode, size = s.watermark, s.wm_inode or None, s.wm_size or None
        if not path:
            return m.Error(code="bad_request", message="name --session or --transcript")
        cfg, redactor = self.live.cfg, self.live.redactor
        roots = transcript_roots(cfg.capture.transcript_roots)
        try:
            packet = await anyio.to_thread.run_sync(
                lambda: build_packet(resolve(path, roots), start or 0, cfg.capture, redactor,
                                     expect_inode=inode, expect_size=size, roots=roots,
                                     reflected=reflected))
        except TranscriptRefused as e:
            log.warning("transcript refused", path=e.path, reason=e.reason)
            self.book.refused(e.path, e.reason)
            return m.Error(code="refused", message=f"not reading {path}: {e.reason}")
        except OSError as e:
            return m.Error(code="io", message=f"cannot read {path}: {e.strerror}")
        return m.Ok(data=packet)

    async def cmd_learn(self, req: m.Learn) -> m.Reply:
        """/learn: a high-priority job on the session's current window plus the user's text."""
        if not req.text.strip():
            return m.Error(code="bad_request", message="say what to learn")
        if req.layer not in (None, "project", "user"):
            return m.Error(code="bad_request", message="--layer must be project or user")
        sid = req.session_id or None
        if sid is not None and not sm.valid_session_id(sid):
            return m.Error(code="bad_request", message=f"invalid session id: {sid!r}")
        sessions = self.book.state.sessions
        if sid is None:  # the most recently active session
            live = [s for s in sessions.values() if s.ended_at is None]
            sid = max(live, key=lambda s: s.last_event_at).session_id if live else None
        s = sessions.get(sid) if sid else None
        if s is None:  # a job with no transcript would send the model the lesson alone
            why = (f"no session {sid} to learn from: `autoharnessctl status` lists the sessions "
                   "counted" if req.session_id else "no session to learn from: run it in a "
                   "Claude Code session (`/learn TEXT`), or name one with --session ID "
                   "(`autoharnessctl status` lists them)")
            return m.Error(code="not_found", message=why + "; nothing was queued")
        text, _ = self.live.redactor.redact(req.text.strip())  # guidance goes to the model too
        if req.layer:
            text += f"\n(Target layer for this lesson: {req.layer}.)"
        job = sm.new_job(s, "learn", self.clock(), new_id, text=text, layer=req.layer)
        await self.book.record_jobs([job])
        return m.Ok(data=r.LearnQueued(job=job.id, session_id=job.session_id,
                                       transcript_path=job.transcript_path))

    def last_growth(self, s: sm.Session) -> float:
        """When the session's transcript last grew (0 when unknown)."""
        e = self.transcripts.get(s.transcript_path) if s.transcript_path else None
        return e.last_growth_at if e is not None else 0.0

    async def idle_check(self, last_growth: Callable[[sm.Session], float]) -> list[sm.Job]:
        sessions = self.book.state.sessions
        ids = sm.idle_sessions(sessions, now=self.clock(),
                               idle_after=self.live.cfg.idle_flush_after_s, last_growth=last_growth)
        return await self.book.flush(ids, kind="idle", now=self.clock(), make_id=new_id)
