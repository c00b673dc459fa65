"""The daemon's state and its request handlers: one `cmd_<verb>` per request type.

Everything here runs on the event loop and must not block: fsyncs and file reads go to threads.
"""

import os
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import anyio
import msgspec
import structlog

from claude_autoharness.daemon import sessions as sm
from claude_autoharness.daemon import store
from claude_autoharness.daemon.capture.packet import CaptureStats, build_packet
from claude_autoharness.daemon.capture.redact import redactor_for
from claude_autoharness.daemon.capture.source import TranscriptRefused, resolve, transcript_roots
from claude_autoharness.daemon.intents import IntentQueue
from claude_autoharness.daemon.learnings import context as lctx
from claude_autoharness.daemon.learnings import report as lreport
from claude_autoharness.daemon.learnings import service as lservice
from claude_autoharness.daemon.learnings.markers import MarkerIndexer, slug_for
from claude_autoharness.daemon.learnings.state import load as load_learning_state
from claude_autoharness.daemon.listener import Connections
from claude_autoharness.daemon.persistence import PersistenceHealth
from claude_autoharness.daemon.projects import ProjectSwitches
from claude_autoharness.daemon.promote import lifecycle, skillfile
from claude_autoharness.daemon.promote.land import Promoter
from claude_autoharness.daemon.proposals import ACTIONS, LAYERS, Finding, curator_session
from claude_autoharness.daemon.reflect import backends
from claude_autoharness.daemon.reflect.curate import CuratedSkill
from claude_autoharness.daemon.reflect.pool import ReflectorPool, today
from claude_autoharness.daemon.watcher import TranscriptIndex, TranscriptWatcher
from claude_autoharness.protocol import PROTOCOL, VERSION, paths
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol.config import Config, ConfigError
from claude_autoharness.protocol.config import load as load_config

log = structlog.get_logger("autoharness")


def _clip(text: str, n: int = 200) -> str:
    return text if len(text) <= n else text[:n] + "…"

