"""The contract shared by the daemon and its clients (stdlib + msgspec only).

This module itself imports nothing: the hook client imports `claude_autoharness.protocol.paths`
on every tool call and must not pay for msgspec.
"""

VERSION = "0.1.0"
PROTOCOL = 1
FRAME_HEADER = 4  # bytes of big-endian length before each frame's JSON (see framing.py)
