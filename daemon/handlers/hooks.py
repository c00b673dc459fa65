"""Hook events: count them into the session state machine, create the jobs it asks for, and
answer SessionStart with the context autoharness injects. Also the second witness: tool calls
the transcript shows that no PreToolUse reported.

Acknowledged means journaled: an event's whole effect is one journal record, appended before
the reply. An event whose id was already acknowledged (a spooled copy of an event whose reply
was lost, a replay cut short by a crash) counts nothing and creates no job.

Runs on the event loop, and changes the state only through the book's named changes. The
SessionStart context reads files, so it is built in a worker thread (`session_start`) from
copies taken here; what it delivered is applied to the book back on the loop.
"""

import os
from collections.abc import Callable

import anyio
import msgspec
import structlog

from ...protocol import checkrule, paths
from ...protocol import messages as m
from .. import sessions as sm
from ..book import Book
from ..capture.final import final_answer_text
from ..deliveries import Deliveries
from ..events import CallHeard, Events, SkillUsed, TurnCounted
from ..live import Live, new_id
from ..projects import ProjectSwitches
from ..spool import clip
from .ledger import Ledger
from .prompt import PromptReminders
from .session_start import (
    SessionStartContext,
    StartContext,
    StartInputs,
)

log = structlog.get_logger("autoharness")

_event_decoder = msgspec.json.Decoder(sm.HookEvent)
_tool_input_decoder = msgspec.json.Decoder(dict[str, object] | None)
# Two installs (the plugin and the settings) both deliver a session's start within moments of
# each other, each with its own event id: only the first gets the context.
CONTEXT_REPEAT_S = 10.0
CHECKED_TOOLS = frozenset(t for tools in checkrule.TOOLS.values() for t in tools)


