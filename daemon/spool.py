"""Replay of the events hooks spooled while the daemon was down or too busy to accept them.

The spool is renamed first so hooks appending meanwhile start a new file; the renamed file is
deleted only after a snapshot that includes its effects (and names the file, so a crash before
the delete does not replay it twice) is durable.
"""

import os
from collections.abc import Awaitable, Callable

import anyio
import msgspec
import structlog

from claude_autoharness.daemon.book import Book
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol import paths

log = structlog.get_logger("autoharness")

HandleHook = Callable[[m.Hook], Awaitable[object]]
Reject = Callable[[str], object]


class SpoolReplayer:
    def __init__(self, book: Book, handle: HandleHook, reject: Reject):
        """`handle` processes one spooled hook request; `reject` counts an unreadable record."""
        self.book = book
        self.handle = handle
        self.reject = reject
        self._lock = anyio.Lock()

    async def replay(self) -> int:
        """Process every spooled event, then drop the spool; return how many were read."""
        async with self._lock:
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
        state = self.book.state
        st = os.stat(replaying)
        if state.spool_done == [st.st_ino, st.st_size]:
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
                state.events.received += 1
                self.reject(f"unreadable spool record: {clip(str(e))}")
                continue
            if isinstance(req, m.Hook):
                await self.handle(req)
        state.events.spool_replayed += n
        state.spool_done = [st.st_ino, st.st_size]
        self.book.mark_dirty()
        await self.book.persist()
        os.unlink(replaying)
        return n


def pending() -> int:
    """Events waiting in the spool (written by hooks while the daemon could not be reached)."""
    try:
        with open(paths.spool_file(), "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return 0


def clip(text: str, n: int = 200) -> str:
    return text if len(text) <= n else text[:n] + "…"


def _read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()
