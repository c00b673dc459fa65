"""The promoter's count files, typed: maps from a skill dir to what is counted, marked or
confirmed for it, read and replaced whole (`dirs.write_private`). They stay the plain JSON maps
older versions wrote (no checksum field: every key is a skill dir). One not of its type is
quarantined and reads as absent: the counts are advisory, they never block a landing.
"""

import contextlib
from typing import TypeVar

import msgspec

from . import quarantine
from .dirs import write_private

T = TypeVar("T")


class StaleMark(msgspec.Struct):
    """`stale.json`: a skill found naming paths that are gone, since a turn count."""

    since: int
    missing: list[str]


class Confirmation(msgspec.Struct):
    """`checks-confirmed.json`: the check rule of a lesson confirmed (by the user, or by a
    repeat), and when."""

    rule: str
    by: str | None = None
    at: float | None = None


Counts = dict[str, int]  # `uses.json`, `lifecycle.json`: skill dir -> uses, or turns at stamp
Synced = dict[str, dict[str, int]]  # `synced-counts.json`: skill dir -> counts of other machines
Stale = dict[str, StaleMark]
Confirmed = dict[str, Confirmation]


def load_map(path: str, type_: type[T]) -> T | None:
    """The map at `path`, None when there is none or it is not a `type_` (then quarantined)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    try:
        return msgspec.json.decode(data, type=type_)
    except msgspec.DecodeError:  # ValidationError included
        with contextlib.suppress(OSError):  # another thread set it aside first
            quarantine.set_aside(path, why="not a map of the promoter's")
        return None


def save_map(path: str, value: object) -> None:
    write_private(path, msgspec.json.encode(value, order="sorted"))
