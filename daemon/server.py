"""The RPC listener: framing, the peer check, timeouts and a per-connection error boundary.

An exception escaping one connection handler would stop `serve()` for everyone, so each
connection is wrapped. Every malformed request gets a typed `Error` reply and is counted as
received and rejected: an oversized or truncated frame, JSON nested too deep to decode, an
unknown request type (`retry` false: the same bytes would be refused again, so a hook does not
spool them), or a protocol version other than this daemon's (worth retrying after a restart).
Accepting, the connection cap and descriptor exhaustion live in `listener`.

The server knows three things of the daemon: how to answer a request (`dispatch`), where to
count what it refused (`ConnectionCounters`), and what to call once a reply is sent (`replied`,
which stops the daemon after a `stop` request).
"""

import os
import socket
import struct
import sys
from collections.abc import Awaitable, Callable
from typing import Protocol

import anyio
import msgspec
import structlog
from anyio.abc import SocketAttribute, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from ..protocol import PROTOCOL, framing
from ..protocol import messages as m
from .listener import Connection, FrameBudget

log = structlog.get_logger("autoharness")

BODY_TIMEOUT_S = 30.0  # a client that stalls before sending its whole frame is dropped


def peer_uid(sock: socket.socket) -> int | None:
    """The connecting process's uid (SO_PEERCRED on Linux, LOCAL_PEERCRED on macOS/BSD)."""
    if hasattr(socket, "SO_PEERCRED"):
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", raw)[1]
    if sys.platform == "darwin" or "bsd" in sys.platform:
        local_peercred = 0x001  # struct xucred: u_int version, uid_t uid, short ngroups, ...
        raw = sock.getsockopt(0, local_peercred, struct.calcsize("2I"))
        return struct.unpack("2I", raw[:8])[1]
    return None


def decode_request(body: bytes | bytearray) -> m.Request | m.Error:
    """The request in `body`, or the typed error to answer instead."""
    try:
        req = m.request_decoder.decode(body)
    except RecursionError:
        return m.Error(code="too_deep", message="request nested too deeply to decode",
                       retry=False)
    except msgspec.ValidationError as e:
        if "`$.type`" in str(e):
            return m.Error(code="unknown_type", message=_short(f"unknown request type: {e}"),
                           retry=False)
        return m.Error(code="malformed", message=_short(str(e)), retry=False)
    except msgspec.DecodeError as e:
        return m.Error(code="malformed", message=_short(str(e)), retry=False)
    if req.v != PROTOCOL:
        return m.Error(code="protocol_version", message=version_mismatch(req.v))
    return req


def version_mismatch(client_v: int) -> str:
    return (f"protocol version mismatch: the client speaks protocol {client_v}, this daemon "
            f"protocol {PROTOCOL}; restart the daemon after an upgrade "
            "(`autoharnessctl service stop`, then `autoharnessctl service start`)")


class ConnectionCounters(Protocol):
    def peer_rejected(self) -> None: ...

    def request_rejected(self) -> None:
        """A bad frame, or a frame that is no request this daemon serves."""
        ...


class Server:
    def __init__(self, dispatch: Callable[[m.Request], Awaitable[m.Reply]],
                 counters: ConnectionCounters, *, replied: Callable[[], None] = lambda: None):
        self.dispatch = dispatch
        self.counters = counters
        self.replied = replied
        self.uid = os.getuid()
        self.frames = FrameBudget()

    async def handle(self, conn: Connection) -> None:
        try:
            async with conn.stream:
                await self._serve(conn)
        except Exception as e:  # the boundary: one bad client never stops the listener
            log.warning("connection error", error=type(e).__name__)

    async def _reply(self, stream: SocketStream, reply: m.Reply) -> None:
        await stream.send(framing.frame(m.encode(reply)))

    def _reject(self, code: str) -> None:
        self.counters.request_rejected()
        log.info("request rejected", code=code)

    async def _serve(self, conn: Connection) -> None:
        stream = conn.stream
        sock = stream.extra(SocketAttribute.raw_socket)
        uid = peer_uid(sock)
        if uid is not None and uid != self.uid:
            self.counters.peer_rejected()
            log.warning("peer rejected", peer_uid=uid)
            await self._reply(stream, m.Error(code="peer", message="connection from another user refused"))
            return
        # One request per connection: the hook and the CLI both connect, ask once, and close.
        reader = BufferedByteReceiveStream(stream)
        try:
            with anyio.fail_after(BODY_TIMEOUT_S):
                header = await reader.receive_exactly(framing.HEADER)
                n = framing.frame_length(header)
                async with self.frames.hold(n):  # a large frame waits for its share of memory
                    body = await _receive_into(reader, n)
        except framing.FrameError as e:
            self._reject(e.code)  # the same frame would be refused again
            await self._reply(stream, m.Error(code=e.code, message=e.message, retry=False))
            return
        except (anyio.EndOfStream, anyio.IncompleteRead, TimeoutError):
            return  # abandoned or too slow: nothing was accepted, nothing to answer
        conn.idle = False  # from here on the client waits for us: never dropped as idle
        req = decode_request(body)
        if isinstance(req, m.Error):
            self._reject(req.code)
            await self._reply(stream, req)
            return
        try:
            reply = await self.dispatch(req)
        except Exception as e:
            log.exception("request failed", request=type(req).__name__)
            reply = m.Error(code="internal", message=f"{type(e).__name__}: {_short(str(e))}")
        await self._reply(stream, reply)
        self.replied()


async def _receive_into(reader: BufferedByteReceiveStream, n: int) -> bytearray:
    """Exactly `n` bytes, read into one buffer of that size (no growing copies)."""
    body = bytearray(n)
    view, got = memoryview(body), 0
    while got < n:
        chunk = await reader.receive(min(n - got, 1 << 16))
        view[got:got + len(chunk)] = chunk
        got += len(chunk)
    return body


def _short(text: str, n: int = 300) -> str:
    return text if len(text) <= n else text[:n] + "…"
