"""The transcript records already handed to a reflector, known by their `uuid`: durable, bounded.

A forked session (`claude --resume ID --fork-session`) gets a new session id and a new
transcript that begins with copies of its parent's records: same `uuid` and `timestamp`, a new
`sessionId`. Its first window would hand the reflector history it already had. So once a window
is reflected the uuids of its records are added here, and later windows of any session leave
those records out (`capture.window.cut_window(reflected=...)`).

Each uuid is kept as a 64-bit key (blake2b), the newest `MAX_KEPT` of them: in memory a set and
their order, on disk an append-only file of 8-byte keys (0600, `persist.files.AppendFile`),
rewritten down to the newest `MAX_KEPT` once it holds twice as many. A torn or lost tail (a
crash) only means a record may be reflected a second time: never a lesson lost. With a million
keys the odds that a new record's key collides with one of them are about 1 in 10^13.

`add` does blocking I/O (call it from a worker thread); `in` is safe from any thread.
"""

import array
import hashlib
import os
import sys
import threading
from collections import deque
from collections.abc import Iterable

import structlog

from ..protocol import paths
from .persist.dirs import recheck_dir, write_private
from .persist.files import append_durably

log = structlog.get_logger("autoharness")

MAX_KEPT = 65_536  # about 300 windows of typical records; a file of at most 1 MiB
KEY_BYTES = 8


def key_of(uuid: str) -> int:
    return int.from_bytes(hashlib.blake2b(uuid.encode(), digest_size=KEY_BYTES).digest(), "little")


class ReflectedRecords:
    def __init__(self, path: str | None = None, *, max_kept: int = MAX_KEPT):
        self.path = path or paths.reflected_file()
        self.max_kept = max(1, max_kept)
        self._lock = threading.Lock()
        self._keys: set[int] = set()
        self._order: deque[int] = deque()
        self._on_disk = 0  # keys in the file (it may hold up to twice max_kept)

    def __contains__(self, uuid: object) -> bool:
        return isinstance(uuid, str) and key_of(uuid) in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def load(self) -> None:
        """The keys the last run left (the newest `max_kept`); a missing file is an empty set,
        an unreadable one is reported and started afresh."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        except OSError as e:
            log.warning("reflected records unreadable", file=self.path, error=e.strerror)
            return
        keys = array.array("Q")
        keys.frombytes(data[: len(data) - len(data) % KEY_BYTES])  # a torn last key is dropped
        if sys.byteorder != "little":
            keys.byteswap()
        with self._lock:
            self._keys.clear()
            self._order.clear()
            for k in keys[-self.max_kept:]:
                self._remember(k)
            self._on_disk = len(keys)

    def add(self, uuids: Iterable[str]) -> int:
        """Remember these records as reflected (durably: appended and fsynced); returns how many
        were new. Raises OSError when the file cannot be written (the memory keeps them)."""
        with self._lock:
            new = []
            for u in uuids:
                k = key_of(u)
                if k not in self._keys:
                    self._remember(k)
                    new.append(k)
            if not new:
                return 0
            if self._on_disk + len(new) > 2 * self.max_kept:
                self._rewrite()
            else:
                self._append(new)
            return len(new)

    def _remember(self, k: int) -> None:
        self._keys.add(k)
        self._order.append(k)
        while len(self._order) > self.max_kept:
            self._keys.discard(self._order.popleft())

    def _encode(self, keys: Iterable[int]) -> bytes:
        out = array.array("Q", keys)
        if sys.byteorder != "little":
            out.byteswap()
        return out.tobytes()

    def _append(self, keys: list[int]) -> None:
        recheck_dir(os.path.dirname(os.path.abspath(self.path)))  # never into a swapped state dir
        append_durably(self.path, self._encode(keys), unit=KEY_BYTES)  # a torn tail cut off
        self._on_disk += len(keys)

    def _rewrite(self) -> None:
        write_private(self.path, self._encode(self._order))
        self._on_disk = len(self._order)
