"""The promoter's state: one directory, written by the promoter only. Layout under
`<state dir>/promote/`:

    lock                      flock: one writer across processes (daemon, offline CLI)
    pending/<landing>.json    landing records in flight
    blobs/<sha256>            file contents, landed and replaced
    history/<key>.json        per target path: every version, for history/revert
    archive/<name>/<landing>/ archived skills (meta.json + skill/), outside Claude Code's discovery
    uses.json                 skill dir → use count (since it landed or was restored)
    lifecycle.json            skill dir → its layer's turn count when it landed or was restored
    synced-counts.json        skill dir → uses and turns other machines counted (a sync round)
    stale.json                skill dir → {since: turn count it was found stale at, missing: [...]}

Every file is 0600 in a 0700 directory, written atomically by the persistence package
(`persist.dirs.write_private`); the count files are its typed maps (`persist.promoter`).
"""

import glob
import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import msgspec

from ...protocol import paths
from ..persist.dirs import flocked, write_private
from ..persist.files import fsync_dir
from ..persist.promoter import (
    Counts,
    Stale,
    Synced,
    load_map,
    save_map,
)
from . import fileops, records
from .plan import TMP_PREFIX

USES = "uses.json"
STAMPS = "lifecycle.json"
SYNCED = "synced-counts.json"
STALE = "stale.json"


def promote_state_dir() -> str:
    """Where the promoter keeps its landing records."""
    return os.path.join(paths.state_dir(), "promote")


class StateDir:
    """The promoter's state dir. `locked()` serialises writers across threads and processes;
    the count files have their own thread lock (uses are counted outside a landing)."""

    def __init__(self, path: str):
        self.path = path
        self._thread_lock = threading.Lock()
        self._counts_lock = threading.Lock()

    def p(self, *parts: str) -> str:
        return os.path.join(self.path, *parts)

    @contextmanager
    def locked(self) -> Iterator[None]:
        with self._thread_lock:
            paths.make_private_dirs(self.path)
            for sub in ("pending", "blobs", "history", "archive"):
                paths.make_private_dirs(self.p(sub))
            with flocked(self.p("lock")):
                yield

    # -- landing records in flight ---------------------------------------------------------

    def pending_path(self, rec: records.WriteLanding | records.ArchiveLanding) -> str:
        return self.p("pending", rec.id + ".json")

    def put_pending(self, rec: records.WriteLanding | records.ArchiveLanding) -> None:
        write_private(self.pending_path(rec), msgspec.json.encode(rec))

    def drop(self, rec: records.WriteLanding | records.ArchiveLanding) -> None:
        fileops.unlink(self.pending_path(rec))
        fsync_dir(self.p("pending"))

    # -- blobs -----------------------------------------------------------------------------

    def put_blob(self, data: bytes) -> str:
        sha = fileops.sha(data)
        path = self.p("blobs", sha)
        if not os.path.exists(path):
            write_private(path, data)
        return sha

    def get_blob(self, sha: str) -> bytes:
        with open(self.p("blobs", sha), "rb") as f:
            data = f.read()
        if fileops.sha(data) != sha:
            raise OSError(f"blob {sha} is corrupt")
        return data

    # -- history and archives --------------------------------------------------------------

    def history(self, target: str) -> list[dict]:
        return records.read_history(self.path, target)

    def append_history(self, entry: dict) -> None:
        records.append_history(self.path, entry)

    def archives(self) -> list[dict]:
        """The meta of every archive of our shape (others are skipped, never trusted); a
        half-made one (its temp name is a dotfile, which the pattern skips) is none yet."""
        pattern = os.path.join(glob.escape(self.p("archive")), "*", "*", "meta.json")
        return [m for path in sorted(glob.glob(pattern))
                if (m := records.read_json(path, records.ArchiveMeta))]

    # -- counts: uses, lifecycle stamps, other machines' counts, stale marks ----------------

    def uses(self) -> Counts:
        return load_map(self.p(USES), Counts) or {}

    def stamps(self) -> Counts:
        return load_map(self.p(STAMPS), Counts) or {}

    def synced_counts(self) -> Synced:
        """Skill dir → counts (uses, turns, and verdicts by kind) from the user's other
        machines, as the last sync round read them; {} without sync."""
        return load_map(self.p(SYNCED), Synced) or {}

    def stale(self) -> Stale:
        """Skill dir → when (the turn count) it was found stale, and the paths it misses."""
        return load_map(self.p(STALE), Stale) or {}

    def count_use(self, key: str) -> None:
        with self._counts_lock:
            uses = self.uses()
            self._save(USES, {**uses, key: uses.get(key, 0) + 1})

    def stamp(self, skill_dir: str, turns_now: int, *, forget_uses_at: str | None) -> None:
        """Record the turn count a skill's probation starts at; drop the use count kept under
        `forget_uses_at` (None: the uses are kept)."""
        with self._counts_lock:
            self._save(STAMPS, {**self.stamps(), skill_dir: turns_now})
            uses = self.uses()
            if forget_uses_at is not None and uses.pop(forget_uses_at, None) is not None:
                self._save(USES, uses)

    def put_synced_counts(self, counts: Synced) -> None:
        with self._counts_lock:
            self._save(SYNCED, counts)

    def set_stale(self, marks: Stale) -> None:
        with self._counts_lock:
            self._save(STALE, marks)

    def _save(self, name: str, value: object) -> None:
        paths.make_private_dirs(self.path)
        save_map(self.p(name), value)

    def sweep(self) -> None:
        """Remove temp files and half-made archives an interrupted write left."""
        for sub in ("", "pending", "blobs", "history"):
            d = self.p(sub)
            for fn in os.listdir(d):
                if fn.startswith(TMP_PREFIX) or _atomic_temp(fn):
                    fileops.unlink(os.path.join(d, fn))
        base = self.p("archive")
        for name in os.listdir(base):
            for entry in os.listdir(os.path.join(base, name)):
                if entry.startswith(TMP_PREFIX):
                    shutil.rmtree(os.path.join(base, name, entry), ignore_errors=True)


def _atomic_temp(name: str) -> bool:
    """A temp file a state write left when it was cut short (`files.write_atomic` names it
    `.<file>.<random>.tmp`; no file of the promoter's own is a dotfile)."""
    return name.startswith(".") and name.endswith(".tmp")
