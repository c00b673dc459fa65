"""The accept loop: a cap on open connections, and survival when descriptors run out.

Every client connection holds a descriptor until it closes. Idle clients (connected, request
not sent) could otherwise pile up until `accept` fails with EMFILE and the daemon can neither
answer nor open its own files. So:

* the daemon raises its soft `RLIMIT_NOFILE` to the hard limit at start;
* open connections are capped at the configured `max_connections`, or fewer when the descriptor
  limit leaves less after `RESERVE_FDS` (the journal, snapshots, transcripts, the watcher);
  past the cap the oldest idle connection is dropped to make room;
* EMFILE/ENFILE (or any other failure) on `accept` drops the oldest idle connection too, is
  logged once per burst, and `accept` is retried with a growing backoff: the listener never
  stops while its socket lives;
* memory per connection is bounded too: a request frame up to `SMALL_FRAME` is read as it
  comes, a larger one only once the daemon-wide `FrameBudget` grants its size (a client
  waiting for it is held by its socket, its bytes unread, until the body timeout drops it).
  Many clients sending large frames never take more than the budget between them, and small
  requests (`status`, most hooks) never wait for it.
"""

import contextlib
import errno
import resource
import time
from collections.abc import AsyncIterator

import anyio
import structlog
from anyio.abc import SocketListener, SocketStream

from ..protocol.framing import MAX_FRAME

log = structlog.get_logger("autoharness")

RESERVE_FDS = 64
BACKOFF_MIN_S = 0.005
BACKOFF_MAX_S = 0.5
BURST_GAP_S = 5.0
OUT_OF_FDS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


SMALL_FRAME = 64 * 1024
LARGE_FRAMES_BYTES = 2 * MAX_FRAME  # the largest frame can always be read, two at once


class FrameBudget:
    """The bytes that frames larger than SMALL_FRAME may hold while being read, daemon-wide.
    `hold(n)` waits until `n` bytes are free and keeps them until its block ends; on the event
    loop only."""

    def __init__(self, total: int = LARGE_FRAMES_BYTES):
        self.total = total
        self.free = total
        self._freed = anyio.Event()

    @contextlib.asynccontextmanager
    async def hold(self, n: int) -> AsyncIterator[None]:
        if n <= SMALL_FRAME:
            yield
            return
        n = min(n, self.total)
        while self.free < n:
            await self._freed.wait()
        self.free -= n
        try:
            yield
        finally:
            self.free += n
            self._freed.set()  # every waiter looks again; the next wait takes a fresh event
            self._freed = anyio.Event()


def raise_fd_limit() -> int:
    """Raise the soft descriptor limit to the hard one (as far as the OS lets us); return the
    soft limit in force afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        for want in (target, 1 << 16, 10_240):  # macOS refuses more than its own OPEN_MAX
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, target), hard))
                break
            except (ValueError, OSError):
                continue
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def connection_cap(configured: int, fd_limit: int, reserve: int = RESERVE_FDS) -> int:
    """Open connections allowed: the configured cap, or what the descriptor limit leaves after
    the reserve if that is less (never below 1)."""
    if fd_limit == resource.RLIM_INFINITY or fd_limit <= 0:
        return max(1, configured)
    return max(1, min(configured, fd_limit - reserve))


class Connection:
    """One client connection: idle until its request has been read; `drop()` ends it."""

    def __init__(self, stream: SocketStream):
        self.stream = stream
        self.idle = True
        self.scope = anyio.CancelScope()

    def drop(self) -> None:
        self.scope.cancel()


class Connections:
    """The open connections, oldest first."""

    def __init__(self, cap: int):
        self.cap = cap
        self.open: dict[int, Connection] = {}  # insertion order = age
        self.dropped = 0

    def __len__(self) -> int:
        return len(self.open)

    def add(self, conn: Connection) -> None:
        self.open[id(conn)] = conn

    def remove(self, conn: Connection) -> None:
        self.open.pop(id(conn), None)

    def drop_oldest_idle(self) -> bool:
        """Drop the oldest connection still waiting for its request; False if none is idle."""
        for key, conn in self.open.items():
            if conn.idle:
                del self.open[key]
                conn.drop()
                self.dropped += 1
                return True
        return False

    def stats(self) -> dict:
        return {"open": len(self.open), "cap": self.cap, "dropped_idle": self.dropped}


async def accept_loop(listener: SocketListener, conns: Connections, handle) -> None:
    """Accept forever, starting `handle(conn)` for each connection in its own task.

    Out of descriptors: drop the oldest idle connection, back off, retry; said once per burst
    (a burst ends after `BURST_GAP_S` without a failed accept).
    """
    backoff = 0.0
    last_failure = -BURST_GAP_S
    async with anyio.create_task_group() as tg:
        while True:
            try:
                stream = await listener.accept()
            except (anyio.BrokenResourceError, OSError) as e:
                cause = e if isinstance(e, OSError) else e.__cause__
                if cause is None:
                    raise  # the listening socket itself is broken
                now = time.monotonic()
                if now - last_failure >= BURST_GAP_S:
                    log.warning("accept failed: dropping idle connections and retrying",
                                error=errno.errorcode.get(getattr(cause, "errno", 0) or 0, str(cause)),
                                open=len(conns), out_of_descriptors=_out_of_fds(cause))
                last_failure = now
                conns.drop_oldest_idle()
                backoff = min(BACKOFF_MAX_S, max(BACKOFF_MIN_S, backoff * 2))
                await anyio.sleep(backoff)
                continue
            backoff = 0.0
            conn = Connection(stream)
            if len(conns) >= conns.cap:
                conns.drop_oldest_idle()
            conns.add(conn)
            tg.start_soon(_run, conns, conn, handle)


def _out_of_fds(e: BaseException) -> bool:
    return getattr(e, "errno", None) in OUT_OF_FDS


async def _run(conns: Connections, conn: Connection, handle) -> None:
    try:
        with conn.scope:
            await handle(conn)
    finally:
        conns.remove(conn)
        await _close(conn.stream)


async def _close(stream: SocketStream) -> None:
    with anyio.CancelScope(shield=True):
        try:
            await stream.aclose()
        except Exception:
            pass
