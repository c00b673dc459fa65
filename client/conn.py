"""Blocking RPC client for `autoharnessctl`: one request, one reply."""

import socket

import msgspec

from claude_autoharness.protocol import framing, paths
from claude_autoharness.protocol import messages as m

START_HINT = ("start it with `autoharnessctl start` (or `autoharnessctl service start` when it "
              "runs as a service)")


class DaemonUnreachable(Exception):
    """The daemon could not be reached, or did not answer."""


class DaemonNotRunning(DaemonUnreachable):
    """Nothing listens at the socket: the request certainly was not delivered."""


class DaemonError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message


def call(req: m.Request, *, timeout: float = 10.0, sock_path: str | None = None):
    """Send `req`; return the reply's data (Ok) or output (HookReply); raise on Error."""
    path = sock_path or paths.socket_path()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        try:
            s.connect(path)
        except (FileNotFoundError, ConnectionRefusedError):
            raise DaemonNotRunning(f"daemon not running (no socket at {path}): {START_HINT}") from None
        except OSError as e:
            raise DaemonUnreachable(f"cannot reach the daemon at {path}: {e}") from None
        try:
            s.sendall(framing.frame(m.encode(req)))
            body = framing.recv_frame(s, timeout)
        except (OSError, framing.FrameError) as e:
            raise DaemonUnreachable(f"the daemon at {path} did not answer: {e}") from None
    finally:
        s.close()
    try:
        reply = m.reply_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise DaemonError("protocol", f"unreadable reply: {e}") from None
    if isinstance(reply, m.Error):
        raise DaemonError(reply.code, reply.message)
    if isinstance(reply, m.HookReply):
        return reply.output
    return reply.data
