"""The daemon's state and its request handlers: one `cmd_<verb>` per request type.

Everything here runs on the event loop and must not block: fsyncs and file reads go to threads.
"""

import os
import time
import uuid
from collections.abc import Callable

import anyio
import msgspec
import structlog

from autoharness.protocol import PROTOCOL, VERSION, paths
from autoharness.protocol import messages as m
from autoharness.protocol.config import Config, ConfigError, load as load_config
from autoharness.daemon import sessions as sm
from autoharness.daemon import store
from autoharness.daemon.projects import ProjectSwitches

log = structlog.get_logger("autoharness")

_event_decoder = msgspec.json.Decoder(sm.HookEvent)
_name_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])
KEEP_DONE_JOBS = 200
KEEP_ENDED_SESSIONS_S = 7 * 86_400


def new_id() -> str:
    return uuid.uuid4().hex[:16]


class Daemon:
    def __init__(self, cfg: Config, *, clock: Callable[[], float] = time.time):
        self.cfg = cfg
        self.clock = clock
        self.started_at = clock()
        self.state = store.State()
        self.journal = store.Journal(paths.journal_file())
        self.quarantined: list[str] = []
        self.dirty = False
        self.last_snapshot_at: float | None = None
        self.spool_pending = 0
        self.stop_event = anyio.Event()
        self.stop_requested = False
        self.socket_path = paths.socket_path()
        self.jobs_changed = anyio.Event()
        self.child_dir = paths.reflector_dir()
        self.projects = ProjectSwitches()

    # ---- startup / persistence ------------------------------------------------------------

    def load(self) -> None:
        """Snapshot, then the journal records newer than it; quarantine whatever is corrupt."""
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
        for job in self.state.jobs.values():
            if job.status == "running":  # interrupted by a crash or stop: run it again
                job.status = "pending"
        for path in self.quarantined:
            log.warning("quarantined", file=path)
        self.journal.open()
        self.dirty = True

    def snapshot_bytes(self) -> tuple[bytes, int]:
        self.state.journal_seq = self.journal.seq
        self.state.saved_at = self.clock()
        self._prune_jobs()
        return store.encode_state(self.state), self.journal.seq

    async def persist(self) -> None:
        """Write the snapshot if dirty; then the journal records it covers can go."""
        if not self.dirty:
            return
        self.dirty = False
        data, seq = self.snapshot_bytes()
        await anyio.to_thread.run_sync(store.write_private, paths.snapshot_file(), data)
        self.last_snapshot_at = self.clock()
        if self.journal.seq == seq:
            await anyio.to_thread.run_sync(self.journal.truncate)

    def persist_now(self) -> None:
        """Blocking persist for shutdown and startup, when nothing else runs."""
        data, seq = self.snapshot_bytes()
        store.write_private(paths.snapshot_file(), data)
        self.last_snapshot_at = self.clock()
        self.dirty = False
        if self.journal.seq == seq:
            self.journal.truncate()

    def _prune_jobs(self) -> None:
        finished = [j for j in self.state.jobs.values() if j.status in ("done", "failed")]
        if len(finished) > KEEP_DONE_JOBS:
            finished.sort(key=lambda j: j.finished_at or j.created_at)
            for j in finished[: len(finished) - KEEP_DONE_JOBS]:
                del self.state.jobs[j.id]
        busy = {j.session_id for j in self.state.jobs.values() if j.status in ("pending", "running")}
        sm.forget_ended(self.state.sessions, now=self.clock(), keep_s=KEEP_ENDED_SESSIONS_S, busy=busy)

    async def record_jobs(self, jobs: list[sm.Job]) -> None:
        """Journal (fsync) new or changed jobs before anyone is told about them."""
        if not jobs:
            return

        def write() -> None:
            for job in jobs:
                self.journal.append("job", job=job)

        await anyio.to_thread.run_sync(write)
        for job in jobs:
            self.state.jobs[job.id] = job
        self.dirty = True
        self.jobs_changed.set()

    # ---- spool ----------------------------------------------------------------------------

    async def replay_spool(self) -> int:
        """Process events the hook spooled while the daemon was down, then persist and drop them.

        The spool is renamed first so hooks appending meanwhile start a new file; it is deleted
        only after a snapshot that includes its effects is durable.
        """
        spool = paths.spool_file()
        replaying = spool + ".replaying"
        if not os.path.exists(replaying):
            try:
                os.replace(spool, replaying)
            except FileNotFoundError:
                return 0
        data = await anyio.to_thread.run_sync(_read_file, replaying)
        n = 0
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            n += 1
            try:
                req = m.request_decoder.decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError):
                self.state.events.received += 1
                self.state.events.rejected += 1
                continue
            if isinstance(req, m.Hook):
                await self.cmd_hook(req, replay=True)
        self.state.events.spool_replayed += n
        self.dirty = True
        await self.persist()
        os.unlink(replaying)
        if n:
            log.info("spool replayed", events=n)
        return n

    # ---- request handlers -----------------------------------------------------------------

    async def dispatch(self, req: m.Request) -> m.Reply:
        handler = getattr(self, f"cmd_{type(req).__name__.lower()}", None)
        if handler is None:
            return m.Error(code="unsupported", message=f"request {type(req).__name__} not supported")
        return await handler(req)

    def reject(self, why: str) -> m.HookReply:
        self.state.events.rejected += 1
        self.dirty = True
        return m.HookReply()

    async def cmd_hook(self, req: m.Hook, *, replay: bool = False) -> m.Reply:
        ev_counts = self.state.events
        ev_counts.received += 1
        try:
            ev = _event_decoder.decode(req.payload)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return self.reject("malformed")
        if not sm.valid_session_id(ev.session_id):
            return self.reject("session_id")
        name = ev.hook_event_name
        if name in sm.KNOWN_EVENTS:
            ev_counts.by_kind[name] = ev_counts.by_kind.get(name, 0) + 1
        else:
            ev_counts.unknown_kinds += 1
            self.dirty = True
            return m.HookReply()
        now = req.ts if (replay and req.ts) else self.clock()
        counting = self.counting(ev)
        jobs = sm.apply_event(self.state.sessions, ev, now=now, reflect_every=self.cfg.reflect_every,
                              make_id=new_id, counting=counting)
        self.dirty = True
        await self.record_jobs(jobs)
        for job in jobs:
            log.info("job created", job=job.id, kind=job.kind, session=job.session_id)
        if name == "SessionStart" and counting and not replay:
            text = self.session_start_context(ev)
            if text:
                return m.HookReply(output=_session_start_output(text))
        return m.HookReply()

    def counting(self, ev: sm.HookEvent) -> bool:
        """Whether this event may count: not paused, not our own reflector child's."""
        if self.state.paused:
            return False
        if ev.cwd and _is_within(ev.cwd, self.child_dir):
            return False
        s = self.state.sessions.get(ev.session_id)
        cwd = (s.cwd if s is not None and s.ended_at is None else None) or ev.cwd
        return self.projects.enabled(cwd)

    def session_start_context(self, ev: sm.HookEvent) -> str:
        return ""

    async def cmd_status(self, req: m.Status) -> m.Reply:
        return m.Ok(data=self.status())

    def status(self) -> dict:
        st = self.state
        jobs = {"pending": 0, "running": 0, "done": st.jobs_done, "failed": st.jobs_failed}
        for j in st.jobs.values():
            if j.status in ("pending", "running"):
                jobs[j.status] += 1
        return {
            "version": VERSION,
            "protocol": PROTOCOL,
            "pid": os.getpid(),
            "uptime_s": round(self.clock() - self.started_at, 3),
            "socket": self.socket_path,
            "paused": st.paused,
            "sessions": [
                {
                    "session_id": s.session_id,
                    "activity": s.activity,
                    "watermark": s.watermark,
                    "transcript_path": s.transcript_path,
                    "last_event_at": s.last_event_at,
                }
                for s in st.sessions.values()
                if s.ended_at is None
            ],
            "events": {
                "received": st.events.received,
                "rejected": st.events.rejected,
                "by_kind": dict(st.events.by_kind),
                "unknown_kinds": st.events.unknown_kinds,
                "malformed_frames": st.events.malformed_frames,
                "peer_rejected": st.events.peer_rejected,
            },
            "jobs": jobs,
            "spool": {"replayed": st.events.spool_replayed, "pending": _spool_pending()},
            "persistence": {
                "last_snapshot_at": self.last_snapshot_at,
                "quarantined": list(self.quarantined),
            },
        }

    async def cmd_flush(self, req: m.Flush) -> m.Reply:
        ids = list(self.state.sessions) if req.all else list(req.session_ids)
        bad = [s for s in ids if not sm.valid_session_id(s)]
        if bad:
            return m.Error(code="bad_request", message=f"invalid session id: {bad[0]!r}")
        unknown = [s for s in ids if s not in self.state.sessions]
        jobs = sm.flush(self.state.sessions, ids, now=self.clock(), kind="flush", make_id=new_id)
        await self.record_jobs(jobs)
        await self.persist()
        return m.Ok(data={
            "jobs": [{"id": j.id, "session_id": j.session_id, "kind": j.kind} for j in jobs],
            "unknown": unknown,
        })

    async def cmd_stop(self, req: m.Stop) -> m.Reply:
        self.stop_requested = True  # the server stops us once this reply is sent
        return m.Ok(data={"stopping": True, "pid": os.getpid()})

    async def cmd_pause(self, req: m.Pause) -> m.Reply:
        self.state.paused = req.paused
        self.dirty = True
        await self.persist()
        return m.Ok(data={"paused": self.state.paused})

    # ---- background loops -----------------------------------------------------------------

    def start_background(self, tg) -> None:
        tg.start_soon(self.persist_loop)
        tg.start_soon(self.idle_loop)

    def reload_config(self) -> None:
        """SIGHUP: re-read the config; a bad file keeps the running config and says why."""
        try:
            self.cfg = load_config()
        except ConfigError as e:
            log.error("config reload failed; keeping the running config", error=str(e))
            return
        log.info("config reloaded")

    def last_growth(self, s: sm.Session) -> float:
        """When the session's transcript last grew (0 when unknown)."""
        return 0.0

    async def idle_loop(self) -> None:
        while True:
            await anyio.sleep(min(60.0, self.cfg.idle_flush_after_s / 4))
            await self.idle_check(self.last_growth)

    async def persist_loop(self) -> None:
        while True:
            await anyio.sleep(self.cfg.persist_interval_s)
            try:
                await self.persist()
            except OSError as e:
                self.dirty = True
                log.error("snapshot failed", error=str(e))

    async def idle_check(self, last_growth: Callable[[sm.Session], float]) -> list[sm.Job]:
        ids = sm.idle_sessions(self.state.sessions, now=self.clock(),
                               idle_after=self.cfg.idle_flush_after_s, last_growth=last_growth)
        jobs = sm.flush(self.state.sessions, ids, now=self.clock(), kind="idle", make_id=new_id)
        await self.record_jobs(jobs)
        return jobs


def _session_start_output(text: str) -> str:
    return msgspec.json.encode({
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}
    }).decode()


def _is_within(path: str, parent: str) -> bool:
    path, parent = os.path.normpath(path), os.path.normpath(parent)
    return path == parent or path.startswith(parent + os.sep)


def _read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _spool_pending() -> int:
    """Events waiting in the spool (written by hooks while the daemon could not be reached)."""
    try:
        with open(paths.spool_file(), "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return 0
