"""The transcript as the second witness of tool calls.

An indexer on the transcript watcher: from every main transcript it collects the `tool_use`
blocks of the main chain's assistant records (`isSidechain` records and the files under
`subagents/` are subagents' work, whose calls the hook reports with the parent's session id),
as (tool_use_id, record time). The daemon takes them on its loop and counts those no PreToolUse
counted (`sessions.transcript_calls`), so a call whose hook event never arrived still counts,
once. It leaves out what the hook path does not count either: a Bash call of `autoharnessctl
learn` (`sessions.is_learn_call`), and subagents' calls (never in the main chain).

`feed` runs in the watcher's worker thread; `take` on the event loop: a lock hands over.
"""

import datetime
import os
import threading
import time
from collections.abc import Callable

from .capture.records import main_assistant
from .sessions import is_learn_call

MAX_PENDING = 100_000  # calls held for the daemon; beyond this (no one takes them) drop oldest


_SUBAGENTS = os.sep + "subagents" + os.sep


def tool_uses(data: bytes, *, default_time: float) -> list[tuple[str, float]]:
    """(tool_use_id, time) of each main-chain tool_use block in complete JSONL `data`."""
    if b'"tool_use"' not in data:
        return []
    out = []
    for line in data.split(b"\n"):
        if b'"tool_use"' not in line or b'"assistant"' not in line:
            continue
        rec = main_assistant(line)
        if rec is None or rec.message is None or not isinstance(rec.message.content, list):
            continue
        at = _epoch(rec.timestamp, default_time)
        out += [(b.id, at) for b in rec.message.content if b.type == "tool_use" and b.id
                and not is_learn_call(b.name, b.input)]
    return out


def _epoch(stamp: object, default: float) -> float:
    try:
        return datetime.datetime.fromisoformat(stamp).timestamp() if isinstance(stamp, str) \
            else default
    except ValueError:
        return default


class ToolUseWitness:
    """Watcher indexer: main-chain tool calls per transcript path, until the daemon takes them."""

    def __init__(self, *, clock: Callable[[], float] = time.time):
        self.clock = clock
        self._lock = threading.Lock()
        self._found: dict[str, list[tuple[str, float]]] = {}
        self._held = 0

    def feed(self, path: str, offset: int, data: bytes) -> None:
        if _SUBAGENTS in path:
            return
        calls = tool_uses(data, default_time=self.clock())
        if not calls:
            return
        with self._lock:
            self._found.setdefault(path, []).extend(calls)
            self._held += len(calls)
            if self._held > MAX_PENDING:  # nobody is taking them (no loop): keep memory bounded
                self._found.clear()
                self._held = 0

    def reset(self, path: str) -> None:
        """A rewritten transcript is read again: calls already counted are known by id."""

    def take(self) -> dict[str, list[tuple[str, float]]]:
        with self._lock:
            found, self._found, self._held = self._found, {}, 0
        return found
