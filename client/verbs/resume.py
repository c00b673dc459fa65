"""`autoharnessctl resume`: undo `pause`; hooks count again."""

from __future__ import annotations

from claude_autoharness.client.conn import ask
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol import replies as r


def add_parser(sub) -> None:
    s = sub.add_parser("resume", help="undo pause")
    s.set_defaults(func=do_resume)


def do_resume(args) -> int:
    ask(m.Pause(paused=False), r.Paused)
    print("resumed: hooks count again")
    return 0