class Hooks:
    def __init__(self, book: Book, live: Live, *, projects: ProjectSwitches,
                 start_context: SessionStartContext, reminders: PromptReminders,
                 ledger: Ledger, events: Events, clock: Callable[[], float]):
        """`start_context` builds a SessionStart's context, `reminders` a prompt's; the
        `ledger` records each context sent; `events` hears what a counted event tells."""
        self.book = book
        self.live = live
        self.projects = projects
        self.start_context = start_context
        self.reminders = reminders
        self.ledger = ledger
        self.events = events
        self.clock = clock
        self.child_dir = paths.reflector_dir()
        # (session id, source) -> (event id, when) of the last start given its context
        self.context_given: dict[tuple[str, str], tuple[str, float]] = {}
        self.deliveries = Deliveries()  # which installs deliver each session's events

    def rejected(self, reason: str, *, from_spool: bool = False) -> m.HookReply:
        """Count and log an event we will not act on, with why (no payload: it may hold secrets)."""
        self.book.event_rejected()
        log.warning("event rejected", reason=reason, source="spool" if from_spool else "hook")
        return m.HookReply()

    async def cmd_hook(self, req: m.Hook, *, from_spool: bool = False) -> m.HookReply:
        """Decode, drop a copy already counted, then count and journal the event in one step
        (`_journal`: no await between the book's change and its record) and only then tell
        what follows and reply: acknowledged means journaled."""
        self.book.event_received()
        ev = self._decode(req, from_spool)
        if isinstance(ev, m.HookReply):
            return ev
        if not from_spool and not req.replayed:
            self.deliveries.seen(ev.session_id, req.via, self.clock())
        counting = self.counting(ev)
        if self.book.seen_before(req.id):  # a copy of an event already counted
            self.book.event_duplicate()
            return await self._reply(req, ev, counting, from_spool)
        if not self.book.event_kind(ev.hook_event_name):
            return m.HookReply()
        final = await self._final_off_loop(ev, counting)
        if self.book.seen_before(req.id):  # a copy that came in meanwhile was counted instead
            self.book.event_duplicate()
            return m.HookReply()
        self._journal(req, ev, counting, final, from_spool)
        return await self._reply(req, ev, counting, from_spool)

    def _decode(self, req: m.Hook, from_spool: bool) -> sm.HookEvent | m.HookReply:
        """The event, or the reply to one rejected (undecodable, or a session id we will not
        key state on: it names files and state keys)."""
        try:
            ev = _event_decoder.decode(req.payload)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as e:
            return self.rejected(f"not a hook event: {clip(str(e))}", from_spool=from_spool)
        if not sm.valid_session_id(ev.session_id):
            return self.rejected(f"invalid session id {clip(repr(ev.session_id), 60)} "
                                 f"({ev.hook_event_name})", from_spool=from_spool)
        return ev

    async def _final_off_loop(self, ev: sm.HookEvent, counting: bool) -> str | None:
        """A Stop that will create a threshold job: the turn's final text for the job (and the
        journal), redacted first, in a worker thread. None when there is none to take."""
        if ev.hook_event_name == "Stop" and counting and ev.last_assistant_message \
                and self._may_reflect(ev.session_id):
            return await anyio.to_thread.run_sync(self.final_text, ev.last_assistant_message)
        return None

    def _journal(self, req: m.Hook, ev: sm.HookEvent, counting: bool, final: str | None,
                 from_spool: bool) -> None:
        """Apply the event and journal its whole effect as one record, then publish what
        follows (never awaits: nothing can come between the change and its record).

        A main session's Stop is one turn of the user layer and of its project (a replayed
        session takes none). The counter reset travels with the job and the id with both, in
        one record: neither a restart nor a second copy counts the same work again."""
        name = ev.hook_event_name
        now = req.ts if (from_spool and req.ts) else self.clock()
        jobs = self.book.apply_event(ev, now=now, reflect_every=self.live.cfg.reflect_every,
                                     make_id=new_id, counting=counting)
        s = self.book.session(ev.session_id) if counting else None
        calls = [ev.tool_use_id] if s is not None and name == "PreToolUse" and ev.tool_use_id \
            and not ev.agent_id else []
        if final is None and ev.last_assistant_message \
                and any(j.kind == "threshold" for j in jobs):  # the activity moved meanwhile
            final = self.final_text(ev.last_assistant_message)
        turn = name == "Stop" and counting and not req.replayed
        root = self.projects.root(s.cwd) if turn and s is not None and s.cwd else None
        self.book.record_event(req.id, name, session=s, jobs=jobs, calls=calls, turn=turn,
                               project=root, final_text=final, prompt_id=ev.prompt_id)
        for job in jobs:
            log.info("job created", job=job.id, kind=job.kind, session=job.session_id)
        if turn:
            self.events.publish(TurnCounted(project=root))
        if name == "PreToolUse" and counting and not req.replayed:
            self._tell_tool_use(ev)

    def _may_reflect(self, session_id: str) -> bool:
        """Whether a Stop of this session now would create a threshold job."""
        s = self.book.session(session_id)
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
            text = await self.give_context(ev, plugin=req.via == "plugin")
            if text:
                return m.HookReply(output=_session_start_output(text))
        if ev.hook_event_name == "UserPromptSubmit" and counting and not from_spool \
                and not req.replayed:
            out = await self.reminders.output(ev)
            if out:
                return m.HookReply(output=out)
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

    def count_transcript_calls(self, found: dict[str, list[tuple[str, float]]]) -> int:
        """Count the tool calls the watcher read from main transcripts (path -> [(tool_use_id,
        time)]) that no PreToolUse counted, for the session whose transcript each is; journaled
        like an event. Returns how many counted."""
        if not found:
            return 0
        by_path = {os.path.normpath(s.transcript_path): s for s in self.book.sessions()
                   if s.transcript_path}
        n = 0
        for path, calls in found.items():
            s = by_path.get(os.path.normpath(path))
            if s is None or not self.counting_session(s):
                continue
            n += len(self.book.count_transcript_calls(s, calls))
        return n

    def counting_session(self, s: sm.Session) -> bool:
        """Whether a session's transcript calls may count (as `counting` for its events)."""
        if self.book.paused() or (s.cwd and _is_within(s.cwd, self.child_dir)):
            return False
        return self.projects.enabled(s.cwd)

    def counting(self, ev: sm.HookEvent) -> bool:
        """Whether this event may count: not paused, not our own reflector child's."""
        if self.book.paused():
            return False
        if ev.cwd and _is_within(ev.cwd, self.child_dir):
            return False
        s = self.book.session(ev.session_id)
        cwd = (s.cwd if s is not None and s.ended_at is None else None) or ev.cwd
        return self.projects.enabled(cwd)

    # ---- SessionStart context --------------------------------------------------------------

    async def give_context(self, ev: sm.HookEvent, *, plugin: bool) -> str:
        """The context for this session start: inputs copied here, built in a worker thread,
        what it delivered applied to the book here (the state is the loop's alone)."""
        start = self.start_inputs(ev, plugin=plugin)
        if start is None:
            return ""
        built = await anyio.to_thread.run_sync(self._build_context, start)
        self.book.context_delivered(start.session_id, built.delivered)
        if "promoter" in built.delivered and start.root:
            self.book.mark_project_seen(start.root, start.at)
        return built.text

    def start_inputs(self, ev: sm.HookEvent, *, plugin: bool) -> StartInputs | None:
        """What a session start's context is built from, copied from the state (on the loop);
        None for a session the book does not hold."""
        s = self.book.session(ev.session_id)
        if s is None:
            return None
        root = self.projects.root(s.cwd) if s.cwd else None
        return StartInputs(
            session_id=s.session_id, source=ev.source or "startup",
            sent=frozenset(s.context_sent), root=root, transcript_path=ev.transcript_path,
            since=self.book.project_seen_at(root) if root else 0.0, at=self.clock(),
            plugin=plugin, teach=self.live.cfg.learnings.teach)

    def _build_context(self, start: StartInputs) -> StartContext:
        """Worker thread: build it, and record what it costs the session before it is sent."""
        built = self.start_context.build(start)
        if built.text:
            self.ledger.record_context(len(built.text), sorted(built.delivered))
        return built

    def _tell_tool_use(self, ev: sm.HookEvent) -> None:
        """A counted live PreToolUse: a Skill call or a read of a SKILL.md is one use of that
        skill; a main session's call of a tool a check can name is heard for the adherence
        counts (with the project root of each)."""
        skill = ev.tool_name in ("Skill", "Read")
        checked = ev.tool_name in CHECKED_TOOLS and not ev.agent_id
        if not (skill or checked):
            return
        try:
            args = _tool_input_decoder.decode(ev.tool_input) or {}
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        s = self.book.session(ev.session_id)
        if skill and (use := self._skill_use(ev, args, s)) is not None:
            self.events.publish(use)
        if checked:
            cwd = ev.cwd or (s.cwd if s else None)
            self.events.publish(CallHeard(call={
                "session_id": ev.session_id, "tool_name": ev.tool_name, "tool_input": args,
                "cwd": cwd, "hook_event_name": "PreToolUse", "tool_use_id": ev.tool_use_id,
                "transcript_path": (s.transcript_path if s else None) or ev.transcript_path},
                project=self.projects.root(cwd) if cwd else None))

    def _skill_use(self, ev: sm.HookEvent, args: dict, s: sm.Session | None) -> SkillUsed | None:
        """The skill a Skill call names (resolved later as Claude Code does: `loads`), or the
        SKILL.md a Read opens; None for any other call."""
        root = self.projects.root(s.cwd) if s and s.cwd else None
        if ev.tool_name == "Skill":
            name = args.get("skill") or args.get("command") or args.get("name")
            if isinstance(name, str) and name:
                return SkillUsed(kind="name", value=name, project=root, session=ev.session_id)
            return None
        path = args.get("file_path")
        if isinstance(path, str) and os.path.basename(path) == "SKILL.md":
            return SkillUsed(kind="path", value=path, project=root, session=ev.session_id)
        return None


def _session_start_output(text: str) -> str:
    return msgspec.json.encode({
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}
    }).decode()


def _is_within(path: str, parent: str) -> bool:
    path, parent = os.path.normpath(path), os.path.normpath(parent)
    return path == parent or path.startswith(parent + os.sep)
