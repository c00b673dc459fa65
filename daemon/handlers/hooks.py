"""Hook events: count them into the session state machine, create the jobs it asks for, and
answer SessionStart with the context autoharness injects. Also the second witness: tool calls
the transcript shows that no PreToolUse reported.

Acknowledged means journaled: an event's whole effect is one journal record, appended before
the reply. An event whose id was already acknowledged (a spooled copy of an event whose reply
was lost, a replay cut short by a crash) counts nothing and creates no job.

Runs on the event loop; the SessionStart context reads files, so it is built in a worker thread.
"""

import os
import re
from collections.abc import Callable

import anyio
import msgspec
import structlog

from claude_autoharness.client.words import plural
from claude_autoharness.daemon import sessions as sm
from claude_autoharness.daemon.book import Book
from claude_autoharness.daemon.capture.final import final_answer_text
from claude_autoharness.daemon.intents import IntentQueue
from claude_autoharness.daemon.learnings import context as lctx
from claude_autoharness.daemon.learnings import report as lreport
from claude_autoharness.daemon.learnings import service as lservice
from claude_autoharness.daemon.learnings.markers import MarkerIndexer, slug_for
from claude_autoharness.daemon.learnings.state import load as load_learning_state
from claude_autoharness.daemon.live import Live, new_id
from claude_autoharness.daemon.projects import ProjectSwitches
from claude_autoharness.daemon.proposals import ACTIONS, LAYERS
from claude_autoharness.daemon.skillsync import rounds as sync_rounds
from claude_autoharness.daemon.spool import clip
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol import paths

log = structlog.get_logger("autoharness")

_event_decoder = msgspec.json.Decoder(sm.HookEvent)
_tool_input_decoder = msgspec.json.Decoder(dict[str, object] | None)
PROMOTER_SUMMARY_CHARS = 1_000
# Two installs (the plugin and the settings) both deliver a session's start within moments of
# each other, each with its own event id: only the first gets the context.
CONTEXT_REPEAT_S = 10.0
SKILL_NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

# A skill use to record: ("name", skill name, project root) or ("path", SKILL.md path, root).
SkillUse = tuple[str, str, str | None]