_event_decoder = msgspec.json.Decoder(sm.HookEvent)
_tool_input_decoder = msgspec.json.Decoder(dict[str, object] | None)
PROMOTER_SUMMARY_CHARS = 1_000
SKILL_NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
PRELOAD_AFTER_S = 20.0
WINDOW_KEEP_S = 7 * 86_400
WINDOW_PRUNE_EVERY_S = 3_600.0
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
        self.stop_event = anyio.Event()
        self.stop_requested = False
        self.persist_lock = anyio.Lock()
        self.spool_lock = anyio.Lock()
        self.in_review: set[str] = set()
        self.windows_pruned_at = 0.0  # held intents an operator is approving/rejecting
        self.socket_path = paths.socket_path()
        self.connections = Connections(cfg.max_connections)  # the app lowers the cap to fit
        self.persistence = PersistenceHealth(clock)
        self.jobs_changed = anyio.Event()
        self.child_dir = paths.reflector_dir()
        self.projects = ProjectSwitches()
        self.redactor = make_redactor(cfg)
        self.intents = IntentQueue()
        self.promoter = self._make_promoter(cfg, self.redactor)
        self.promoter_event = anyio.Event()
        self.lifecycle_due: set[str | None] = {None}  # project roots (None: user layer only)
        self.library_counts: dict[str | None, dict[str, int]] = {}
        self.pool = ReflectorPool(self, clock=clock)
        self.transcripts = TranscriptIndex(paths.claude_projects_dir(), clock=clock)
        self.markers = MarkerIndexer()
        self.watcher = TranscriptWatcher(paths.claude_projects_dir(),
                                         [self.transcripts, self.markers], clock=clock,
                                         roots=transcript_roots(cfg.capture.transcript_roots))
        self.capture_stats = CaptureStats()
        self.use_queue: list[tuple[str, str, str | None]] = []
        self.last_landing_at: float | None = None

    def _make_promoter(self, cfg: Config, redactor) -> Promoter:
        return Promoter(cfg.promoter, redactor=redactor, library=cfg.library,
                        turns=lambda layer, root: self.state.turns.of(layer, root))

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
            elif rec.op == "turn":
                self.state.turns.add(rec.project)
        for job in self.state.jobs.values():
            if job.status != "running":
                continue
            if job.attempts >= self.cfg.reflector.max_attempts:  # it keeps taking us down
                job.status, job.finished_at = "failed", self.clock()
                job.last_error = f"interrupted {job.attempts} times"
                self.state.jobs_failed += 1
            else:  # interrupted by a crash or stop: run it again
                job.status = "pending"
        report = self.intents.load()
        if report.quarantined:
            self.quarantined.append(report.quarantined)
        self.watcher.from_state(self.state.watcher.get("tails", {}))
        self.transcripts.from_state(self.state.watcher.get("index", {}))
        self.markers = MarkerIndexer.from_state(self.state.markers)
        self.capture_stats.from_state(self.state.capture)
        self.watcher.indexers = [self.transcripts, self.markers]
        for landing in self.promoter.recover():
            if landing.intent_id and self.intents.get(landing.intent_id) is not None:
                status = "landed" if landing.result == "completed" else "rejected"
                findings = [] if status == "landed" else [
                    Finding(family="landing", code="interrupted", message=landing.result)]
                self.intents.update(landing.intent_id, status, findings)
        for path in self.quarantined:
            log.warning("quarantined", file=path)
        self.journal.open()
        self.dirty = True
        self.lifecycle_due.update(self.state.turns.projects)  # counts for status from the start

    def snapshot_bytes(self) -> tuple[bytes, int]:
        # The watcher's tables change in worker threads; copy them only between scans (if a
        # scan is running, the previous copy stands: offsets a moment old are re-read safely).
        if self.watcher.lock.acquire(blocking=False):
            try:
                self.state.watcher = {"tails": self.watcher.to_state(),
                                      "index": self.transcripts.to_state()}
            finally:
                self.watcher.lock.release()
        self.state.markers = self.markers.to_state()
        self.state.capture = self.capture_stats.to_state()
        self.state.journal_seq = self.journal.seq
        self.state.saved_at = self.clock()
        self._prune_jobs()
        return store.encode_state(self.state), self.journal.seq

    async def persist(self) -> None:
        """Write the snapshot if dirty; then the journal records it covers can go.

        One at a time: two writers finishing out of order could put an older snapshot last.
        """
        async with self.persist_lock:
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
                    self.persistence.failed(e)
                raise
            self.persistence.ok()

    def persist_now(self) -> None:
        """Blocking persist for shutdown and startup, when nothing else runs."""
        data, seq = self.snapshot_bytes()
        store.write_private(paths.snapshot_file(), data)
        self.last_snapshot_at = self.clock()
        self.dirty = False
        self.journal.truncate_if(seq)

    def _prune_jobs(self) -> None:
        finished = [j for j in self.state.jobs.values() if j.status in ("done", "failed")]
        if len(finished) > KEEP_DONE_JOBS:
            finished.sort(key=lambda j: j.finished_at or j.created_at)
            for j in finished[: len(finished) - KEEP_DONE_JOBS]:
                del self.state.jobs[j.id]
        busy = {j.session_id for j in self.state.jobs.values() if j.status in ("pending", "running")}
        sm.forget_ended(self.state.sessions, now=self.clock(), keep_s=KEEP_ENDED_SESSIONS_S, busy=busy)

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
            self.persistence.failed(e)
            raise
        self.jobs_changed.set()

    # ---- spool ----------------------------------------------------------------------------

    async def replay_spool(self) -> int:
        """Process events hooks spooled (daemon down, or too busy to accept), then drop them.

        The spool is renamed first so hooks appending meanwhile start a new file; the renamed
        file is deleted only after a snapshot that includes its effects (and names the file, so
        a crash before the delete does not replay it twice) is durable.
        """
        async with self.spool_lock:
            n = 0
            spool = paths.spool_file()
            replaying = spool + ".replaying"
            while True:
                if not os.path.exists(replaying):
                    try:
                        os.replace(spool, replaying)
                    except FileNotFoundError:
                        break
                n += await self._replay_file(replaying)
            if n:
                log.info("spool replayed", events=n)
            return n

    async def _replay_file(self, replaying: str) -> int:
        st = os.stat(replaying)
        if self.state.spool_done == [st.st_ino, st.st_size]:
            os.unlink(replaying)  # a snapshot already holds its effects
            return 0
        data = await anyio.to_thread.run_sync(_read_file, replaying)
        n = 0
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            n += 1
            try:
                req = m.request_decoder.decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as e:
                self.state.events.received += 1
                self._rejected(f"unreadable spool record: {_clip(str(e))}", from_spool=True)
                continue
            if isinstance(req, m.Hook):
                await self.cmd_hook(req, from_spool=True)
        self.state.events.spool_replayed += n
        self.state.spool_done = [st.st_ino, st.st_size]
        self.dirty = True
        await self.persist()
        os.unlink(replaying)
        return n

    # ---- request handlers -----------------------------------------------------------------

    async def dispatch(self, req: m.Request) -> m.Reply:
        handler = getattr(self, f"cmd_{type(req).__name__.lower()}", None)
        if handler is None:
            return m.Error(code="unsupported", message=f"request {type(req).__name__} not supported")
        return await handler(req)

    def _rejected(self, reason: str, *, from_spool: bool = False) -> m.HookReply:
        """Count and log an event we will not act on, with why (no payload: it may hold secrets)."""
        self.state.events.rejected += 1
        self.dirty = True
        log.warning("event rejected", reason=reason, source="spool" if from_spool else "hook")
        return m.HookReply()

    async def cmd_hook(self, req: m.Hook, *, from_spool: bool = False) -> m.Reply:
        ev_counts = self.state.events
        ev_counts.received += 1
        try:
            ev = _event_decoder.decode(req.payload)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as e:
            return self._rejected(f"not a hook event: {_clip(str(e))}", from_spool=from_spool)
        if not sm.valid_session_id(ev.session_id):
            # a session id we will not key state on (it names files and state keys)
            return self._rejected(f"invalid session id {_clip(repr(ev.session_id), 60)} "
                                  f"({ev.hook_event_name})", from_spool=from_spool)
        name = ev.hook_event_name
        if name in sm.KNOWN_EVENTS:
            ev_counts.by_kind[name] = ev_counts.by_kind.get(name, 0) + 1
        else:
            ev_counts.unknown_kinds += 1
            self.dirty = True
            return m.HookReply()
        now = req.ts if (from_spool and req.ts) else self.clock()
        counting = self.counting(ev)
        jobs = sm.apply_event(self.state.sessions, ev, now=now, reflect_every=self.cfg.reflect_every,
                              make_id=new_id, counting=counting)
        self.dirty = True
        # the counter reset travels with the job: a restart must not count the same work again
        await self.record_jobs(jobs, session=self.state.sessions.get(ev.session_id))
        for job in jobs:
            log.info("job created", job=job.id, kind=job.kind, session=job.session_id)
        if req.replayed:  # a replayed session uses no skill, takes no turn, reads no context
            return m.HookReply()
        if name == "Stop" and counting:
            await self.count_turn(ev)
        if name == "PreToolUse" and counting and ev.tool_name in ("Skill", "Read"):
            self.count_skill_use(ev)
        if name == "SessionStart" and counting and not from_spool:
            text = await anyio.to_thread.run_sync(self.session_start_context, ev)
            if text:
                return m.HookReply(output=_session_start_output(text))
        return m.HookReply()

    async def count_turn(self, ev: sm.HookEvent) -> None:
        """A main session's Stop is one turn of the user layer and of its project: journaled
        before the hook is answered, then the library's lifecycle is re-judged."""
        s = self.state.sessions.get(ev.session_id)
        root = self.projects.root(s.cwd) if s is not None and s.cwd else None
        self.state.turns.add(root)
        self.dirty = True
        await anyio.to_thread.run_sync(lambda: self.journal.append("turn", project=root))
        self.lifecycle_due.add(root)
        self.promoter_event.set()

    def counting(self, ev: sm.HookEvent) -> bool:
        """Whether this event may count: not paused, not our own reflector child's."""
        if self.state.paused:
            return False
        if ev.cwd and _is_within(ev.cwd, self.child_dir):
            return False
        s = self.state.sessions.get(ev.session_id)
        cwd = (s.cwd if s is not None and s.ended_at is None else None) or ev.cwd
        return self.projects.enabled(cwd)

    # ---- SessionStart context --------------------------------------------------------------

    def session_start_context(self, ev: sm.HookEvent) -> str:
        """Marker report, promoter summary and the marker rule under one budget (worker thread).

        The rule and report go out on startup/clear/compact (compaction drops earlier context)
        and on resume only if this session never got them; the promoter summary once a session.
        """
        s = self.state.sessions.get(ev.session_id)
        if s is None:
            return ""
        source = ev.source or "startup"
        sent = set(s.context_sent)
        fresh = source != "resume"
        parts: list[tuple[str, str]] = []
        root = self.projects.root(s.cwd) if s.cwd else None
        slug: str | None
        if ev.transcript_path:
            slug = slug_for(ev.transcript_path)
        else:
            slug = lservice.slug_of(root) if root else None
        if slug and (fresh or "report" not in sent):
            processed = set(load_learning_state(slug).processed_ids)
            report = lreport.session_start_report(self.markers.unprocessed(slug, processed))
            if report:
                parts.append(("report", report))
        now = self.clock()
        if root and "promoter" not in sent:
            summary = self.promoter_summary(root)
            if summary:
                parts.append(("promoter", summary))
        if self.cfg.learnings.teach and (fresh or "rule" not in sent):
            parts.append(("rule", lctx.rule_text()))
        text = lctx.session_start_context(parts)
        # only what fitted the budget counts as delivered
        delivered = {name for name, part in parts if part.splitlines()[0] in text}
        if "promoter" in delivered and root:
            self.state.project_marks[root] = now
        s.context_sent = sorted(sent | delivered)
        self.dirty = True
        return text

    def promoter_summary(self, root: str) -> str:
        """What landed or was rejected for this project since its previous session start."""
        since = self.state.project_marks.get(root, 0.0)
        done = [i for i in self.intents.list()
                if i.project_root == root and i.status in ("landed", "rejected", "held")
                and i.updated_at > since and i.proposal is not None]
        retired = self.promoter.archived_since(root, since)
        if not done and not retired:
            return ""
        lines = ["🛠 autoharness skills since your last session:"]
        for meta in retired[-4:]:  # archive names were checked when they landed
            lines.append(f"  archived {meta['name']} [{meta['layer']}] ({meta['reason']}: "
                         f"{meta.get('uses', 0)} uses in {meta.get('turns', 0)} turns); "
                         f"undo: autoharnessctl skills restore {meta['name']}")
        for i in done[-8:]:
            p = i.proposal
            if p is None:
                continue
            why = f" ({', '.join(f.code for f in i.findings[:2])})" if i.status == "rejected" else ""
            # a model chose these words: only well-formed names reach the main session's context
            name = p.skill if SKILL_NAME_RE.match(p.skill or "") else "(invalid name)"
            action = p.action if p.action in ACTIONS else "(invalid action)"
            layer = p.layer if p.layer in LAYERS else "?"
            lines.append(f"  {i.status} {action} {name} [{layer}]{why}")
        if len(done) > 8:
            lines.append(f"  … and {len(done) - 8} more: autoharnessctl queue list")
        if len(retired) > 4:
            lines.append(f"  … and {len(retired) - 4} more archived: autoharnessctl skills list")
        text = "\n".join(lines)
        while len(text) > PROMOTER_SUMMARY_CHARS and len(lines) > 2:
            lines.pop(-1)
            text = "\n".join(lines)
        return text

    # ---- skills: usage and the index the reflector sees ----------------------------------

    def count_skill_use(self, ev: sm.HookEvent) -> None:
        """A main session's Skill call or read of a SKILL.md counts as one use of that skill."""
        try:
            args = _tool_input_decoder.decode(ev.tool_input) or {}
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        s = self.state.sessions.get(ev.session_id)
        root = self.projects.root(s.cwd) if s and s.cwd else None
        if ev.tool_name == "Skill":
            name = args.get("skill") or args.get("command") or args.get("name")
            if not isinstance(name, str) or not name:
                return
            name = name.split(":")[-1]  # plugin skills are "plugin:name"
            target = ("name", name, root)
        else:
            path = args.get("file_path")
            if not isinstance(path, str) or os.path.basename(path) != "SKILL.md":
                return
            target = ("path", path, root)
        self.use_queue.append(target)
        self.promoter_event.set()

    def _record_uses(self) -> None:
        while self.use_queue:
            kind, value, root = self.use_queue.pop(0)
            try:
                if kind == "path":
                    self.promoter.record_use(value)
                else:
                    for d in self.promoter.locate(value, root)[:1]:
                        self.promoter.record_use(d)
            except Exception:
                log.exception("skill use not recorded")

    # ---- the library's lifecycle and the curator -----------------------------------------

    def _run_lifecycle(self) -> None:
        """Judge the layers whose turns moved (blocking; the promoter loop's thread): archive
        what the counts call for, and refresh the per-stage counts `status` shows."""
        while self.lifecycle_due:
            self._record_uses()  # a use queued before the Stop counts in this pass
            root = self.lifecycle_due.pop()
            try:
                for d in self.promoter.lifecycle_pass(root):
                    log.info("archived", skill=d.name, layer=d.layer, reason=d.reason,
                             uses=d.uses, turns=d.turns)
                infos = self.promoter.list_skills(root)
            except Exception:
                log.exception("library lifecycle pass failed")
                continue
            self.library_counts[None] = stage_counts(i for i in infos if i.layer == "user")
            if root:
                self.library_counts[root] = stage_counts(i for i in infos
                                                         if i.layer == "project")

    def library_status(self) -> dict:
        """Skills per stage (and archives per reason) over the layers judged so far."""
        total: dict = {"probation": 0, "graduated": 0, "hand-written": 0, "archived": 0,
                       "archived_by_reason": {}}
        for counts in list(self.library_counts.values()):
            for k, v in counts.items():
                if k.startswith("archived:"):
                    by = total["archived_by_reason"]
                    by[k[9:]] = by.get(k[9:], 0) + v
                else:
                    total[k] = total.get(k, 0) + v
        lib = self.cfg.library
        total["turns"] = {"user": self.state.turns.user,
                          "projects": len(self.state.turns.projects)}
        total["config"] = {"maturity_turns": lib.maturity_turns,
                           "capacity_project": lib.capacity_project,
                           "capacity_user": lib.capacity_user, "curate_every": lib.curate_every}
        return total

    def curator_skills(self, layer: str, root: str | None) -> list[CuratedSkill]:
        """The live autoharness-owned skills of one layer, whole (blocking)."""
        out = []
        for info in self.promoter.list_skills(root):
            if info.status != "live" or info.owner != "autoharness" or info.layer != layer:
                continue
            try:
                with open(os.path.join(info.path, "SKILL.md"), encoding="utf-8") as f:
                    text = f.read(256 * 1024)
            except (OSError, ValueError):
                continue
            out.append(CuratedSkill(name=info.name, text=text, uses=info.uses,
                                    turns=info.turns))
        return out

    async def count_reflection(self, job: sm.Job) -> None:
        """Every `library.curate_every` finished reflection jobs, the curator runs for the
        user layer and for the project of the job that completed the count."""
        every = self.cfg.library.curate_every
        self.state.reflections_since_curate += 1
        self.dirty = True
        if every <= 0 or self.state.reflections_since_curate < every:
            return
        self.state.reflections_since_curate = 0
        root = self.project_root_of(job)
        await self.queue_curation(["user", "project"] if root else ["user"], root)

    async def queue_curation(self, layers: list[str], root: str | None) -> list[sm.Job]:
        """A curator job per layer, unless one for that layer (and project) still waits."""
        jobs = []
        for layer in layers:
            cwd = root if layer == "project" else None
            if any(j.kind == "curate" and j.layer == layer and j.cwd == cwd
                   and j.status in ("pending", "running") for j in self.state.jobs.values()):
                continue
            jobs.append(sm.Job(id=new_id(), session_id=curator_session(layer), kind="curate",
                               created_at=self.clock(), cwd=cwd, layer=layer))
        await self.record_jobs(jobs)
        for job in jobs:
            log.info("job created", job=job.id, kind="curate", layer=job.layer)
        return jobs

    async def cmd_curate(self, req: m.Curate) -> m.Reply:
        """`autoharnessctl curate`: run the curator now (both layers unless one is named)."""
        if req.layer not in (None, "project", "user"):
            return m.Error(code="bad_request", message="--layer must be project or user")
        root = self.projects.root(req.project) if req.project else None
        layers = [req.layer] if req.layer else ["user", "project"]
        if "project" in layers and not root:
            if req.layer == "project":
                return m.Error(code="bad_request",
                               message="the project layer needs a project: pass --project DIR")
            layers.remove("project")
        jobs = await self.queue_curation(layers, root)
        return m.Ok(data={"jobs": [{"id": j.id, "layer": j.layer, "project": j.cwd}
                                   for j in jobs]})

    def skill_index(self, project_root: str | None) -> list[dict]:
        """Name, layer, owner and description of every live skill (blocking; for the prompt)."""
        out = []
        for info in self.promoter.list_skills(project_root):
            if info.status != "live":
                continue
            try:
                with open(os.path.join(info.path, "SKILL.md"), encoding="utf-8") as f:
                    fields, _ = skillfile.parse(f.read(64 * 1024))
                desc = fields.get("description", "")
            except (OSError, ValueError, skillfile.SkillFormatError):
                desc = ""
            out.append({"name": info.name, "layer": info.layer, "owner": info.owner,
                        "description": desc})
        return out

    def project_root_of(self, job: sm.Job) -> str | None:
        return self.projects.root(job.cwd) if job.cwd else None

    # ---- the promoter: the single writer of the skill tree -------------------------------

    def wake_promoter(self) -> None:
        self.promoter_event.set()

    async def promoter_loop(self) -> None:
        while True:
            event = self.promoter_event = anyio.Event()
            try:
                await anyio.to_thread.run_sync(self._record_uses)
                await anyio.to_thread.run_sync(self._run_lifecycle)
                for intent in self.intents.list("queued"):
                    await self._promote_guarded(intent)
            except Exception:
                log.exception("promoter pass failed")
                await anyio.sleep(1.0)
                continue
            await event.wait()

    async def _promote_guarded(self, intent) -> None:
        """An intent that makes the promoter raise is rejected, not retried at every start."""
        try:
            await self.promote_one(intent)
        except Exception as e:
            log.exception("promotion failed", intent=intent.id)
            finding = Finding(family="landing", code="internal", message=type(e).__name__)
            await anyio.to_thread.run_sync(self.intents.update, intent.id, "rejected", [finding])

    def _window_for(self, intent) -> str | None:
        if intent.source == "marker" and intent.proposal is not None:
            return intent.proposal.evidence
        if not intent.job_id:
            return None
        try:
            with open(os.path.join(paths.windows_dir(), f"{intent.job_id}.txt"), "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return None

    async def promote_one(self, intent, *, approve: bool = False):
        def work():
            window = self._window_for(intent)
            fn = self.promoter.approve if approve else self.promoter.promote
            out = fn(intent, window, intent.project_root)
            self.intents.update(intent.id, out.status, out.findings)
            return out

        out = await anyio.to_thread.run_sync(work)
        if out.status == "landed":
            self.last_landing_at = self.clock()
            log.info("landed", intent=intent.id, skill=intent.proposal.skill if intent.proposal else None,
                     path=out.skill_path)
        else:
            log.info(out.status, intent=intent.id,
                     findings=sorted({f"{f.family}/{f.code}" for f in out.findings}))
        return out

    async def cmd_status(self, req: m.Status) -> m.Reply:
        return m.Ok(data=self.status())

    def status(self) -> dict:
        st = self.state
        jobs: dict[str, Any] = {"pending": 0, "running": 0, "done": st.jobs_done, "failed": st.jobs_failed,
                "failed_24h": 0, "by_kind": {}, "last_error": None,
                "waiting": self.pool.waiting_reason or None}
        last_err_at = -1.0
        day_ago = self.clock() - 86_400
        for j in st.jobs.values():
            if j.status in ("pending", "running"):
                jobs[j.status] += 1
            if j.status == "failed" and (j.finished_at or 0) >= day_ago:
                jobs["failed_24h"] += 1
            jobs["by_kind"][j.kind] = jobs["by_kind"].get(j.kind, 0) + 1
            if j.last_error and (j.finished_at or j.created_at) > last_err_at:
                last_err_at = j.finished_at or j.created_at
                jobs["last_error"] = {"job": j.id, "error": j.last_error, "status": j.status}
        rcfg = self.cfg.reflector
        avail = backends.available(rcfg)
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
            "connections": self.connections.stats(),
            "spool": {"replayed": st.events.spool_replayed, "pending": _spool_pending()},
            "persistence": {
                "last_snapshot_at": self.last_snapshot_at,
                "quarantined": list(self.quarantined),
                "failing": self.persistence.to_dict(),
            },
            "watcher": {**self.transcripts.stats(), "watching": self.watcher.watching,
                        "refused": len(self.watcher.refused)},
            "capture": self.capture_stats.to_dict(),
            "intents": self.intents.counts(),
            "reflector": {
                "backend": avail["backend"], "configured": rcfg.backend, "model": rcfg.model,
                "reason": avail["reason"] or None,
                "tokens_today": st.tokens.get(today(self.clock()), 0),
                "tokens_total": st.tokens.get("total", 0),
                "daily_token_budget": rcfg.daily_token_budget or None,
            },
            "promoter": self.promoter_status(),
            "library": self.library_status(),
            "learnings": lreport.status_json(
                self.markers, lambda slug: set(load_learning_state(slug).processed_ids)),
        }

    def promoter_status(self) -> dict:
        """Outcomes as the durable queue records them (they survive restarts)."""
        intents = self.intents.list()
        findings: dict[str, int] = {}
        counts = {"landed": 0, "rejected": 0, "held": 0}
        for i in intents:
            if i.status in counts:
                counts[i.status] += 1
            for f in i.findings:
                findings[f.family] = findings.get(f.family, 0) + 1
        return {"mode": self.cfg.promoter.mode, **counts, "last_landing_at": self.last_landing_at,
                "findings": findings}

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

    async def cmd_capture(self, req: m.Capture) -> m.Reply:
        """Exactly the packet a model would receive for a session (or a transcript)."""
        path, start, inode, size = req.transcript_path, req.start, None, None
        if req.session_id:
            s = self.state.sessions.get(req.session_id)
            if s is None:
                return m.Error(code="not_found", message=f"unknown session {req.session_id!r}")
            path = path or s.transcript_path
            if start is None:
                start, inode, size = s.watermark, s.wm_inode or None, s.wm_size or None
        if not path:
            return m.Error(code="bad_request", message="name --session or --transcript")
        roots = transcript_roots(self.cfg.capture.transcript_roots)
        try:
            packet = await anyio.to_thread.run_sync(
                lambda: build_packet(resolve(path, roots), start or 0, self.cfg.capture,
                                     self.redactor, expect_inode=inode, expect_size=size))
        except TranscriptRefused as e:
            log.warning("transcript refused", path=e.path, reason=e.reason)
            self.capture_stats.refuse(e.path, e.reason, self.clock())
            self.dirty = True
            return m.Error(code="refused", message=f"not reading {path}: {e.reason}")
        except OSError as e:
            return m.Error(code="io", message=f"cannot read {path}: {e.strerror}")
        return m.Ok(data=msgspec.to_builtins(packet))

    async def cmd_learn(self, req: m.Learn) -> m.Reply:
        """/learn: a high-priority job on the session's current window plus the user's text."""
        if not req.text.strip():
            return m.Error(code="bad_request", message="say what to learn")
        if req.layer not in (None, "project", "user"):
            return m.Error(code="bad_request", message="--layer must be project or user")
        sid = req.session_id or None
        if sid is not None and not sm.valid_session_id(sid):
            return m.Error(code="bad_request", message=f"invalid session id: {sid!r}")
        if sid is None:  # the most recently active session
            live = [s for s in self.state.sessions.values() if s.ended_at is None]
            sid = max(live, key=lambda s: s.last_event_at).session_id if live else None
        s = self.state.sessions.get(sid) if sid else None
        if s is None:
            s = sm.Session(session_id=sid or "learn-" + new_id())
        text, _ = self.redactor.redact(req.text.strip())  # guidance goes to the model too
        if req.layer:
            text += f"\n(Target layer for this lesson: {req.layer}.)"
        job = sm.new_job(s, "learn", self.clock(), new_id, text=text, layer=req.layer)
        await self.record_jobs([job])
        return m.Ok(data={"job": job.id, "session_id": job.session_id,
                          "transcript_path": job.transcript_path})

    async def cmd_queue(self, req: m.Queue) -> m.Reply:
        if req.op == "list":
            return m.Ok(data=[msgspec.to_builtins(i) for i in self.intents.list()])
        intent = self.intents.get(req.intent_id or "")
        if intent is None:
            return m.Error(code="not_found", message=f"no intent {req.intent_id!r}: "
                           "see `autoharnessctl queue list`")
        if req.op == "show":
            return m.Ok(data=msgspec.to_builtins(intent))
        if req.op not in ("approve", "reject"):
            return m.Error(code="bad_request", message=f"unknown queue op {req.op!r}")
        if intent.status != "held" or intent.id in self.in_review:
            return m.Error(code="bad_state", message=f"intent {intent.id} is {intent.status}, "
                           "only held intents can be approved or rejected, once")
        self.in_review.add(intent.id)  # claimed before any await: one decision per intent
        try:
            if req.op == "approve":
                out = await self.promote_one(intent, approve=True)
                return m.Ok(data=msgspec.to_builtins(out))
            finding = Finding(family="review", code="rejected_by_operator", message=req.why or "")
            await anyio.to_thread.run_sync(self.intents.update, intent.id, "rejected", [finding])
            return m.Ok(data={"status": "rejected", "findings": [msgspec.to_builtins(finding)]})
        finally:
            self.in_review.discard(intent.id)

    async def cmd_skills(self, req: m.Skills) -> m.Reply:
        pr = self.promoter
        if req.project:  # a subdirectory or linked worktree means its main worktree's skills
            req.project = self.projects.root(req.project)

        def work():
            if req.op == "list":
                return [msgspec.to_builtins(i) for i in pr.list_skills(req.project)]
            if not req.name:
                raise ValueError("name a skill")
            if req.op == "show":
                v = pr.show(req.name, project_root=req.project, layer=req.layer)
                return None if v is None else msgspec.to_builtins(v)
            if req.op == "history":
                return pr.history(req.name, project_root=req.project, layer=req.layer)
            if req.op == "revert":
                return msgspec.to_builtins(pr.revert(req.name, to=int(req.to) if req.to else None,
                                                    project_root=req.project,
                                                     layer=req.layer))
            if req.op == "restore":
                return msgspec.to_builtins(pr.restore(req.name, project_root=req.project,
                                                      layer=req.layer))
            raise ValueError(f"unknown skills op {req.op!r}")

        try:
            data = await anyio.to_thread.run_sync(work)
        except ValueError as e:
            return m.Error(code="bad_request", message=str(e))
        if data is None:
            return m.Error(code="not_found", message=f"no skill named {req.name!r}")
        return m.Ok(data=data)

    async def cmd_learnings(self, req: m.Learnings) -> m.Reply:
        """The daemon owns marker state: saves go through here so nothing is re-reported."""
        if not req.project:
            return m.Error(code="bad_request", message="name the project directory")
        project = req.project
        lookback = self.cfg.learnings.lookback_days
        roots = transcript_roots(self.cfg.capture.transcript_roots)
        if req.op == "report":
            ms = await anyio.to_thread.run_sync(
                lambda: lservice.project_markers(lservice.slug_of(project), self.markers,
                                                 lookback_days=lookback,
                                                 transcripts=req.transcripts, roots=roots))
            return m.Ok(data=lreport.report_json(ms))
        if req.op == "save":
            res = await anyio.to_thread.run_sync(
                lambda: lservice.save_project(project, self.markers, self.intents,
                                              lookback_days=lookback, transcripts=req.transcripts,
                                              dry_run=req.dry_run, redactor=self.redactor,
                                              roots=roots))
            self.dirty = True
            self.wake_promoter()
            return m.Ok(data=msgspec.to_builtins(res))
        return m.Error(code="bad_request", message=f"unknown learnings op {req.op!r}")

    # ---- background loops -----------------------------------------------------------------

    def start_background(self, tg) -> None:
        tg.start_soon(self.persist_loop)
        tg.start_soon(self.idle_loop)
        tg.start_soon(self.pool.run)
        tg.start_soon(self.promoter_loop)
        tg.start_soon(self._preload_backend)
        if self.cfg.watch:
            tg.start_soon(self._watch)

    async def _preload_backend(self) -> None:
        """Pay the `anthropic` import (seconds of CPU) before the first job, but not right at
        start: an autostarted daemon must first answer the SessionStart that woke it."""
        await anyio.sleep(PRELOAD_AFTER_S)
        try:
            if backends.choose_backend(self.cfg.reflector) == "anthropic":
                from claude_autoharness.daemon.reflect.backends import anthropic as sdk

                await anyio.to_thread.run_sync(sdk.preload)
        except Exception:
            log.exception("reflector preload failed")

    async def _watch(self) -> None:
        try:
            await self.watcher.run(self.stop_event,
                                   lookback_s=self.cfg.learnings.lookback_days * 86_400)
        except Exception:
            log.exception("transcript watcher stopped")

    def reload_config(self) -> None:
        """SIGHUP: re-read the config; a bad file keeps the running config and says why."""
        try:
            cfg = load_config()
            redactor = make_redactor(cfg)
        except ConfigError as e:
            log.error("config reload failed; keeping the running config", error=str(e))
            return
        self.cfg, self.redactor = cfg, redactor
        self.promoter = self._make_promoter(cfg, redactor)  # cheap: state is on disk
        self.lifecycle_due.add(None)  # new limits apply now
        log.info("config reloaded")

    def last_growth(self, s: sm.Session) -> float:
        """When the session's transcript last grew (0 when unknown)."""
        e = self.transcripts.get(s.transcript_path) if s.transcript_path else None
        return e.last_growth_at if e is not None else 0.0

    async def idle_loop(self) -> None:
        while True:
            await anyio.sleep(min(60.0, self.cfg.idle_flush_after_s / 4))
            try:
                await self.idle_check(self.last_growth)
            except Exception:  # every background loop has its own boundary
                log.exception("idle check failed")

    async def persist_loop(self) -> None:
        """Snapshot when dirty; pick up events hooks spooled while we were busy; compact."""
        while True:
            await anyio.sleep(self.cfg.persist_interval_s)
            try:
                if os.path.exists(paths.spool_file()):
                    await self.replay_spool()
                await self.persist()
                if self.intents.needs_compaction():
                    await anyio.to_thread.run_sync(self.intents.compact)
                if self.clock() - self.windows_pruned_at > WINDOW_PRUNE_EVERY_S:
                    self.windows_pruned_at = self.clock()
                    await anyio.to_thread.run_sync(self.prune_windows)
            except OSError as e:  # said once per episode; status and doctor show it
                self.persistence.failed(e)
            except Exception as e:
                log.error("persistence step failed", error=f"{type(e).__name__}: {e}")

    def prune_windows(self) -> int:
        """Drop stored job windows no intent still needs (none queued or held) once they are
        older than WINDOW_KEEP_S; they exist only so the promoter can re-check evidence."""
        needed = {i.job_id for i in self.intents.list() if i.status in ("queued", "held")}
        d = paths.windows_dir()
        try:
            names = os.listdir(d)
        except FileNotFoundError:
            return 0
        removed = 0
        for name in names:
            path = os.path.join(d, name)
            if name.removesuffix(".txt") in needed:
                continue
            try:
                if self.clock() - os.lstat(path).st_mtime > WINDOW_KEEP_S:
                    os.unlink(path)
                    removed += 1
            except OSError:
                continue
        return removed

    async def idle_check(self, last_growth: Callable[[sm.Session], float]) -> list[sm.Job]:
        ids = sm.idle_sessions(self.state.sessions, now=self.clock(),
                               idle_after=self.cfg.idle_flush_after_s, last_growth=last_growth)
        jobs = sm.flush(self.state.sessions, ids, now=self.clock(), kind="idle", make_id=new_id)
        await self.record_jobs(jobs)
        return jobs


def stage_counts(infos) -> dict[str, int]:
    """Skills per stage; archives also per reason (`archived:<reason>`)."""
    out: dict[str, int] = {}
    for i in infos:
        stage = i.stage or lifecycle.HAND_WRITTEN
        out[stage] = out.get(stage, 0) + 1
        if stage == lifecycle.ARCHIVED:
            key = f"archived:{i.reason or 'unknown'}"
            out[key] = out.get(key, 0) + 1
    return out


def make_redactor(cfg: Config):
    """The configured redactor; a bad extra rule is a config error naming it."""
    try:
        return redactor_for(cfg.redaction)
    except ValueError as e:
        raise ConfigError(f"invalid config: redaction: {e}") from None


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
