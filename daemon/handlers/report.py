"""`report`: what the library learned and what it cost, as a typed reply (`replies.Report`),
from the stored files and the ledger (`ledger`: the parts that see its facts write it:
the hooks the SessionStart context sent, the prompt hook its reminders, the promoter loop skill
loads, the reflection pipeline model usage, the reflector pool a session's calls).

The daemon's in-memory tables (turns, tool calls per day, the intent queue, the projects it
knows) are copied on the event loop; the figures are computed from them and the stored files
(`reportdata`) in a worker thread.
"""

import time
from collections.abc import Callable

import anyio
import msgspec

from ...protocol import messages as m
from .. import reportdata
from ..book import Book
from ..headline import headline
from ..intents import IntentQueue
from ..live import Live
from .ledger import Ledger
from .status import StatusReport

MAX_DAYS = 3660


class Report:
    def __init__(self, book: Book, live: Live, intents: IntentQueue, ledger: Ledger, *,
                 status: StatusReport, clock: Callable[[], float] = time.time):
        """`status`: the daemon's status, for the headline (is it learning, and if not why)."""
        self.status = status
        self.book = book
        self.live = live
        self.intents = intents
        self.clock = clock
        self.ledger = ledger.log

    async def cmd_report(self, req: m.Report) -> m.Reply:
        if not 1 <= req.days <= MAX_DAYS:
            return m.Error(code="bad_request",
                           message=f"--days wants a number of days from 1 to {MAX_DAYS}")
        if req.turns < 0:
            return m.Error(code="bad_request", message="--turns wants a number of turns >= 0")
        inputs = self.inputs(req)
        st = await self.status.status()
        rep = await anyio.to_thread.run_sync(reportdata.build, inputs)
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



def listed_full(cfg, infos) -> dict[tuple[str, str, str | None], bool]:
    """(layer, name, project) -> whether Claude Code lists the learned skill with its
    description, as predicted for a session in its project (the user layer: in none)."""
    from ..listing.view import project_summary

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