class Hooks:
    def __init__(self, book: Book, live: Live, *, projects: ProjectSwitches, markers: MarkerIndexer,
                 intents: IntentQueue, skill_used: Callable[[SkillUse], None],
                 turn_counted: Callable[[str | None], None], catch_up: Callable[[str], None],
                 record_context: Callable[[int, list[str]], None] | None = None,
                 clock: Callable[[], float]):
        """`skill_used` queues a skill use; `turn_counted` hears of a main session's Stop
        (already counted, with its project root); `catch_up` reads a project directory's
        transcripts now (blocking); `record_context(chars, parts)` records each SessionStart
        context sent in the report's ledger (blocking)."""
        self.record_context = record_context or (lambda chars, parts: None)
        self.book = book
        self.live = live
        self.projects = projects
        self.markers = markers
        self.intents = intents
        self.skill_used = skill_used
        self.turn_counted = turn_counted
        self.catch_up = catch_up
        self.clock = clock
        self.child_dir = paths.reflector_dir()
        # (session id, source) -> (event id, when) of the last start given its context
        self.context_given: dict[tuple[str, str], tuple[str, float]] = {}

    def rejected(self, reason: str, *, from_spool: bool = False) -> m.HookReply:
        """Count and log an event we will not act on, with why (no payload: it may hold secrets)."""
        self.book.state.events.rejected += 1
        self.book.mark_dirty()
        log.warning("event rejected", reason=reason, source="spool" if from_spool else "hook")
        return m.HookReply()

    async def cmd_hook(self, req: m.Hook, *, from_spool: bool = False) -> m.HookReply:
        state = self.book.state
        ev_counts = state.events
        ev_counts.received += 1
        try:
            ev = _event_decoder.decode(req.payload)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as e:
            return self.rejected(f"not a hook event: {clip(str(e))}", from_spool=from_spool)
        if not sm.valid_session_id(ev.session_id):
            # a session id we will not key state on (it names files and state keys)
            return self.rejected(f"invalid session id {clip(repr(ev.session_id), 60)} "
                                 f"({ev.hook_event_name})", from_spool=from_spool)
        name = ev.hook_event_name
        counting = self.counting(ev)
        if self.book.seen_before(req.id):  # a copy of an event already counted
            ev_counts.duplicates += 1
            self.book.mark_dirty()
            return await self._reply(req, ev, counting, from_spool)
        if name in sm.KNOWN_EVENTS:
            ev_counts.by_kind[name] = ev_counts.by_kind.get(name, 0) + 1
        else:
            ev_counts.unknown_kinds += 1
            self.book.mark_dirty()
            return m.HookReply()
        final = None
        if name == "Stop" and counting and ev.last_assistant_message \
                and self._may_reflect(ev.session_id):
            # the turn's final text goes into the job (and the journal): redacted first, off
            # the loop; a copy of this event that came in meanwhile was counted instead
            final = await anyio.to_thread.run_sync(self.final_text, ev.last_assistant_message)
            if self.book.seen_before(req.id):
                ev_counts.duplicates += 1
                self.book.mark_dirty()
                return m.HookReply()
        now = req.ts if (from_spool and req.ts) else self.clock()
        jobs = sm.apply_event(state.sessions, ev, now=now, reflect_every=self.live.cfg.reflect_every,
                              make_id=new_id, counting=counting)
        s = state.sessions.get(ev.session_id) if counting else None
        calls = [ev.tool_use_id] if s is not None and name == "PreToolUse" and ev.tool_use_id \
            and not ev.agent_id else []
        for job in jobs:
            job.event_id = req.id
            if job.kind == "threshold" and ev.last_assistant_message:
                job.final_text = final if final is not None \
                    else self.final_text(ev.last_assistant_message)
                job.prompt_id = ev.prompt_id
        # A main session's Stop is one turn of the user layer and of its project (a replayed
        # session takes none). The counter reset travels with the job and the id with both,
        # in one record: neither a restart nor a second copy counts the same work again.
        turn = name == "Stop" and counting and not req.replayed
        root = self.projects.root(s.cwd) if turn and s is not None and s.cwd else None
        self.book.record_event(req.id, name, session=s, jobs=jobs, calls=calls, turn=turn, project=root)
        for job in jobs:
            log.info("job created", job=job.id, kind=job.kind, session=job.session_id)
        if turn:
            self.turn_counted(root)
        if name == "PreToolUse" and counting and ev.tool_name in ("Skill", "Read") \
                and not req.replayed:
            self.count_skill_use(ev)
        return await self._reply(req, ev, counting, from_spool)

    def _may_reflect(self, session_id: str) -> bool:
        """Whether a Stop of this session now would create a threshold job."""
        s = self.book.state.sessions.get(session_id)
        return s is not None and s.activity >= self.live.cfg.reflect_every

    def final_text(self, text: str) -> str:
        """A Stop's `last_assistant_message` as a job keeps it: redacted, then clipped."""
        return final_answer_text(text, self.live.redactor)

    async def _reply(self, req: m.Hook, ev: sm.HookEvent, counting: bool,
                     from_spool: bool) -> m.HookReply:
        """SessionStart context for a live session; a repeated copy gets it too (e.g. the
        SessionStart that autostarted the daemon, also spooled when the reply came late)."""
        if ev.hook_event_name == "SessionStart" and counting and not from_spool \
                and not req.replayed and self.first_start(req, ev):
            text = await anyio.to_thread.run_sync(self.session_start_context, ev,
                                                  req.via == "plugin")
            if text:
                return m.HookReply(output=_session_start_output(text))
        return m.HookReply()

    def first_start(self, req: m.Hook, ev: sm.HookEvent) -> bool:
        """Whether this SessionStart is the first delivery of its session's start: another
        event id for the same session and source within CONTEXT_REPEAT_S is a second hook
        (plugin and settings installs both wired) and gets no context; the same event id
        again is a retry whose first reply was lost, and gets it. Decided on the event loop,
        before the context is built, so two concurrent deliveries cannot both pass."""
        now = self.clock()
        key = (ev.session_id, ev.source or "startup")
        last = self.context_given.get(key)
        if last is not None and last[0] != req.id and now - last[1] < CONTEXT_REPEAT_S:
            return False
        self.context_given = {k: v for k, v in self.context_given.items()
                              if now - v[1] < CONTEXT_REPEAT_S}
        self.context_given[key] = (req.id, now)
        return True

    async def replay(self, req: m.Hook) -> None:
        """A spooled event: counted like a live one, answered to no one."""
        await self.cmd_hook(req, from_spool=True)

    def count_transcript_calls(self, found: dict[str, list[tuple[str, float]]]) -> int:
        """Count the tool calls the watcher read from main transcripts (path -> [(tool_use_id,
        time)]) that no PreToolUse counted, for the session whose transcript each is; journaled
        like an event. Returns how many counted."""
        if not found:
            return 0
        state = self.book.state
        by_path = {os.path.normpath(s.transcript_path): s for s in state.sessions.values()
                   if s.transcript_path}
        n = 0
        for path, calls in found.items():
            s = by_path.get(os.path.normpath(path))
            if s is None or not self.counting_session(s):
                continue
            added = sm.transcript_calls(s, calls)
            if added:
                n += len(added)
                self.book.record_calls(s, added)
        return n

    def counting_session(self, s: sm.Session) -> bool:
        """Whether a session's transcript calls may count (as `counting` for its events)."""
        if self.book.state.paused or (s.cwd and _is_within(s.cwd, self.child_dir)):
            return False
        return self.projects.enabled(s.cwd)

    def counting(self, ev: sm.HookEvent) -> bool:
        """Whether this event may count: not paused, not our own reflector child's."""
        state = self.book.state
        if state.paused:
            return False
        if ev.cwd and _is_within(ev.cwd, self.child_dir):
            return False
        s = state.sessions.get(ev.session_id)
        cwd = (s.cwd if s is not None and s.ended_at is None else None) or ev.cwd
        return self.projects.enabled(cwd)

    # ---- SessionStart context --------------------------------------------------------------

    def session_start_context(self, ev: sm.HookEvent, plugin: bool = False) -> str:
        """Marker report, promoter summary and the marker rule under one budget (worker thread).

        The rule and report go out on startup/clear/compact (compaction drops earlier context)
        and on resume only if this session never got them; the promoter summary once a session.
        `plugin`: the plugin's hook delivered the start, so its commands are the plugin's
        (`/autoharness:save-learnings`).
        """
        state = self.book.state
        s = state.sessions.get(ev.session_id)
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
            if ev.transcript_path:  # markers the watcher has not read yet count too
                self.catch_up(os.path.dirname(ev.transcript_path))
            processed = set(load_learning_state(slug).processed_ids)
            report = lreport.session_start_report(self.markers.unprocessed(slug, processed),
                                                  plugin=plugin)
            if report:
                parts.append(("report", report))
        now = self.clock()
        if root and "promoter" not in sent:
            summary = self.promoter_summary(root)
            if summary:
                parts.append(("promoter", summary))
        if self.live.cfg.learnings.teach and (fresh or "rule" not in sent):
            parts.append(("rule", lctx.rule_text()))
        text = lctx.session_start_context(parts)
        # only what fitted the budget counts as delivered
        delivered = {name for name, part in parts if part.splitlines()[0] in text}
        if "promoter" in delivered and root:
            state.project_marks[root] = now
        if text:  # what it costs the session, recorded before it is sent
            self.record_context(len(text), sorted(delivered))
        s.context_sent = sorted(sent | delivered)
        self.book.mark_dirty(s)
        return text

    def promoter_summary(self, root: str) -> str:
        """What landed or was rejected for this project since its previous session start."""
        since = self.book.state.project_marks.get(root, 0.0)
        done = [i for i in self.intents.list()
                if i.project_root == root and i.status in ("landed", "rejected", "held")
                and i.updated_at > since and i.proposal is not None]
        retired = self.live.promoter.archived_since(root, since)
        conflicts = [c for c in sync_rounds.load().conflicts if c.at > since]
        stale = self.live.promoter.stale_skills(root)
        if not done and not retired and not conflicts and not stale:
            return ""
        lines = ["🛠 autoharness skills since your last session:"]
        for c in conflicts[-3:]:  # names were checked when the round read them
            lines.append(f"  sync conflict on {c.skill} [user]: machine {c.kept}'s version is "
                         f"live, machine {c.other}'s is in its history "
                         f"(autoharnessctl skills history {c.skill})")
        for meta in retired[-4:]:  # archive names were checked when they landed
            why = (meta["why"] if meta.get("reason") in ("harmful", "stale")
                   and isinstance(meta.get("why"), str) else
                   f"{meta['reason']}: {plural(meta.get('uses', 0), 'use')} in "
                   f"{plural(meta.get('turns', 0), 'turn')}")
            lines.append(f"  archived {meta['name']} [{meta['layer']}] ({why}); "
                         f"undo: autoharnessctl skills restore {meta['name']}")
        for name, missing in stale[:4]:  # names of skill dirs; paths matched a strict pattern
            lines.append(f"  stale {name} [project]: names missing "
                         + ", ".join(missing[:3]) + (" …" if len(missing) > 3 else ""))
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

    def count_skill_use(self, ev: sm.HookEvent) -> None:
        """A main session's Skill call or read of a SKILL.md counts as one use of that skill."""
        try:
            args = _tool_input_decoder.decode(ev.tool_input) or {}
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        s = self.book.state.sessions.get(ev.session_id)
        root = self.projects.root(s.cwd) if s and s.cwd else None
        if ev.tool_name == "Skill":
            name = args.get("skill") or args.get("command") or args.get("name")
            if not isinstance(name, str) or not name:
                return
            self.skill_used(("name", name.split(":")[-1], root))  # plugin skills: "plugin:name"
        else:
            path = args.get("file_path")
            if not isinstance(path, str) or os.path.basename(path) != "SKILL.md":
                return
            self.skill_used(("path", path, root))


def _session_start_output(text: str) -> str:
    return msgspec.json.encode({
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}
    }).decode()


def _is_within(path: str, parent: str) -> bool:
    path, parent = os.path.normpath(path), os.path.normpath(parent)
    return path == parent or path.startswith(parent + os.sep)
