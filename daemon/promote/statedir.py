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

Every file is 0600 in a 0700 directory, written atomically (`fileops.write_path`).
"""

import fcntl
import json
import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from claude_autoharness.daemon.persist.files import fsync_dir
from claude_autoharness.daemon.promote import fileops, records
from claude_autoharness.daemon.promote.plan import TMP_PREFIX
from claude_autoharness.protocol import paths

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
            fd = os.open(self.p("lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)

    # -- landing records in flight ---------------------------------------------------------

    def pending_path(self, rec: dict) -> str:
        return self.p("pending", rec["id"] + ".json")

    def put_pending(self, rec: dict) -> None:
        fileops.write_path(self.pending_path(rec), json.dumps(rec).encode())

    def drop(self, rec: dict) -> None:
        fileops.unlink(self.pending_path(rec))
        fsync_dir(self.p("pending"))

    # -- blobs -----------------------------------------------------------------------------

    def put_blob(self, data: bytes) -> str:
        sha = fileops.sha(data)
        path = self.p("blobs", sha)
        if not os.path.exists(path):
            fileops.write_path(path, data)
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
        records.append_history(self.path, entry, write=fileops.write_path)

    def archives(self) -> list[dict]:
        """The meta of every archive of our shape (others are skipped, never trusted)."""
        out: list[dict] = []
        base = self.p("archive")
        try:
            names = sorted(os.listdir(base))
        except OSError:
            return out
        for name in names:
            try:
                entries = sorted(os.listdir(os.path.join(base, name)))
            except OSError:
                continue
            for entry in entries:
                if entry.startswith(TMP_PREFIX):
                    continue
                try:
                    with open(os.path.join(base, name, entry, "meta.json"), "rb") as f:
                        meta = json.load(f)
                except (OSError, ValueError, RecursionError):
                    continue
                if records.archive_meta_ok(meta):
                    out.append(meta)
        return out

    # -- counts: uses and lifecycle stamps -------------------------------------------------

    def uses(self) -> dict[str, int]:
        return self._read_counts(USES)

    def stamps(self) -> dict[str, int]:
        return self._read_counts(STAMPS)

    def count_use(self, key: str) -> None:
        with self._counts_lock:
            uses = self.uses()
            uses[key] = uses.get(key, 0) + 1  # uses() holds ints only
            paths.make_private_dirs(self.path)
            fileops.write_path(self.p(USES), json.dumps(uses).encode())

    def stamp(self, skill_dir: str, turns_now: int, *, forget_uses_at: str | None) -> None:
        """Record the turn count a skill's probation starts at; drop the use count kept under
        `forget_uses_at` (None: the uses are kept)."""
        with self._counts_lock:
            paths.make_private_dirs(self.path)
            stamps = self.stamps()
            stamps[skill_dir] = turns_now
            fileops.write_path(self.p(STAMPS), json.dumps(stamps).encode())
            if forget_uses_at is not None:
                uses = self.uses()
                if uses.pop(forget_uses_at, None) is not None:
                    fileops.write_path(self.p(USES), json.dumps(uses).encode())

    def synced_counts(self) -> dict[str, dict[str, int]]:
        """Skill dir → counts (uses, turns, and verdicts by kind) from the user's other
        machines, as the last sync round read them; {} without sync."""
        try:
            with open(self.p(SYNCED), "rb") as f:
                data = json.load(f)
        except (OSError, ValueError, RecursionError):
            return {}
        out = {}
        for k, v in (data.items() if isinstance(data, dict) else ()):
            if isinstance(v, dict):
                out[k] = {n: c for n, c in v.items() if type(c) is int and c >= 0}
        return out

    def put_synced_counts(self, counts: dict[str, dict[str, int]]) -> None:
        with self._counts_lock:
            paths.make_private_dirs(self.path)
            fileops.write_path(self.p(SYNCED), json.dumps(counts, sort_keys=True).encode())
    def stale(self) -> dict[str, dict]:
        """Skill dir → {"since": turns, "missing": [paths]} of the skills found stale."""
        try:
            with open(self.p(STALE), "rb") as f:
                data = json.load(f)
        except (OSError, ValueError, RecursionError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(v, dict)
                and type(v.get("since")) is int and isinstance(v.get("missing"), list)
                and all(isinstance(p, str) for p in v["missing"])}

    def set_stale(self, marks: dict[str, dict]) -> None:
        with self._counts_lock:
            paths.make_private_dirs(self.path)
            fileops.write_path(self.p(STALE), json.dumps(marks, sort_keys=True).encode())

    def _read_counts(self, name: str) -> dict[str, int]:
        """A state file mapping skill dirs to counts; unreadable or malformed reads as empty
        (the counts are advisory: a lost one restarts a probation, it never blocks a landing)."""
        try:
            with open(self.p(name), "rb") as f:
                data = json.load(f)
        except (OSError, ValueError, RecursionError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if type(v) is int}

    def sweep(self) -> None:
        """Remove temp files and half-made archives an interrupted write left."""
        for sub in ("", "pending", "blobs", "history"):
            d = self.p(sub)
            for fn in os.listdir(d):
                if fn.startswith(TMP_PREFIX):
                    fileops.unlink(os.path.join(d, fn))
        base = self.p("archive")
        for name in os.listdir(base):
            for entry in os.listdir(os.path.join(base, name)):
                if entry.startswith(TMP_PREFIX):
                    shutil.rmtree(os.path.join(base, name, entry), ignore_errors=True)
