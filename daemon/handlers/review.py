"""The intent queue's way to the skill tree: the promoter loop (the single writer of skills),
the operator's `queue` verbs, skill-use counting, feedback verdicts grounded into skill
history, and the stored job windows evidence is checked against.

The loop is the one promotion loop: each pass records the skill uses queued, runs the
library's lifecycle over the layers whose turns moved (`Library`, which it is handed and which
knows nothing of it), promotes the queued intents and grounds the queued verdicts. Whatever
calls for a pass (a turn counted, intents queued, a verdict accepted) sends it word through
one memory stream, its inbox, on the event loop; a pass takes what the inbox holds on the
loop and hands it to its worker thread, so nothing the thread reads is changed meanwhile.

Promotion reads and writes files, so it runs in worker threads, one intent at a time.
"""

import contextlib
import math
import os
from collections.abc import Awaitable, Callable
from typing import Any, assert_never

import anyio
import structlog

from ...protocol import messages as m
from ...protocol import paths
from ...protocol.replies import Outcome
from .. import events as ev
from ..intents import IntentQueue
from ..live import Live
from ..promote import lifecycle, loads
from ..proposals import Finding, Intent, VerdictRecord
from ..reflect import windows
from .ledger import Ledger
from .library import Library

log = structlog.get_logger("autoharness")

WINDOW_KEEP_S = 7 * 86_400


