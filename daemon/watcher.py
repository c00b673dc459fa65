"""Transcript watcher: tail every `.jsonl` under `$CLAUDE_CONFIG_DIR/projects`, feed indexers.

For each changed transcript only the bytes added since its last offset are read (at most
`max_bytes_per_pass` per pass, so one huge append cannot monopolise a worker thread) and handed,
as complete lines, to every indexer through one small interface (`Indexer`). Cost is proportional
to new bytes, not file size. Only regular files resolving inside the transcript roots are read
(`capture.source`): FIFOs, sockets, devices and symlinks leaving the roots are skipped. A file
that shrank or changed inode was rewritten: its indexers are reset and it is re-read from a
bounded tail.

The first indexer is `TranscriptIndex` (path → size, inode, mtime, last growth time). Offsets
and the index persist through `to_state()` / `from_state()` (the snapshot's typed `Watcher`
table), so a restart reads only what is new.

`scan_path` / `scan_until_done` are plain blocking functions (tests and benchmarks call them
directly); `run()` drives them from `watchfiles.awatch` with every read in a worker thread.
anyio and watchfiles are imported inside `run()` only.
"""

import copy
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import structlog

from .capture.source import (
    TranscriptRefused,
    open_transcript,
    stat_transcript,
    walk_transcripts,
)
from .persist import state as st

log = structlog.get_logger("autoharness.watcher")

MAX_BYTES_PER_PASS = 8 * 1024 * 1024
READ_CHUNK = 1024 * 1024
DEFAULT_LOOKBACK_S = 7 * 86_400
SUFFIX = ".jsonl"


class Indexer(Protocol):
    """What the watcher feeds. Implementations must be quick and must not block on I/O.

    Optional extras, called when an indexer defines them:
    `observe(path, st)` with the file's `os.stat_result` on every scan, and `forget(path)` when
    the file is deleted.
    """

    def feed(self, path: str, offset: int, data: bytes) -> object:
        """`data` is one or more complete lines (each ending in a newline) starting at `offset`.

        Whatever it returns (an indexer may count what it found) is ignored by the watcher.
        """

    def reset(self, path: str) -> None:
        """The file was rewritten (shrank or replaced): forget what was fed for it."""


# ---- the transcript index -------------------------------------------------------------------

TranscriptEntry = st.Transcript  # as the snapshot keeps it


class TranscriptIndex:
    """Every transcript the watcher has seen, with the facts the daemon needs about it."""

    def __init__(self, *, clock: Callable[[], float] = time.time):
        self.clock = clock
        self.entries: dict[str, TranscriptEntry] = {}
        self.bytes_indexed = 0
        self.last_event_at: float | None = None

    def _entry(self, path: str) -> TranscriptEntry:
        return self.entries.setdefault(path, TranscriptEntry())

    # -- Indexer --

    def feed(self, path: str, offset: int, data: bytes) -> None:
        now = self.clock()
        e = self._entry(path)
        e.bytes_indexed += len(data)
        e.size = max(e.size, offset + len(data))
        e.last_growth_at = now
        self.bytes_indexed += len(data)
        self.last_event_at = now

    def reset(self, path: str) -> None:
        e = self._entry(path)
        e.bytes_indexed = 0
        e.last_growth_at = self.last_event_at = self.clock()

    def observe(self, path: str, st: os.stat_result) -> None:
        e = self._entry(path)
        if st.st_size != e.size or st.st_ino != e.inode:
            e.last_growth_at = self.last_event_at = self.clock()
        e.size, e.inode, e.mtime = st.st_size, st.st_ino, st.st_mtime

    def forget(self, path: str) -> None:
        self.entries.pop(path, None)

    # -- queries --

    def get(self, path: str) -> TranscriptEntry | None:
        return self.entries.get(os.fspath(path))

    def stats(self) -> dict:
        """For `status --json`: {transcripts, bytes_indexed, last_event_at}."""
        return {"transcripts": len(self.entries), "bytes_indexed": self.bytes_indexed,
                "last_event_at": self.last_event_at}

    def to_state(self) -> st.Index:
        entries = {p: copy.copy(e) for p, e in self.entries.items()}  # the scans change these
        return st.Index(self.bytes_indexed, self.last_event_at, entries)

    def from_state(self, state: st.Index) -> None:
        self.bytes_indexed, self.last_event_at = state.bytes_indexed, state.last_event_at
        self.entries.update((p, copy.copy(e)) for p, e in state.entries.items())


