"""`autoharnessctl pause`: hooks count nothing until `resume`."""

from __future__ import annotations

from ...protocol import messages as m
from ...protocol import replies as r
from ..conn import ask


def add_parser(sub) -> None:
    s = sub.add_parser("pause", help="make hooks count nothing until resume")
    s.set_defaults(func=do_pause)


def do_pause(args) -> int:
    ask(m.Pause(paused=True), r.Paused)
    print("paused: hooks count nothing until `autoharnessctl resume`")
    return 0
