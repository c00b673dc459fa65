"""Typed append-only journals: JSON lines, each a record of a msgspec tagged union whose tag
field is `op`. A record type is the union of its kinds (`Event | Calls | ...`).

Every line is sealed (`checksum`: its last field is its CRC32), so a flipped byte or an
edited value is found on load. A line that fails its check or does not decode as one of the
kinds (torn by a crash, garbage, a kind a later version added) is never loaded: it is skipped
and its file copied to the quarantine (status and doctor name it), so nothing readable is
lost. Lines older versions wrote carry no checksum: they are read as legacy only where an old
version could have written them, ahead of the first sealed line read (a flip in a seal's own
bytes makes a line look unsealed: after a sealed one it is damage). What legacy lines hold is
written sealed at the next snapshot or compaction.

Two shapes:
- `Journal`: the daemon state's journal, in segments. Appends are one `write()` each (page
  cache) and fsynced in batches (`sync`); every record carries a `seq`.
- `RecordLog`: one file whose every append is fsynced before it returns, compacted by an atomic
  rewrite (the intent queue).
"""

import os
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Generic, TypeVar

import msgspec

from ...protocol import paths
from . import quarantine
from .checksum import check, seal
from .dirs import recheck_dir
from .files import AppendFile, append_durably, fsync_dir, write_atomic

encoder = msgspec.json.Encoder()


class Sequenced(msgspec.Struct, kw_only=True, omit_defaults=True, tag_field="op"):
    """A record of a `Journal`: its place in the journal and when it was appended."""

    seq: int = 0
    at: float = 0.0


S = TypeVar("S", bound=Sequenced)
R = TypeVar("R")


def encode_lines(records: Iterable[object]) -> bytes:
    return b"".join(seal(encoder.encode(rec)) + b"\n" for rec in records)


class Lines:
    """Reads the lines of one journal, in order, across its files: a line is loaded only when
    its seal holds, or when it is unsealed and no sealed line came before it (legacy)."""

    def __init__(self, decoder: msgspec.json.Decoder):
        self.decoder = decoder
        self.sealed = False  # a sealed line was read: from here on, every line must be
        self.legacy = 0  # unsealed lines accepted as an older version's

    def read(self, path: str) -> tuple[list, list[str]]:
        """The records of the file and what is wrong with each line that was not loaded
        (blank lines are neither). Raises FileNotFoundError for a missing file."""
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
        out, bad = [], []
        for n, line in enumerate(lines, 1):
            if not line or line.isspace():
                continue
            ok = check(line)
            if ok is False or (ok is None and self.sealed):
                bad.append(f"line {n}: checksum does not match" if ok is False
                           else f"line {n}: no checksum after checked lines")
                continue
            try:
                rec = self.decoder.decode(line)
            except msgspec.DecodeError:  # ValidationError included
                bad.append(f"line {n}: unreadable")
                continue
            if ok:
                self.sealed = True
            else:
                self.legacy += 1
            out.append(rec)
        return out, bad


def damage(bad: list[str]) -> str:
    """One line saying which lines were set aside and why (the first few)."""
    more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
    return f"{len(bad)} damaged line(s): " + "; ".join(bad[:3]) + more