class Review:
    def __init__(self, live: Live, intents: IntentQueue, library: Library, *, ledger: Ledger,
                 events: ev.Events, clock: Callable[[], float]):
        """`library` is judged between passes; the `ledger` records each skill load, for
        recall (blocking). What wakes a pass is subscribed to here."""
        self.live = live
        self.intents = intents
        self.library = library
        self.ledger = ledger
        self.clock = clock
        self.in_review: set[str] = set()  # held intents an operator is approving/rejecting
        # what the next pass takes, in the order it was sent: ("use", SkillUsed),
        # ("call", CallHeard), ("due", project root) or ("wake", None); the user layer is due
        # at start
        self._send, self._inbox = anyio.create_memory_object_stream[tuple[str, Any]](math.inf)
        self.mark_due(None)
        self.adherence = live.promoter.adherence_recorder()
        self.lessons_of: list[dict] | None = None  # the compiled checks status shows
        self.last_landing_at: float | None = None
        events.subscribe(ev.TurnCounted, self.turn_counted)
        events.subscribe(ev.SkillUsed, self.skill_used)
        events.subscribe(ev.CallHeard, self.call_heard)
        events.subscribe(ev.JobDone, self.wake)  # its intents are queued
        events.subscribe(ev.IntentsQueued, self.wake)

    def wake(self, _event: object = None) -> None:
        """Intents were queued (or marker intents saved): a pass promotes them (on the loop)."""
        self._send.send_nowait(("wake", None))

    def mark_due(self, project_root: str | None) -> None:
        """This project's skills (and the user layer's) are judged at the next pass: a main
        session's Stop counted (and journaled) a turn of both, a verdict was accepted."""
        self._send.send_nowait(("due", project_root))

    def turn_counted(self, turn: ev.TurnCounted) -> None:
        """A main session's Stop was counted (and journaled) as one turn of the user layer and
        of its project: the library's lifecycle is re-judged."""
        self.mark_due(turn.project)

    def skill_used(self, use: ev.SkillUsed) -> None:
        """Queue a skill use; the promoter loop records it off the event loop."""
        self._send.send_nowait(("use", use))

    def call_heard(self, heard: ev.CallHeard) -> None:
        """Queue a tool call for the adherence counts; the promoter loop records it."""
        self._send.send_nowait(("call", heard))

    async def _take(self, *, wait: bool) -> tuple[list, ...]:
        """All the inbox holds (waiting for a first word when `wait`), taken on the loop: the
        uses, the calls and the layers due, each in the order sent."""
        got = [await self._inbox.receive()] if wait else []
        with contextlib.suppress(anyio.WouldBlock):
            while True:
                got.append(self._inbox.receive_nowait())
        return tuple([v for k, v in got if k == kind] for kind in ("use", "call", "due"))

    def record_calls(self, calls: list[ev.CallHeard]) -> None:
        """Count the calls taken against the checks in force when they were made (the
        table the hook read: the last compiled), before this pass changes it (blocking)."""
        if self.live.promoter.checks_seen is None:  # the first pass: the table on disk
            self.compile_checks()
        try:
            self.adherence.record([(c.call, c.project) for c in calls],
                                  self.live.promoter.compiled_checks, self.clock())
            if calls:
                self.library.show_checks(self.live.promoter.lessons())
        except Exception:
            log.exception("adherence not recorded")

    def compile_checks(self) -> None:
        """What landed, was archived or confirmed this pass holds the next tool call; each
        project check's baseline is read once (blocking)."""
        pr = self.live.promoter
        pr.refresh_check_table()
        if pr.compiled_checks is not self.lessons_of:  # compiled here, or by an approval
            self.lessons_of = pr.compiled_checks
            pr.fill_baselines()
            self.library.show_checks(pr.lessons())

    async def loop(self) -> None:
        """One pass per batch of the inbox; after a failed pass, one more a second later
        without waiting for word (what it took was handed to it, and is not taken again)."""
        failed = False
        while True:
            uses, calls, due = await self._take(wait=not failed)
            try:
                await anyio.to_thread.run_sync(self.record_uses, uses)
                await anyio.to_thread.run_sync(self.record_calls, calls)
                await anyio.to_thread.run_sync(self.lifecycle_pass, due)
                for intent in self.intents.list("queued"):
                    await self._promote_guarded(intent)
                for rec in self.intents.verdicts("queued"):
                    await self._ground_guarded(rec)
                await anyio.to_thread.run_sync(self.compile_checks)
                failed = False
            except Exception:
                log.exception("promoter pass failed")
                await anyio.sleep(1.0)
                failed = True

    def record_uses(self, uses: list[ev.SkillUsed]) -> None:
        """Record the skill uses taken from the inbox (blocking)."""
        promoter = self.live.promoter
        for use in uses:
            kind, value, root, session = use.kind, use.value, use.project, use.session
            try:
                # the skill Claude Code loaded: by name the user's first, by path its own layer's
                layers = loads.Layers.of(root)
                hit = (loads.resolve_read(value, layers) if kind == "path"
                       else loads.resolve_name(value, layers))
                d = promoter.record_use(hit[1]) if hit is not None else None
                if d is not None:
                    self.ledger.record_load(d, root, session)
            except Exception:
                log.exception("skill use not recorded")

    def lifecycle_pass(self, due: list[str | None]) -> None:
        """Judge the layers whose turns moved (blocking). The uses taken with them were
        recorded first: a use sent before the Stop counts in this pass."""
        for root in dict.fromkeys(due):  # each once
            self.library.judge(root)

    async def _promote_guarded(self, intent: Intent) -> None:
        """An intent that makes the promoter raise is rejected, not retried at every start."""
        try:
            await self.promote_one(intent)
        except Exception as e:
            log.exception("promotion failed", intent=intent.id)
            finding = Finding(family="landing", code="internal", message=type(e).__name__)
            await anyio.to_thread.run_sync(self.intents.update, intent.id, "rejected", [finding])

    async def _ground_guarded(self, rec: VerdictRecord) -> None:
        """Ground one queued verdict (accepted into its skill's history, or refused with the
        reason); one that makes the promoter raise is refused, not retried forever."""
        def work():
            window = window_for(rec)
            try:
                status, findings = self.live.promoter.ground_feedback(rec, window)
            except Exception as e:
                log.exception("grounding failed", verdict=rec.id)
                status, findings = "rejected", [Finding(family="landing", code="internal",
                                                        message=type(e).__name__)]
            self.intents.update_verdict(rec.id, status, findings)
            return status, findings

        status, findings = await anyio.to_thread.run_sync(work)
        v = rec.verdict
        log.info("verdict " + status, verdict=rec.id, skill=v.skill if v else None,
                 kind=v.verdict if v else None, findings=sorted({f"{f.family}/{f.code}"
                                                                  for f in findings}))
        if status == "accepted":  # new evidence for this project's skills: judge them again
            self.mark_due(rec.project_root)

    def over_share(self, intent: Intent) -> Finding | None:
        """A curator archive past the share of its layer one run may archive (blocking)."""
        p = intent.proposal
        if intent.source != "curator" or p is None or p.action != "archive":
            return None
        done = sum(1 for i in self.intents.list("landed") if i.job_id == intent.job_id
                   and i.proposal is not None and i.proposal.action == "archive")
        live = sum(1 for i in self.live.promoter.list_skills(intent.project_root)
                   if i.status == "live" and i.owner == "autoharness" and i.layer == p.layer)
        cap = lifecycle.share_cap(live + done, self.live.cfg.library.max_archive_share)
        if done < cap:
            return None
        return Finding(family="limit", code="archive_share",
                       message=f"this curator run archived {done} of the {p.layer} layer's "
                               f"{live + done} skills already: at most {cap} per run "
                               "(library.max_archive_share)")

    async def promote_one(self, intent: Intent, *, approve: bool = False) -> Outcome:
        def work():
            window = window_for(intent)
            promoter = self.live.promoter
            fn = promoter.approve if approve else promoter.promote
            # counted before the promoter takes its lock; reported only if all else passes
            over = self.over_share(intent)
            out = fn(intent, window, intent.project_root, gate=lambda: over)
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

    async def cmd_queue(self, req: m.Queue) -> m.Reply:
        match req.op:
            case "list":
                return m.Ok(data=self.intents.list())
            case "feedback":
                return m.Ok(data=self.intents.verdicts())
            case "show":
                found = self.find(req)
                return found if isinstance(found, m.Error) else m.Ok(data=found)
            case "approve":
                return await self.decide(req, lambda i: self.promote_one(i, approve=True))
            case "reject":
                return await self.decide(req, lambda i: self.reject(i, req.why or ""))
            case _:
                assert_never(req.op)

    async def decide(self, req: m.Queue, decision: Callable[[Intent], Awaitable[Outcome]]
                     ) -> m.Reply:
        """An operator's decision on a held intent: taken once, by one request at a time."""
        intent = self.find(req)
        if isinstance(intent, m.Error):
            return intent
        if intent.status != "held" or intent.id in self.in_review:
            return m.Error(code="bad_state", message=f"intent {intent.id} is {intent.status}, "
                           "only held intents can be approved or rejected, once")
        self.in_review.add(intent.id)  # claimed before any await: one decision per intent
        try:
            return m.Ok(data=await decision(intent))
        finally:
            self.in_review.discard(intent.id)

    async def reject(self, intent: Intent, why: str) -> Outcome:
        finding = Finding(family="review", code="rejected_by_operator", message=why)
        await anyio.to_thread.run_sync(self.intents.update, intent.id, "rejected", [finding])
        return Outcome.rejected(finding)

    def find(self, req: m.Queue) -> Intent | m.Error:
        """The intent the request names, or the error that says how to find one."""
        intent = self.intents.get(req.intent_id or "")
        if intent is None:
            return m.Error(code="not_found", message=f"no intent {req.intent_id!r}: "
                           "see `autoharnessctl queue list`")
        return intent

    def prune_windows(self) -> int:
        """Drop stored job windows no intent still needs (none queued or held) once they are
        older than WINDOW_KEEP_S; they exist only so the promoter can re-check evidence."""
        needed = {i.job_id for i in self.intents.list() if i.status in ("queued", "held")}
        needed |= {v.job_id for v in self.intents.verdicts("queued")}
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


def window_for(intent: Intent | VerdictRecord) -> str | None:
    """The text an intent's (or a verdict's) evidence must be found in: its job's stored
    window, or the marker."""
    if isinstance(intent, Intent) and intent.source == "marker" and intent.proposal is not None:
        return intent.proposal.evidence
    if not intent.job_id:
        return None
    return windows.read_window(intent.job_id)
