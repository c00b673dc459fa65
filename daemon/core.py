"""The daemon's wiring: build the parts, route each request type to its handler, run the
background loops.

Handlers live with what they serve (`handlers/`): hook events, jobs, review (the promoter and
the queue), skills, learnings, status. The state lives in `book` (its files in `persist/`),
spool replay in `spool`, the reflection pipeline in `reflect/pipeline` (run by the reflector
pool, `reflect/pool`, and the batch runner, `reflect/batches`). Every part is handed what it
uses when it is built; none is wired afterwards. What follows a fact (a Stop, a finished job,
queued intents) is a typed event its publisher hands to `events`, subscribed to in the
constructors of the parts that act on it. Everything here runs on the event loop and must
not block: fsyncs and file reads go to threads.
"""

import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import structlog

from ..protocol import messages as m
from ..protocol import paths
from ..protocol import replies as r
from ..protocol import spool as spool_files
from ..protocol.config import Config, ConfigError, settings_env
from ..protocol.config import load as load_config
from .book import Book
from .capture.source import list_transcripts, transcript_roots
from .events import Events
from .handlers.hooks import Hooks
from .handlers.jobs import Jobs
from .handlers.learnings import Learnings
from .handlers.ledger import Ledger
from .handlers.library import Library
from .handlers.prompt import PromptReminders
from .handlers.report import Report
from .handlers.review import Review
from .handlers.session_start import SessionStartContext
from .handlers.skills import Skills
from .handlers.status import StatusReport, StatusSources
from .handlers.sync import SyncRounds
from .intents import IntentQueue
from .learnings.markers import MarkerIndexer
from .listener import Connections
from .live import Live, fixed_changes
from .persist import quarantine
from .persist import state as st
from .projects import ProjectSwitches
from .proposals import Finding
from .reflect import backends
from .reflect.batches import BatchRunner
from .reflect.pipeline import Reflection
from .reflect.pool import ReflectorPool
from .reflected import ReflectedRecords
from .spool import SpoolReplayer
from .watcher import TranscriptIndex, TranscriptWatcher
from .witness import ToolUseWitness

log = structlog.get_logger("autoharness")

PRELOAD_AFTER_S = 20.0
WINDOW_PRUNE_EVERY_S = 3_600.0
WITNESS_POLL_S = 0.25


