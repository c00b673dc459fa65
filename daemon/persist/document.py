"""Typed documents replaced whole: the daemon's snapshot, the batch journal, a project's
learnings state. A write is atomic (the old file or the new one, never half) and 0600, and
sealed (`checksum`); a document whose checksum fails or that does not decode as its type is
quarantined, never fatal, and the previous version (when one is kept) read instead. One an
older version wrote, unsealed, is read as it is; the next save seals it."""

import contextlib
from typing import TypeVar

import msgspec

from . import quarantine
from .checksum import check, seal
from .dirs import write_private

T = TypeVar("T")


def load(path: str, type_: type[T], *, previous: str | None = None) -> T | None:
    """The document at `path` (else at `previous`); None when neither exists or decodes. One
    that does not decode is set aside in the quarantine. Other OSErrors are raised."""
    for candidate in (path, previous) if previous else (path,):
        try:
            with open(candidate, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            continue
        if check(data) is False:
            quarantine.set_aside(candidate, why="checksum does not match")
            continue
        try:
            return msgspec.json.decode(data, type=type_)
        except msgspec.DecodeError:  # ValidationError included
            quarantine.set_aside(candidate, why=f"not a {type_.__name__}")
    return None


def save(path: str, value: object, *, previous: str | None = None) -> None:
    """Replace the document (0600), the one replaced kept as `previous` if named; never into a
    state dir swapped since start."""
    write_private(path, seal(msgspec.json.encode(value)), previous=previous)


def load_or_set_aside(path: str, type_: type[T]) -> T | None:
    """`load`, for a document the daemon can do without: one it cannot even read (a directory
    in its place, no permission) is set aside as well, never fatal."""
    try:
        return load(path, type_)
    except OSError:
        with contextlib.suppress(OSError):
            quarantine.set_aside(path, why="unreadable")
        return None
