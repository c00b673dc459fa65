"""`autoharnessctl resume`: undo `pause`; hooks count again."""

from __future__ import annotations

from ...protocol import messages as m
from ...protocol import replies as r
from ..conn import ask


def add_parser(sub) -> None:
    s = sub.add_parser("resume", help="undo pause")
    s.set_defaults(func=do_resume)


def do_resume(args) -> int:
    ask(m.Pause(paused=False), r.Paused)
    print("resumed: hooks count again")
    return 0