class Journal(Generic[S]):
    """Append-only JSONL in segments: `path` is appended to; `rotate` (when a snapshot is
    taken) closes it as `<stem>.<last seq>.jsonl` and starts an empty one, and segments a
    snapshot no longer needs are deleted, whole: nothing is ever copied. Replay reads the
    segments, oldest first, then `path` (a journal of one file, as older versions wrote, reads
    the same).

    `append` is one `write()` (the event loop calls it: page cache, no fsync); `sync` fsyncs
    from a worker thread. The lock orders appends against `sync` picking up the file. An
    append that fails (a full disk) leaves no partial line (`AppendFile`) and raises; its
    record is written ahead of the next one that has room, so records stay whole and in
    order."""

    def __init__(self, path: str, record_type: object):
        self.path = path
        self.seq = 0
        self.file = AppendFile(path)
        self.appended = 0  # bytes in the journal since the last rotation
        self._decoder = msgspec.json.Decoder(record_type)
        self._lock = threading.Lock()
        self._unsynced = False
        self._unsynced_dir = False  # a rotation renamed and created files
        self._closed: list[AppendFile] = []  # rotated away, not fsynced yet
        self._unwritten: list[bytes] = []  # records a failed append kept, oldest first
        self.damaged = 0  # lines the last replay skipped as damaged
        self.legacy = 0  # unsealed lines (an older version's) the last replay loaded

    def open(self) -> None:
        recheck_dir(os.path.dirname(self.path))
        self.file.open()
        self.appended = self.file.size + sum(os.path.getsize(p) for _, p in self.segments())

    def close(self) -> None:
        with self._lock:
            for f in self._closed:
                f.close()
            self._closed.clear()
            self.file.close()

    def append(self, rec: S) -> int:
        """Give `rec` the next seq and the time, and append it; return its seq."""
        with self._lock:
            self.seq += 1
            rec.seq, rec.at = self.seq, time.time()
            # A record a failed append could not write goes first: the caller's state already
            # holds its change, so the post-states recorded after it carry that change too.
            self._unwritten.append(seal(encoder.encode(rec)) + b"\n")
            n = self.file.append(b"".join(self._unwritten))
            self._unwritten.clear()
            self.appended += n
            self._unsynced = True
            return self.seq

    def sync(self) -> None:
        """fsync what was appended (batched: the daemon calls this every fsync_interval_s),
        segments rotated away since the last sync, and the directory after a rotation."""
        with self._lock:
            if not self._unsynced or self.file.fd is None:
                return
            closed, self._closed = self._closed, []
            fd, self._unsynced = os.dup(self.file.fd), False  # fsync unlocked: appends go on
            dir_too, self._unsynced_dir = self._unsynced_dir, False
        try:
            for f in closed:
                try:
                    f.sync()
                finally:
                    f.close()
            os.fsync(fd)
            if dir_too:
                fsync_dir(os.path.dirname(os.path.abspath(self.path)))
        except BaseException:
            with self._lock:
                self._unsynced = True
                self._unsynced_dir = self._unsynced_dir or dir_too
            raise
        finally:
            os.close(fd)

    def segments(self) -> list[tuple[int, str]]:
        """(last seq, path) of each closed segment, oldest first."""
        d = os.path.dirname(os.path.abspath(self.path))
        stem, ext = os.path.splitext(os.path.basename(self.path))
        out = []
        try:
            names = os.listdir(d)
        except FileNotFoundError:
            return []
        for name in names:
            middle = name[len(stem) + 1:-len(ext)] if name.startswith(stem + ".") \
                and name.endswith(ext) else ""
            seq, _, extra = middle.partition(".")
            if seq.isdigit() and (not extra or extra.isdigit()):
                out.append((int(seq), os.path.join(d, name)))
        return sorted(out)

    def rotate(self) -> None:
        """Close the file as a segment named by its last record's seq and start an empty one
        (on the loop, between appends: a snapshot encoded just now covers the whole segment).
        Cheap: two renames' worth of metadata; the old file is fsynced by the next `sync`."""
        with self._lock:
            if self.file.size == 0 or self.file.fd is None:
                return
            stem, ext = os.path.splitext(self.path)
            seg = f"{stem}.{self.seq:020d}{ext}"
            n = 0
            while os.path.lexists(seg):  # never replace a segment (the same seq twice)
                n += 1
                seg = f"{stem}.{self.seq:020d}.{n}{ext}"
            recheck_dir(os.path.dirname(self.path))
            os.rename(self.path, seg)
            fresh = AppendFile(self.path)
            try:
                fresh.open()
            except OSError:
                os.rename(seg, self.path)  # keep appending where we were
                raise
            self._closed.append(self.file)
            self.file = fresh
            self.appended = 0
            self._unsynced = self._unsynced_dir = True

    def drop_segments(self, upto_seq: int) -> None:
        """Delete the segments whose records are all at or below `upto_seq` (a durable
        snapshot that is not the newest covers them: the newest may turn out unreadable)."""
        for last, path in self.segments():
            if last <= upto_seq:
                os.unlink(path)

    def replay(self, after_seq: int) -> list[S]:
        """Records newer than `after_seq`, from the file and the segments not wholly covered by
        `after_seq` (the others are kept for an older snapshot only). A damaged line (its
        checksum fails, torn, garbage) is skipped and its file copied to the quarantine, so
        nothing readable is lost and the damage stays inspectable; `damaged` and `legacy`
        count the lines skipped and the unsealed lines an older version wrote."""
        out: list[S] = []
        lines = Lines(self._decoder)
        self.damaged, files = 0, []
        for last, path in self.segments():
            if last <= after_seq:  # wholly covered: not read (its name holds its last seq)
                self.seq = max(self.seq, last)
            else:
                files.append(path)
        for path in files + [self.path]:
            try:
                records, bad = lines.read(path)
            except FileNotFoundError:
                continue
            for rec in records:
                self.seq = max(self.seq, rec.seq)
                if rec.seq > after_seq:
                    out.append(rec)
            if bad:
                self.damaged += len(bad)
                quarantine.set_aside(path, copy=True, why=damage(bad))
        self.legacy = lines.legacy
        self.seq = max(self.seq, after_seq)
        return out


class RecordLog(Generic[R]):
    """One JSON-lines file of records whose every append is durable (fsynced, the directory
    entry too when the file is new, unless asked not to) before it returns; a failed append
    leaves no partial line in front of the next. `rewrite` replaces the whole file atomically.
    Not thread-safe: callers serialise writes. Never written into a state dir swapped since
    start."""

    def __init__(self, path: str, record_type: object):
        self.path = path
        self._decoder = msgspec.json.Decoder(record_type)

    def read(self) -> tuple[list[R], list[str]]:
        """The records and what is wrong with each line not loaded (`Lines`); ([], []) for a
        missing file."""
        try:
            return Lines(self._decoder).read(self.path)
        except FileNotFoundError:
            return [], []

    def _ready(self) -> None:
        d = os.path.dirname(os.path.abspath(self.path))
        paths.make_private_dirs(d)
        recheck_dir(d)

    def append(self, records: Sequence[R], *, sync: bool = True) -> None:
        """`sync=False`: one `write()`, no fsync (a process crash loses nothing, a power
        loss may), for records that are cheap to lose."""
        if records:
            self._ready()
            append_durably(self.path, encode_lines(records), sync=sync)

    def rewrite(self, records: Iterable[R]) -> None:
        self._ready()
        write_atomic(self.path, encode_lines(records), 0o600)

    def set_aside(self, why: str) -> str:
        """Move the file into the quarantine (it held unreadable lines); return where."""
        return quarantine.set_aside(self.path, why=why)
