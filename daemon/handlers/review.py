"""The intent queue's way to the skill tree: the promoter loop (the single writer of skills),
the operator's `queue` verbs, skill-use counting, and the stored job windows evidence is
checked against.

Promotion reads and writes files, so it runs in worker threads, one intent at a time.
"""

import os
from collections.abc import Awaitable, Callable

import anyio
import structlog

from claude_autoharness.daemon.handlers.hooks import SkillUse
from claude_autoharness.daemon.intents import IntentQueue
from claude_autoharness.daemon.live import Live
from claude_autoharness.daemon.proposals import Finding, Intent
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol import paths
from claude_autoharness.protocol.replies import Outcome

log = structlog.get_logger("autoharness")

WINDOW_KEEP_S = 7 * 86_400


class Review:
    def __init__(self, live: Live, intents: IntentQueue, *, clock: Callable[[], float]):
        self.live = live
        self.between_passes: Callable[[], None] = lambda: None  # blocking; set by the wiring
        self.intents = intents
        self.clock = clock
        self.in_review: set[str] = set()  # held intents an operator is approving/rejecting
        self.use_queue: list[SkillUse] = []
        self.last_landing_at: float | None = None
        # (skill dir, project root) of each load: the report's record for recall (wired by core)
        self.record_load: Callable[[str, str | None], None] = lambda skill_dir, root: None
        self._wake = anyio.Event()

    def wake(self) -> None:
        self._wake.set()

    def skill_used(self, use: SkillUse) -> None:
        """Queue a skill use; the promoter loop records it off the event loop."""
        self.use_queue.append(use)
        self.wake()

    async def loop(self) -> None:
        while True:
            event = self._wake = anyio.Event()
            try:
                await anyio.to_thread.run_sync(self.record_uses)
                await anyio.to_thread.run_sync(self.between_passes)
                for intent in self.intents.list("queued"):
                    await self._promote_guarded(intent)
            except Exception:
                log.exception("promoter pass failed")
                await anyio.sleep(1.0)
                continue
            await event.wait()

    def record_uses(self) -> None:
        """Record the queued skill uses (blocking)."""
        promoter = self.live.promoter
        while self.use_queue:
            kind, value, root = self.use_queue.pop(0)
            try:
                if kind == "path":
                    used = [promoter.record_use(value)]
                else:
                    used = [promoter.record_use(d) for d in promoter.locate(value, root)[:1]]
                for d in used:
                    if d is not None:
                        self.record_load(d, root)
            except Exception:
                log.exception("skill use not recorded")

    async def _promote_guarded(self, intent: Intent) -> None:
        """An intent that makes the promoter raise is rejected, not retried at every start."""
        try:
            await self.promote_one(intent)
        except Exception as e:
            log.exception("promotion failed", intent=intent.id)
            finding = Finding(family="landing", code="internal", message=type(e).__name__)
            await anyio.to_thread.run_sync(self.intents.update, intent.id, "rejected", [finding])

    async def promote_one(self, intent: Intent, *, approve: bool = False) -> Outcome:
        def work():
            window = window_for(intent)
            promoter = self.live.promoter
            fn = promoter.approve if approve else promoter.promote
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

    async def cmd_queue(self, req: m.Queue) -> m.Reply:
        return await QUEUE_OPS[req.op](self, req)

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


QueueHandler = Callable[[Review, m.Queue], Awaitable[m.Reply]]
Decision = Callable[[Review, Intent, m.Queue], Awaitable[Outcome]]


async def _list(rv: Review, req: m.Queue) -> m.Reply:
    return m.Ok(data=rv.intents.list())


async def _show(rv: Review, req: m.Queue) -> m.Reply:
    found = rv.find(req)
    return found if isinstance(found, m.Error) else m.Ok(data=found)


def _deciding(decide: Decision) -> QueueHandler:
    """An operator's decision on a held intent: taken once, by one request at a time."""
    async def op(rv: Review, req: m.Queue) -> m.Reply:
        intent = rv.find(req)
        if isinstance(intent, m.Error):
            return intent
        if intent.status != "held" or intent.id in rv.in_review:
            return m.Error(code="bad_state", message=f"intent {intent.id} is {intent.status}, "
                           "only held intents can be approved or rejected, once")
        rv.in_review.add(intent.id)  # claimed before any await: one decision per intent
        try:
            return m.Ok(data=await decide(rv, intent, req))
        finally:
            rv.in_review.discard(intent.id)
    return op


async def _approve(rv: Review, intent: Intent, req: m.Queue) -> Outcome:
    return await rv.promote_one(intent, approve=True)


async def _reject(rv: Review, intent: Intent, req: m.Queue) -> Outcome:
    finding = Finding(family="review", code="rejected_by_operator", message=req.why or "")
    await anyio.to_thread.run_sync(rv.intents.update, intent.id, "rejected", [finding])
    return Outcome.rejected(finding)


# One entry per `QueueOp` (a test holds them equal).
QUEUE_OPS: dict[m.QueueOp, QueueHandler] = {
    "list": _list,
    "show": _show,
    "approve": _deciding(_approve),
    "reject": _deciding(_reject),
}


def window_for(intent: Intent) -> str | None:
    """The text an intent's evidence must be found in: its job's stored window, or the marker."""
    if intent.source == "marker" and intent.proposal is not None:
        return intent.proposal.evidence
    if not intent.job_id:
        return None
    try:
        with open(os.path.join(paths.windows_dir(), f"{intent.job_id}.txt"), "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None
