"""Blocking RPC client for `autoharnessctl`: one request, one reply."""

import os
import socket

import msgspec

from ..protocol import VERSION, framing, paths, private
from ..protocol import messages as m
from ..protocol import replies as r

START_HINT = ("start it with `autoharnessctl start` (or `autoharnessctl service start` when it "
              "runs as a service)")
DEFAULT_TIMEOUT_S = 10.0


def start_hint() -> str:
    """What to do about a daemon that is not running: start it, unless something in the way
    would stop it starting (a file where its state or socket directory belongs), then that."""
    for d in (paths.state_dir(), paths.run_dir()):
        why = private.unusable_dir(d)
        if why:
            return f"it cannot start: {why}"
    return START_HINT
_timeout_s = DEFAULT_TIMEOUT_S


def set_timeout(seconds: float) -> None:
    """How long `call` waits for the daemon by default (`autoharnessctl --timeout`)."""
    global _timeout_s
    _timeout_s = seconds


class DaemonUnreachable(Exception):
    """The daemon could not be reached, or did not answer."""


class DaemonNotRunning(DaemonUnreachable):
    """Nothing listens at the socket: the request certainly was not delivered."""


class ForeignDaemon(DaemonUnreachable):
    """Another user's process listens at the socket: nothing was sent to it."""


class DaemonTimeout(DaemonUnreachable):
    """The daemon took the request (or the connection) but did not answer in time."""


class DaemonError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message


_TIMEOUT_HINT = ("it is busy or stuck; see `autoharnessctl doctor`, or wait longer with "
                 "--timeout SECONDS")


def typed(data: object, kind: type[r.T], req: m.Request) -> r.T:
    """A reply's data as the Struct protocol/replies/ defines for it; a daemon whose reply
    is of another shape (another version) is an error that says to restart it."""
    try:
        return r.decode(data, kind)
    except r.ReplyMismatch as e:
        theirs = data.get("version") if isinstance(data, dict) else None
        who = f"the daemon ({theirs})" if isinstance(theirs, str) else "the daemon"
        raise DaemonError("protocol", f"{who} answered `{type(req).__name__.lower()}` in a shape "
                          f"this client ({VERSION}) does not read: {e}; restart the daemon "
                          "(`autoharnessctl restart`)") from None


def ask(req: m.Request, kind: type[r.T], **kw) -> r.T:
    """`call`, with the reply's data decoded into its Struct (`typed`)."""
    return typed(call(req, **kw), kind, req)


def call(req: m.Request, *, timeout: float | None = None, sock_path: str | None = None):
    """Send `req`; return the reply's data (Ok) or output (HookReply); raise on Error.

    Only the user's own daemon is talked to: a peer of another uid raises ForeignDaemon
    before a byte is sent. Never waits longer than `timeout` (default: `set_timeout`'s, else
    DEFAULT_TIMEOUT_S) for the connection, and again for the reply; DaemonTimeout says which
    request waited.
    """
    path = sock_path or paths.socket_path()
    timeout = _timeout_s if timeout is None else timeout
    verb = type(req).__name__.lower()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        try:
            s.connect(path)
        except (FileNotFoundError, NotADirectoryError, ConnectionRefusedError):
            raise DaemonNotRunning(f"daemon not running (no socket at {path}): {start_hint()}") from None
        except TimeoutError:
            raise DaemonTimeout(f"waited {timeout:g} s to connect to the daemon at {path} "
                                f"for `{verb}`: {_TIMEOUT_HINT}") from None
        except OSError as e:
            raise DaemonUnreachable(f"cannot reach the daemon at {path}: {e}") from None
        uid = private.peer_uid(s)  # None: the system cannot say; fail open
        if uid is not None and uid != os.getuid():
            raise ForeignDaemon(
                f"the socket {path} is answered by another user (uid {uid}, not you: "
                f"{os.getuid()}); nothing was sent to it. Someone else can change a directory "
                "above it: point AUTOHARNESS_HOME (or XDG_RUNTIME_DIR) at a directory only you "
                "can write, then `autoharnessctl start`")
        try:
            s.sendall(framing.frame(m.encode(req)))
            body = framing.recv_frame(s, timeout)
        except TimeoutError:
            raise DaemonTimeout(f"waited {timeout:g} s for the daemon at {path} to answer "
                                f"`{verb}`: {_TIMEOUT_HINT}") from None
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