# ---- the watcher ----------------------------------------------------------------------------

@dataclass
class _Tail:
    offset: int = 0
    inode: int = 0
    skipping: bool = False  # inside a line longer than a pass: skip to its end


def _jsonl_filter(change, path: str) -> bool:
    # transcripts, plus anything added (a new project or session directory must be walked:
    # files created in it before its watch was set up raise no event of their own)
    return path.endswith(SUFFIX) or int(change) == 1  # watchfiles.Change.added == 1


class TranscriptWatcher:
    """Tails transcripts under `projects_dir` and feeds `indexers` with their new lines."""

    def __init__(
        self,
        projects_dir: str | os.PathLike,
        indexers: Iterable[Indexer],
        *,
        clock: Callable[[], float] = time.time,
        max_bytes_per_pass: int = MAX_BYTES_PER_PASS,
        rewrite_tail_bytes: int | None = None,
        dir_poll_s: float = 2.0,
        sleep: Callable[[float], Awaitable[object]] | None = None,
        debounce_ms: int = 200,
        step_ms: int = 50,
        rust_timeout_ms: int = 5_000,
        force_polling: bool | None = None,
        roots: Iterable[str] | None = None,
    ):
        self.projects_dir = os.fspath(projects_dir)
        # what a listed file may resolve into (real paths); a symlink leaving them is skipped
        self.roots = list(roots) if roots is not None else [os.path.realpath(self.projects_dir)]
        self.refused: dict[str, str] = {}  # path -> why it is not read (logged once)
        self.indexers = list(indexers)
        self.clock = clock
        self.max_bytes_per_pass = max(1, int(max_bytes_per_pass))
        # a rewritten file is re-read from at most this far before its end
        self.rewrite_tail_bytes = (self.max_bytes_per_pass if rewrite_tail_bytes is None
                                   else max(0, int(rewrite_tail_bytes)))
        self.dir_poll_s = dir_poll_s
        self._sleep = sleep
        self.debounce_ms, self.step_ms = debounce_ms, step_ms
        self.rust_timeout_ms, self.force_polling = rust_timeout_ms, force_polling
        self._tails: dict[str, _Tail] = {}
        self.lock = threading.Lock()
        # counters (benchmarks, tests)
        self.bytes_read = 0
        self.bytes_fed = 0
        self.bytes_skipped = 0
        self.resets = 0
        self.indexer_errors = 0
        self.watching = False

    # -- blocking core (worker threads, tests) --

    def offset(self, path: str) -> int:
        t = self._tails.get(os.fspath(path))
        return t.offset if t else 0

    def _each(self, method: str, *args) -> None:
        for ix in self.indexers:
            fn = getattr(ix, method, None)
            if fn is None:
                continue
            try:
                fn(*args)
            except Exception:  # one broken indexer must not stop the others or the watcher
                self.indexer_errors += 1
                log.exception("indexer_failed", indexer=type(ix).__name__, method=method)

    def scan_path(self, path: str | os.PathLike) -> bool:
        """Read what was appended to `path` since its offset (one bounded pass) and feed it.

        Returns True when more complete data may remain (the pass hit its bound). Holds `lock`:
        the daemon copies the tables for its snapshot only between passes.
        """
        with self.lock:
            return self._scan_path(os.fspath(path))

    def _scan_path(self, path: str) -> bool:
        try:
            fd = open_transcript(path, self.roots)
        except FileNotFoundError:
            self.forget(path)
            return False
        except TranscriptRefused as e:
            self._refuse(path, e.reason)
            return False
        except OSError:
            return False
        self.refused.pop(path, None)
        try:
            st = os.fstat(fd)
            tail = self._tails.get(path)
            if tail is None:
                tail = self._tails[path] = _Tail(0, st.st_ino)
            elif tail.inode != st.st_ino or st.st_size < tail.offset:
                self._rewritten(fd, path, tail, st)
            self._each("observe", path, st)
            if st.st_size <= tail.offset:
                return False
            start = tail.offset
            stop = min(st.st_size, start + self.max_bytes_per_pass)
            bounded = stop - start == self.max_bytes_per_pass
            pos = feed_off = start  # feed_off: first byte neither fed nor skipped
            pending: list[bytes] = []  # a line begun in the pieces read, not finished yet
            while pos < stop:
                # 1 MiB reads: big allocations cost page faults, and indexers get cache-warm data
                piece = os.pread(fd, min(READ_CHUNK, stop - pos), pos)
                if not piece:
                    break
                piece_at, pos = pos, pos + len(piece)
                self.bytes_read += len(piece)
                if tail.skipping:
                    i = piece.find(b"\n")
                    if i < 0:
                        self.bytes_skipped += len(piece)
                        feed_off = pos
                        continue
                    self.bytes_skipped += i + 1
                    feed_off = piece_at + i + 1
                    piece = piece[i + 1:]
                    tail.skipping = False
                j = piece.rfind(b"\n")
                if j < 0:
                    pending.append(piece)
                    continue
                lines = piece if j == len(piece) - 1 else piece[: j + 1]
                if pending:
                    lines = b"".join(pending) + lines
                    pending = []
                self._each("feed", path, feed_off, lines)
                self.bytes_fed += len(lines)
                feed_off += len(lines)
                if j < len(piece) - 1:
                    pending.append(piece[j + 1:])
            if pending and bounded and feed_off == start:
                # one line longer than a whole pass: skip it rather than buffer it
                tail.skipping = True
                self.bytes_skipped += pos - start
                feed_off = pos
            tail.offset = feed_off  # a line still being written is read again next time
            return bounded
        finally:
            os.close(fd)

    def _inside(self, path: str) -> bool:
        """Whether `path`'s directory lies in the roots (the file itself may still be refused,
        and is then named in the log: a name in our own directory)."""
        d = os.path.realpath(os.path.dirname(path))
        return any(d == r or d.startswith(r.rstrip(os.sep) + os.sep) for r in self.roots)

    def _note_refusal(self, path: str, reason: str) -> None:
        """A FIFO, socket, device or symlink leaving the roots is never read; said once."""
        if self.refused.get(path) != reason:
            log.warning("transcript_refused", path=path, reason=reason)
        self.refused[path] = reason

    def _refuse(self, path: str, reason: str) -> None:
        self._note_refusal(path, reason)
        self.forget(path)

    def _rewritten(self, fd: int, path: str, tail: _Tail, st: os.stat_result) -> None:
        """Reset a rewritten file; re-read at most `rewrite_tail_bytes` of its end."""
        self.resets += 1
        self._each("reset", path)
        start = max(0, st.st_size - self.rewrite_tail_bytes)
        # starting mid-file: the first (partial) line is skipped unless a newline precedes it
        partial = start > 0 and os.pread(fd, 1, start - 1) != b"\n"
        tail.offset, tail.inode, tail.skipping = start, st.st_ino, partial

    def scan_until_done(self, path: str | os.PathLike) -> None:
        """`scan_path` until the file is caught up."""
        while self.scan_path(path):
            pass

    def forget(self, path: str | os.PathLike) -> None:
        path = os.fspath(path)
        if self._tails.pop(path, None) is not None:
            self._each("forget", path)

    def transcripts(self, lookback_s: float | None = None) -> list[str]:
        """Every transcript under the projects dir (modified within `lookback_s`), newest first."""
        found = []
        cutoff = None if lookback_s is None else self.clock() - lookback_s
        for p in walk_transcripts(self.projects_dir, self.roots):
            try:
                mtime = stat_transcript(p, self.roots).st_mtime
            except TranscriptRefused as e:
                self._note_refusal(p, e.reason)
                continue
            except OSError:
                continue
            if cutoff is None or mtime >= cutoff:
                found.append((mtime, p))
        found.sort(reverse=True)
        return [p for _, p in found]

    # -- persistence --

    def to_state(self) -> st.Tails:
        return st.Tails({p: st.Tail(t.offset, t.inode) for p, t in self._tails.items()})

    def from_state(self, state: st.Tails) -> None:
        for path, t in state.files.items():
            self._tails[path] = _Tail(max(0, t.offset), t.inode)

    # -- async driver --

    async def _wait(self, stop_event, seconds: float) -> None:
        import anyio

        if self._sleep is not None:
            await self._sleep(seconds)
            return
        with anyio.move_on_after(seconds):
            await stop_event.wait()

    async def run(self, stop_event, *, lookback_s: float = DEFAULT_LOOKBACK_S) -> None:
        """Watch until `stop_event` is set. Waits for the projects dir to exist (polling every
        `dir_poll_s`), catches up on the `transcripts` touched within `lookback_s` (newest first,
        files known from the state from their offsets) in the background, then follows changes.
        If the directory disappears, goes back to waiting for it."""
        import anyio

        lock = anyio.Lock()  # one scan at a time: the tails are not thread-safe
        while not stop_event.is_set():
            if not await anyio.to_thread.run_sync(os.path.isdir, self.projects_dir):
                await self._wait(stop_event, self.dir_poll_s)
                continue
            try:
                await self._watch(stop_event, lookback_s, lock)
            except Exception:  # a watch failure must not take the daemon down: retry later
                log.exception("watch_failed", projects_dir=self.projects_dir)
                self.watching = False
                await self._wait(stop_event, self.dir_poll_s)
            self.watching = False

    async def _watch(self, stop_event, lookback_s: float, lock) -> None:
        import anyio
        from watchfiles import awatch

        async with anyio.create_task_group() as tg:
            # starts once awatch has set its watch up (it does so before its first await),
            # so every file is either listed by the catch-up or raises an event
            tg.start_soon(self._catch_up, stop_event, lookback_s, lock)
            async for changes in awatch(
                self.projects_dir, watch_filter=_jsonl_filter, stop_event=stop_event,
                recursive=True, debounce=self.debounce_ms, step=self.step_ms,
                rust_timeout=self.rust_timeout_ms, yield_on_timeout=True,
                force_polling=self.force_polling,
            ):
                if not await anyio.to_thread.run_sync(os.path.isdir, self.projects_dir):
                    break  # the directory went away: wait for it again
                if changes:
                    await self._handle(changes, lock)
            tg.cancel_scope.cancel()

    async def _catch_up(self, stop_event, lookback_s: float, lock) -> None:
        import anyio

        self.watching = True
        paths = await anyio.to_thread.run_sync(self.transcripts, lookback_s)
        for p in paths:
            if stop_event.is_set():
                return
            async with lock:
                await anyio.to_thread.run_sync(self.scan_until_done, p)

    def _changed(self, changes: set) -> list[str]:
        """The transcripts a batch of changes names (blocking: a new directory is walked)."""
        paths: list[str] = []
        for change, path in changes:
            if not self._inside(path):
                continue  # a watch that followed a link out: not ours to read or name
            if path.endswith(SUFFIX):
                paths.append(path)
            elif int(change) == 1 and os.path.isdir(path):
                # a new directory: its files may predate the watch on it
                paths += walk_transcripts(path, self.roots)
        return paths

    async def _handle(self, changes: set, lock) -> None:
        import anyio

        paths = await anyio.to_thread.run_sync(self._changed, changes)
        for p in dict.fromkeys(paths):
            async with lock:
                await anyio.to_thread.run_sync(self.scan_until_done, p)
