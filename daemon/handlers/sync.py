"""`autoharnessctl sync` and the daemon's own rounds (`sync.every_s`): the user layer through
the user's git remote. A round runs in a worker thread, never on the hook's path; rounds never
overlap (the round's own flock), and one that fails backs off until the next try."""

from collections.abc import Callable
from typing import assert_never

import anyio
import structlog

from ...protocol import messages as m
from ...protocol import replies as r
from ..live import Live
from ..skillsync import rounds

log = structlog.get_logger("autoharness")

POLL_MAX_S = 60.0


class SyncRounds:
    def __init__(self, live: Live, *, clock: Callable[[], float]):
        self.live = live
        self.clock = clock
        self.last = r.SyncInfo()

    def load(self) -> None:
        self.last = rounds.load()

    def info(self) -> r.SyncInfo:
        """What `status` shows: the last round, as recorded on disk."""
        out = r.SyncInfo(**{f: getattr(self.last, f) for f in r.SyncInfo.__struct_fields__})
        out.every_s = self.live.cfg.sync.every_s
        return out

    def _round(self) -> r.SyncInfo:
        info = rounds.run(self.live.promoter, self.live.cfg.sync, counts=True, clock=self.clock)
        if info.last_error:
            log.warning("sync round failed", reason=info.last_error, failures=info.failures)
        elif info.took or info.pushed or info.merged or info.conflicts:
            log.info("sync round", took=info.took, pushed=info.pushed, merged=info.merged)
        return info

    async def cmd_sync(self, req: m.Sync) -> m.Reply:
        match req.op:
            case "status":
                self.last = await anyio.to_thread.run_sync(rounds.load)
            case "round":
                try:
                    self.last = await anyio.to_thread.run_sync(self._round)
                except rounds.NotSetUp as e:
                    return m.Error(code="not_set_up", message=str(e))
                except rounds.Busy as e:
                    return m.Error(code="busy", message=f"{e}; try again in a moment")
            case _:
                assert_never(req.op)
        return m.Ok(data=self.info())

    async def loop(self) -> None:
        """Run a round whenever one is due (off while `sync.every_s` is 0)."""
        while True:
            cfg = self.live.cfg.sync
            await anyio.sleep(min(POLL_MAX_S, cfg.every_s) if cfg.every_s > 0 else POLL_MAX_S)
            try:
                if rounds.due(self.last, self.live.cfg.sync, self.clock()):
                    self.last = await anyio.to_thread.run_sync(self._round)
            except rounds.Busy:
                pass  # an `autoharnessctl sync` is running one
            except Exception:  # every background loop has its own boundary
                log.exception("sync round failed")