class Daemon:
    def __init__(self, cfg: Config, *, clock: Callable[[], float] = time.time,
                 settings_from: dict[str, str] | None = None, connection_cap: int | None = None):
        """`settings_from`: where each key of `cfg` that is set came from (status shows it);
        `connection_cap`: the open connections allowed (default `max_connections`; the app
        lowers it to fit the descriptor limit). What follows an event is in `events`."""
        self.clock = clock
        self.live = Live.build(cfg, self._turns, settings_from)
        self.book = Book(clock=clock, tables=self._tables, retention_s=self._retention_s)
        self.events = Events()
        self.stop_event = anyio.Event()
        self.stop_requested = False
        self.socket_path = paths.socket_path()
        self.connections = Connections(connection_cap or cfg.max_connections)
        self.windows_pruned_at = 0.0
        self.projects = ProjectSwitches()
        self.intents = IntentQueue()
        self.transcripts = TranscriptIndex(clock=clock)
        self.markers = MarkerIndexer()
        self.witness = ToolUseWitness(clock=clock)
        self.watcher = TranscriptWatcher(paths.claude_projects_dir(),
                                         [self.transcripts, self.markers, self.witness],
                                         clock=clock,
                                         roots=transcript_roots(cfg.capture.transcript_roots))
        self.ledger = Ledger(self.live, clock=clock)
        self.library = Library(self.book, self.live, projects=self.projects, intents=self.intents,
                               events=self.events, clock=clock)
        self.review = Review(self.live, self.intents, self.library, ledger=self.ledger,
                             events=self.events, clock=clock)
        self.skills = Skills(self.live, self.projects)
        self.hooks = Hooks(self.book, self.live, projects=self.projects, start_context=(
            SessionStartContext(self.live, markers=self.markers, intents=self.intents,
                                catch_up=self.catch_up)),
            reminders=PromptReminders(self.book, self.live, projects=self.projects,
                                      ledger=self.ledger),
            ledger=self.ledger, events=self.events, clock=clock)
        self.reflected = ReflectedRecords()
        self.jobs = Jobs(self.book, self.live, self.transcripts, clock=clock,
                         reflected=self.reflected)
        self.learnings = Learnings(self.book, self.live, self.markers, self.intents,
                                   events=self.events)
        # one reflection pipeline for the pool's jobs and the batch runner's items
        self.reflection = Reflection(self.book, self.intents, self.live, ledger=self.ledger,
                                     clock=clock)
        self.pool = ReflectorPool(self.book, self.book, self.reflection, projects=self.projects,
                                  events=self.events, curator=self.library, seen=self.reflected,
                                  clock=clock)
        self.batches = BatchRunner(self.reflection, projects=self.projects, events=self.events,
                                   seen=self.reflected, clock=clock)
        self.sync = SyncRounds(self.live, clock=clock)
        self.spool = SpoolReplayer(self.book, self.hooks)
        self.status = StatusReport(self.book, self.live, StatusSources(
            intents=self.intents, markers=self.markers, transcripts=self.transcripts,
            watcher=self.watcher, pool=self.pool, review=self.review, library=self.library,
            batches=self.batches, sync=self.sync, deliveries=self.hooks.deliveries,
            connections=self.connections, spool=self.spool, socket_path=self.socket_path,
            started_at=clock()), clock=clock)
        self.report = Report(self.book, self.live, self.intents, self.ledger,
                             status=self.status, clock=clock)
        self.handlers: dict[type, Callable[[Any], Awaitable[m.Reply]]] = {
            m.Hook: self.hooks.cmd_hook,
            m.Status: self.status.cmd_status,
            m.Flush: self.jobs.cmd_flush,
            m.Capture: self.jobs.cmd_capture,
            m.Learn: self.jobs.cmd_learn,
            m.Queue: self.review.cmd_queue,
            m.Skills: self.skills.cmd_skills,
            m.Learnings: self.learnings.cmd_learnings,
            m.Curate: self.library.cmd_curate,
            m.Report: self.report.cmd_report,
            m.Batch: self.cmd_batch,
            m.Stop: self.cmd_stop,
            m.Pause: self.cmd_pause,
            m.Sync: self.sync.cmd_sync,
        }

    def _turns(self, layer: str, project_root: str | None) -> int:
        """The promoter's turn counts: the book's (read when a lifecycle pass judges)."""
        return self.book.state.turns.of(layer, project_root)

    def _retention_s(self) -> float:
        """How long the book keeps a finished session: the live config's (read at a prune)."""
        return self.live.cfg.session_retention_days * 86_400

    # ---- startup and shutdown --------------------------------------------------------------

    def load(self) -> None:
        """The book, the intent queue and the indexes as the last run left them; then finish
        or abandon the landings a crash interrupted, and start journaling."""
        quarantine.adopt_legacy()  # what older versions set aside in place: shown in status
        self.book.load(backoff_base_s=self.live.cfg.reflector.backoff_base_s)
        state = self.book.state
        self.intents.load()
        self.reflected.load()
        self.watcher.from_state(state.watcher.tails)
        self.transcripts.from_state(state.watcher.index)
        self.markers.restore(state.markers.projects)
        for landing in self.live.promoter.recover():
            if landing.intent_id and self.intents.get(landing.intent_id) is not None:
                status = "landed" if landing.result == "completed" else "rejected"
                findings = [] if status == "landed" else [
                    Finding(family="landing", code="interrupted", message=landing.result)]
                self.intents.update(landing.intent_id, status, findings)
        self.book.open()
        self.batches.load()
        self.sync.load()
        for root in self.book.state.turns.projects:  # counts for status from the start
            self.review.mark_due(root)

    def _tables(self) -> dict[str, object]:
        # The watcher's tables change in worker threads; copy them only between scans (if a
        # scan is running, the previous copy stands: offsets a moment old are re-read safely).
        out: dict[str, object] = {"markers": st.Markers(self.markers.to_state())}
        if self.watcher.lock.acquire(blocking=False):
            try:
                out["watcher"] = st.Watcher(self.watcher.to_state(), self.transcripts.to_state())
            finally:
                self.watcher.lock.release()
        return out

    def catch_up(self, project_dir: str) -> None:
        """Read what is new in a project's transcripts now (blocking): a session started right
        after the previous one ended must not wait for the watcher to get there (it may not
        even watch yet, when this very session's first hook started the daemon)."""
        try:  # listed only beneath the roots: a `../` from a hook lists nothing outside
            found = list_transcripts(project_dir, self.watcher.roots)
        except OSError:
            return
        for path in found:
            self.watcher.scan_until_done(path)

    # ---- requests --------------------------------------------------------------------------

    async def dispatch(self, req: m.Request) -> m.Reply:
        handler = self.handlers.get(type(req))
        if handler is None:
            return m.Error(code="unsupported", message=f"request {type(req).__name__} not supported")
        return await handler(req)

    def after_reply(self) -> None:
        """Called by the server once a reply is sent: a `stop` takes effect only then."""
        if self.stop_requested:
            self.stop_event.set()

    async def cmd_stop(self, req: m.Stop) -> m.Reply:
        self.stop_requested = True  # the server stops us once this reply is sent
        return m.Ok(data=r.Stopping(stopping=True, pid=os.getpid()))

    async def cmd_batch(self, req: m.Batch) -> m.Reply:
        return m.Ok(data=await self.batches.command(req.op, req.transcripts, req.project))

    async def cmd_pause(self, req: m.Pause) -> m.Reply:
        paused = self.book.set_paused(req.paused)
        await self.book.persist(snapshot=True)  # an operator's change: the state compacted too
        return m.Ok(data=r.Paused(paused=paused))

    # ---- background loops ------------------------------------------------------------------

    def start_background(self, tg) -> None:
        tg.start_soon(self.events.run)
        tg.start_soon(self.persist_loop)
        tg.start_soon(self.sync_loop)
        tg.start_soon(self.witness_loop)
        tg.start_soon(self.idle_loop)
        tg.start_soon(self.pool.run)
        tg.start_soon(self.batches.run)
        tg.start_soon(self.review.loop)
        tg.start_soon(self.sync.loop)
        tg.start_soon(self._preload_backend)
        if self.live.cfg.watch:
            tg.start_soon(self._watch)

    async def _preload_backend(self) -> None:
        """Pay the `anthropic` import (seconds of CPU) before the first job, but not right at
        start: an autostarted daemon must first answer the SessionStart that woke it."""
        await anyio.sleep(PRELOAD_AFTER_S)
        try:
            if backends.choose_backend(self.live.cfg.reflector) == "anthropic":
                from .reflect.backends import anthropic as sdk

                await anyio.to_thread.run_sync(sdk.preload)
        except Exception:
            log.exception("reflector preload failed")

    async def _watch(self) -> None:
        try:
            await self.watcher.run(self.stop_event,
                                   lookback_s=self.live.cfg.learnings.lookback_days * 86_400)
        except Exception:
            log.exception("transcript watcher stopped")

    def reload_config(self) -> None:
        """SIGHUP: re-read the config; a bad file keeps the running config and says why."""
        try:
            sources: dict[str, str] = {}
            fresh = Live.build(load_config(env=settings_env(), sources=sources),
                               self._turns, sources)  # cheap: the promoter's state is on disk
        except ConfigError as e:
            log.error("config reload failed; keeping the running config", error=str(e))
            return
        waiting = fixed_changes(self.live.cfg, fresh.cfg)
        self.live.replace(fresh)
        self.review.mark_due(None)  # new limits apply now
        log.info("config reloaded")
        if waiting:
            log.warning("config reloaded; these settings apply at the next start "
                        "(`autoharnessctl restart`)", keys=waiting)

    async def idle_loop(self) -> None:
        while True:
            await anyio.sleep(min(60.0, self.live.cfg.idle_flush_after_s / 4))
            try:
                await self.jobs.idle_check(self.jobs.last_growth)
            except Exception:  # every background loop has its own boundary
                log.exception("idle check failed")

    async def sync_loop(self) -> None:
        """fsync the journal's appends at least every `fsync_interval_s` (one fsync for many
        events: a process crash loses nothing appended; this bounds a power loss)."""
        while True:
            await anyio.sleep(self.live.cfg.fsync_interval_s)
            try:
                await self.book.sync()
            except Exception as e:  # said once per episode; status and doctor show it
                log.error("journal fsync failed", error=f"{type(e).__name__}: {e}")

    async def witness_loop(self) -> None:
        """Count the tool calls the transcripts show that no hook event reported."""
        while True:
            await anyio.sleep(WITNESS_POLL_S)
            try:
                self.hooks.count_transcript_calls(self.witness.take())
            except Exception:
                log.exception("transcript witness failed")

    async def persist_loop(self) -> None:
        """Snapshot when dirty; pick up events hooks spooled while we were busy; compact."""
        while True:
            await anyio.sleep(self.live.cfg.persist_interval_s)
            try:
                if spool_files.pending(paths.spool_dir()) or spool_files.lost(paths.state_dir()):
                    await self.spool.replay()
                await self.book.persist()
                if self.intents.needs_compaction():
                    await anyio.to_thread.run_sync(self.intents.compact)
                if self.clock() - self.windows_pruned_at > WINDOW_PRUNE_EVERY_S:
                    self.windows_pruned_at = self.clock()
                    await anyio.to_thread.run_sync(self.review.prune_windows)
            except OSError as e:  # said once per episode; status and doctor show it
                self.book.health.failed(e)
            except Exception as e:
                log.error("persistence step failed", error=f"{type(e).__name__}: {e}")
