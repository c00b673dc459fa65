"""`report`: what the library learned and what it cost, as a typed reply (`replies.Report`);
and the recording of what only the report needs, into its ledger (`reportlog`).

The parts that see those facts (the hooks: SessionStart context sent; the promoter loop:
skill loads; the reflection pipeline: model usage; the reflector pool: a session's calls) are
handed its `record_*` methods as plain callables when they are built, so they carry no
knowledge of the ledger. Every record is
appended before the fact is acted on further (usage: fsynced); a record that cannot be written
(a full disk) is logged and skipped — the figures are advisory and never fail the work.

The daemon's in-memory tables (turns, tool calls per day, the intent queue, the projects it
knows) are copied on the event loop; the figures are computed from them and the stored files
(`reportdata`) in a worker thread.
"""

import os
import time
from collections.abc import Awaitable, Callable

import anyio
import msgspec
import structlog

from claude_autoharness.daemon import reportdata
from claude_autoharness.daemon.book import Book
from claude_autoharness.daemon.headline import headline
from claude_autoharness.daemon.intents import IntentQueue
from claude_autoharness.daemon.live import Live
from claude_autoharness.daemon.reportlog import ReportLog
from claude_autoharness.daemon.sessions import Session
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol import paths
from claude_autoharness.protocol import replies as r

log = structlog.get_logger("autoharness")

MAX_DAYS = 3660


class Report:
    def __init__(self, book: Book, live: Live, intents: IntentQueue, *,
                 clock: Callable[[], float] = time.time,
                 status: Callable[[], Awaitable[r.Status]] | None = None):
        """`status`: the daemon's status, for the headline (is it learning, and if not why)."""
        self.status = status
        self.book = book
        self.live = live
        self.intents = intents
        self.clock = clock
        self.ledger = ReportLog(clock=clock)

    async def cmd_report(self, req: m.Report) -> m.Reply:
        if not 1 <= req.days <= MAX_DAYS:
            return m.Error(code="bad_request",
                           message=f"--days wants a number of days from 1 to {MAX_DAYS}")
        if req.turns < 0:
            return m.Error(code="bad_request", message="--turns wants a number of turns >= 0")
        inputs = self.inputs(req)
        st = await self.status() if self.status is not None else None
        rep = await anyio.to_thread.run_sync(reportdata.build, inputs)
        if st is not None:
            rep.headline = headline(st, rep, reflect_every=self.live.cfg.reflect_every)
        return m.Ok(data=rep)

    def inputs(self, req: m.Report) -> reportdata.Inputs:
        """Copies of what the loop owns, taken on the loop."""
        state = self.book.state
        turns = msgspec.structs.replace(state.turns, projects=dict(state.turns.projects))
        intents = self.intents.list()
        projects = set(turns.projects)
        projects |= {i.project_root for i in intents if i.project_root}
        cfg = self.live.cfg
        return reportdata.Inputs(
            promoter=self.live.promoter, intents=intents, ledger=self.ledger,
            turns=turns.of, projects=sorted(projects),
            sessions=[(s.session_id, s.started_at, s.calls_hook + s.calls_transcript,
                       s.last_event_at) for s in state.sessions.values()],
            model=cfg.reflector.model, prices=dict(cfg.reflector.prices),
            recall_turns=req.turns or cfg.library.maturity_turns,
            now=self.clock(), days=req.days, listed=lambda infos: listed_full(cfg, infos))

    # ---- recording (blocking: worker threads) ----------------------------------------------

    def _append(self, what: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except OSError as e:
            log.warning(f"{what} not recorded", error=str(e))

    def record_usage(self, **call) -> None:
        """One model call's tokens (see `ReportLog.usage`)."""
        self._append("usage", lambda: self.ledger.usage(**call))

    def record_context(self, chars: int, parts: list[str]) -> None:
        """A SessionStart context about to be sent; compacts the ledger past its bound."""
        def write() -> None:
            self.ledger.append("context", chars=chars, parts=parts)
            self.ledger.compact()  # a stat, unless the ledger outgrew its bound
        self._append("context size", write)

    def record_reminder(self, session: str, root: str | None, skills: list[str]) -> None:
        """A prompt's reminder of these skills (`<layer>/<name>`) in a session of `root`."""
        self._append("reminder", lambda: self.ledger.append(
            "reminder", session=session, project=root, skills=skills))

    def record_calls(self, s: Session) -> None:
        """A session's tool calls counted so far (its latest total counts)."""
        self._append("call count", lambda: self.ledger.append(
            "calls", session=s.session_id, started=s.started_at,
            total=s.calls_hook + s.calls_transcript))

    def record_load(self, skill_dir: str, root: str | None, session: str = "") -> None:
        """A skill load with its layer's turn count and session, so recall can say which
        skills were loaded within the last N turns, and whether after a reminder."""
        user = os.path.realpath(paths.user_skills_dir())
        layer = "user" if os.path.dirname(skill_dir) == user else "project"
        scope = root if layer == "project" else None
        self._append("skill load", lambda: self.ledger.append(
            "use", dir=skill_dir, layer=layer, scope=scope,
            turn=self.live.promoter.turns(layer, scope), session=session))


def listed_full(cfg, infos) -> dict[tuple[str, str, str | None], bool]:
    """(layer, name, project) -> whether Claude Code lists the learned skill with its
    description, as predicted for a session in its project (the user layer: in none)."""
    from claude_autoharness.daemon.listing.view import project_summary

    out: dict[tuple[str, str, str | None], bool] = {}
    live = [i for i, _ in infos if i.status == "live"]
    for scope in sorted({s for _, s in infos}, key=lambda s: s or ""):
        try:
            summary = project_summary(cfg, scope, live if scope is None else [
                i for i, s in infos if i.status == "live" and s in (None, scope)])
        except Exception:  # no prediction: the split counts them as listed
            continue
        hidden = set(summary.autoharness_name_only)
        for i, s in infos:
            if s == scope and i.status == "live" and i.owner == "autoharness":
                out[(i.layer, i.name, s)] = i.name not in hidden
    return out

