"""The promoter's count files, typed: maps from a skill dir to what is counted or marked for
it, each read and replaced whole (0600, atomically, never into a state dir swapped since
start). The files stay the plain JSON maps older versions wrote (no checksum field: every key
is a skill dir). One that does not decode as its type is quarantined and reads as absent: the
counts are advisory (a lost one restarts a probation), they never block a landing.
"""

import contextlib
from typing import TypeVar

import msgspec

from claude_autoharness.daemon.persist import quarantine
from claude_autoharness.daemon.persist.dirs import write_private

T = TypeVar("T")


class StaleMark(msgspec.Struct):
    """`stale.json`: a skill found naming paths that are gone, since a turn count."""

    since: int
    missing: list[str]


Counts = dict[str, int]  # `uses.json`, `lifecycle.json`: skill dir -> uses, or turns at stamp
Synced = dict[str, dict[str, int]]  # `synced-counts.json`: skill dir -> counts of other machines
Stale = dict[str, StaleMark]


def load_map(path: str, type_: type[T], what: str) -> T | None:
    """The map at `path`, None when there is none or it is not a `type_` (then quarantined,
    `what` saying which file it was)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    try:
        return msgspec.json.decode(data, type=type_)
    except msgspec.DecodeError:  # ValidationError included
        with contextlib.suppress(OSError):  # another thread set it aside first
            quarantine.set_aside(path, why=f"not {what}")
        return None


def save_map(path: str, value: object) -> None:
    write_private(path, msgspec.json.encode(value, order="sorted"))
