"""Replay of the events hooks spooled (no daemon, or no answer in time), oldest first.

Each record is deleted only after its effect is journaled and fsynced: a crash in between
replays it again, and its event id makes the second copy count nothing. A record that does not
decode is counted as rejected and moved to quarantine; the next one is processed.
"""

import os
import time
from typing import Protocol

import anyio
import msgspec
import structlog

from ..protocol import messages as m
from ..protocol import paths
from ..protocol import spool as files
from .book import Book
from .persist import quarantine

log = structlog.get_logger("autoharness")

BATCH = 256  # records read, processed and fsynced together


class HookHandler(Protocol):
    async def cmd_hook(self, req: m.Hook, *, from_spool: bool = False) -> object:
        """Process one hook request (a spooled one is counted like a live one, answered to
        no one)."""

    def rejected(self, reason: str, *, from_spool: bool = False) -> object:
        """Count a record that is no hook request."""


class SpoolReplayer:
    def __init__(self, book: Book, hooks: HookHandler):
        self.book = book
        self.hooks = hooks
        self._lock = anyio.Lock()
        # events hooks could neither deliver nor spool, counted from their markers since the
        # start (each also logged): a loss is past, it is not part of the state
        self.lost = 0

    async def replay(self) -> int:
        """Process every spooled record; return how many were processed."""
        async with self._lock:
            d = paths.spool_dir()
            names = await anyio.to_thread.run_sync(files.pending, d)
            self.book.replay_pass(len(names))
            n = 0
            for i in range(0, len(names), BATCH):
                n += await self._replay_batch(d, names[i:i + BATCH])
            if n:
                self.book.spool_replayed(n)
                log.info("spool replayed", events=n)
            await self._count_lost()
            await anyio.to_thread.run_sync(files.drop_stale_tmp, d, time.time())
            return n

    async def _count_lost(self) -> None:
        """Markers of events hooks could not keep: counted (status and doctor show them),
        said in the log, removed."""
        n = await anyio.to_thread.run_sync(files.take_lost, paths.state_dir())
        if not n:
            return
        self.lost += n
        log.warning("hook events lost: the hooks could neither deliver nor spool them (was the "
                    "disk full?)", events=n,
                    fix="free space in the state directory's filesystem (`df -h`); those "
                    "events cannot be recovered")

    async def _replay_batch(self, d: str, names: list[str]) -> int:
        records = await anyio.to_thread.run_sync(_read_all, d, names)
        done, bad = [], []
        for name, data in records:
            req, problem = _decode(data)
            if req is None:  # set aside, so it is not pending forever
                self.book.event_received()
                self.hooks.rejected(problem, from_spool=True)
                bad.append(name)
                continue
            if isinstance(req, m.Hook):
                await self.hooks.cmd_hook(req, from_spool=True)
            done.append(name)
        await self.book.sync()  # durable before deleted (a failure is in the book's health)
        await anyio.to_thread.run_sync(_clear, d, done, bad)
        return len(done)


def pending() -> int:
    """Events waiting in the spool."""
    return files.count(paths.spool_dir())


def clip(text: str, n: int = 200) -> str:
    return text if len(text) <= n else text[:n] + "…"


def _decode(data: bytes | None) -> tuple[m.Request | None, str]:
    """The request a spool record holds, or None and why it is none."""
    if data is None:
        return None, ("spool entry that is no record (not a regular file of yours, or over "
                      "the size limit): moved to quarantine")
    try:
        return m.request_decoder.decode(data), ""
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as e:
        return None, f"unreadable spool record: {clip(str(e))}"


def _read_all(d: str, names: list[str]) -> list[tuple[str, bytes | None]]:
    """Each entry's bytes, None for one that is no record of ours (a FIFO, a symlink, another
    user's file, one too large); entries gone meanwhile are left out."""
    out = []
    for name in names:
        data = files.read(d, name)
        if data is None and not os.path.lexists(os.path.join(d, name)):
            continue
        out.append((name, data))
    return out


def _clear(d: str, done: list[str], bad: list[str]) -> None:
    """Delete processed records; move unreadable ones to quarantine, as they are (a symlink
    is moved, not followed)."""
    for name in done:
        files.remove(d, name)
    for name in bad:
        quarantine.set_aside(os.path.join(d, name), why="no spool record")
