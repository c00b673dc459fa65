"""The daemon's process name: `autoharnessd`, whatever started it (`python3 -m
claude_autoharness.daemon`, the entry point, a service unit), so `pgrep autoharnessd`, `ps` and
`top` find it. Linux only (prctl, through ctypes: no dependency); elsewhere a no-op."""

from __future__ import annotations

import ctypes
import sys

NAME = b"autoharnessd"
_PR_SET_NAME = 15


def set_name(name: bytes = NAME) -> bool:
    """Set this process's name (at most 15 bytes are kept); True when it was set."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # the process's own symbols: libc's prctl
        return libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name[:15]), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
