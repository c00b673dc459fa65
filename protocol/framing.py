"""Length-prefixed frames: a 4-byte big-endian length, then that many bytes of JSON.

Stdlib only, so the hook client can frame without importing msgspec.
"""

from . import FRAME_HEADER

MAX_FRAME = 64 * 1024 * 1024  # a Write of a multi-MB file arrives whole in the hook payload
HEADER = FRAME_HEADER


class FrameError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def frame(body: bytes) -> bytes:
    if len(body) > MAX_FRAME:
        raise FrameError("too_large", f"frame of {len(body)} bytes exceeds MAX_FRAME {MAX_FRAME}")
    return len(body).to_bytes(HEADER, "big") + body


def frame_length(header: bytes) -> int:
    n = int.from_bytes(header, "big")
    if n > MAX_FRAME:
        raise FrameError("too_large", f"frame of {n} bytes exceeds MAX_FRAME {MAX_FRAME}")
    return n


def recv_frame(sock, timeout: float | None = None) -> bytes:
    """Blocking read of one frame from a connected socket (client side)."""
    if timeout is not None:
        sock.settimeout(timeout)
    n = frame_length(_recv_exact(sock, HEADER))
    return _recv_exact(sock, n)


def _recv_exact(sock, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise FrameError("closed", "connection closed mid-frame")
        buf += chunk
    return bytes(buf)
