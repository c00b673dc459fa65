"""The report's ledger: facts `autoharnessctl report` needs that no other file keeps.

One typed record log in the state dir (`persist.journal.RecordLog`, 0600): each record one
sealed line, appended with a single `write()` before the fact is acted on further, so a
kill -9 loses none of them (the page cache survives a process death); `fsync` follows for the
rare records that cost money (model usage). Kinds (the `k` tag):

- `usage`: one model call's tokens (a reflection, a curator run, a batch item): job id, attempt,
  job kind, backend, model, whether it was a batch item, whether the model ran on this machine
  (`local`), and the four token counts. Keyed by (job, attempt, batch): a record written again
  after a crash (a batch's results read twice) counts once.
- `context`: the characters of SessionStart context autoharness sent to a session.
- `use`: a skill load (a `Skill` call or a read of its SKILL.md): the skill directory, its layer,
  the project whose turns it counts and the layer's turn count then (recall needs "loaded within
  the last N turns", which a use count alone cannot say).
- `reminder`: a prompt's reminder of skills in a session.
- `calls`: a session's main-session tool calls counted so far (its id and start, the total),
  written when a reflection of it finishes: the book forgets ended sessions, the report's cost
  per 100 tool calls needs them.

A line that fails its checksum or is no record (torn, foreign) is never read as a fact: the
file is set aside in the quarantine (status and doctor name it) and rewritten without it.
Unsealed lines an older version wrote read as they are. Nothing here holds transcript text:
names, paths of skills, counts and times only.
"""

import os
import threading
import time
from collections.abc import Iterator

import msgspec

from ..protocol import paths
from .persist import quarantine
from .persist.journal import RecordLog, damage

MAX_BYTES = 16 * 1024 * 1024  # past this the file is compacted to the last KEEP_S
KEEP_S = 400 * 86_400
TOKEN_KEYS = ("input_tokens", "cache_creation", "cache_read", "output_tokens")


class Entry(msgspec.Struct, kw_only=True, tag_field="k"):
    at: float


class Usage(Entry, tag="usage"):
    job: str | None = None
    attempt: int | None = None
    job_kind: str = ""
    backend: str = ""
    model: str | None = None
    batch: bool = False
    ok: bool = True
    local: bool = False
    input_tokens: int = 0
    cache_creation: int = 0
    cache_read: int = 0
    output_tokens: int = 0


class Context(Entry, tag="context"):
    chars: int = 0
    parts: list[str] = []
    session: str | None = None  # older versions named it


class Use(Entry, tag="use"):
    dir: str | None = None
    layer: str = ""
    scope: str | None = None
    turn: int | None = None
    session: str = ""


class Reminder(Entry, tag="reminder"):
    session: str | None = None
    project: str | None = None
    skills: list[str] = []


class Calls(Entry, tag="calls"):
    session: str | None = None
    started: float | None = None
    total: int | None = None


Record = Usage | Context | Use | Reminder | Calls
KINDS: dict[str, type[Entry]] = {"usage": Usage, "context": Context, "use": Use,
                                 "reminder": Reminder, "calls": Calls}


class ReportLog:
    """Append and read the ledger. Appends are serialised by a lock (threads) and O_APPEND
    (processes); a failed append (a full disk) raises and leaves no partial line behind."""

    def __init__(self, path: str | None = None, *, clock=time.time):
        self.log: RecordLog[Entry] = RecordLog(path or paths.report_log_file(), Record)
        self.clock = clock
        self._lock = threading.Lock()

    def append(self, kind: str, *, sync: bool = False, **fields) -> None:
        rec = KINDS[kind](at=fields.pop("at", None) or self.clock(), **fields)
        with self._lock:
            self.log.append([rec], sync=sync)  # never into a state dir swapped since start

    def usage(self, *, job: str, attempt: int, kind: str, backend: str, model: str,
              usage: dict, batch: bool = False, ok: bool = True, local: bool = False) -> None:
        """One model call's tokens (fsynced: it is money spent); `local`: the model ran on this
        machine (the report prices it at 0 unless configured)."""
        tokens = {k: int(usage.get(k) or 0) for k in TOKEN_KEYS}
        if any(tokens.values()):
            self.append("usage", sync=True, job=job, attempt=attempt, job_kind=kind,
                        backend=backend, model=model, batch=batch, ok=ok, local=local, **tokens)

    def _read(self) -> list[Entry]:
        """Every record; a damaged line sets the file aside and it is rewritten without it
        (decided under the lock, so that no append is half-seen or lost)."""
        records, bad = self.log.read()
        if bad:
            with self._lock:
                records, bad = self.log.read()
                if bad:  # a copy first: a crash before the rewrite loses nothing
                    quarantine.set_aside(self.log.path, copy=True, why=damage(bad))
                    self.log.rewrite(records)
        return records

    def records(self, kind: str | None = None) -> Iterator[dict]:
        """Every record (of `kind`) as plain data, oldest first; usage records once per key."""
        seen: set[tuple] = set()
        for rec in self._read():
            if kind is not None and not isinstance(rec, KINDS[kind]):
                continue
            if isinstance(rec, Usage):
                if (key := (rec.job, rec.attempt, rec.batch)) in seen:
                    continue
                seen.add(key)
            yield msgspec.to_builtins(rec)

    def compact(self) -> bool:
        """Keep the last KEEP_S of records once the file is over MAX_BYTES (atomic replace)."""
        try:
            if os.stat(self.log.path).st_size <= MAX_BYTES:
                return False
        except OSError:
            return False
        with self._lock:
            cutoff = self.clock() - KEEP_S
            self.log.rewrite([r for r in self.log.read()[0] if r.at >= cutoff])
        return True
