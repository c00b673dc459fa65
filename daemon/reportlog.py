"""The report's ledger: facts `autoharnessctl report` needs that no other file keeps.

One append-only JSONL file in the state dir (0600), one record per line, each written with a
single `write()` on an `O_APPEND` descriptor before the fact is acted on further, so a kill -9
loses none of them (the page cache survives a process death); `fsync` follows for the rare
records that cost money (model usage). Kinds:

- `usage`: one model call's tokens (a reflection, a curator run, a batch item): job id, attempt,
  job kind, backend, model, whether it was a batch item, whether the model ran on this machine
  (`local`, only when it did), and the four token counts. Keyed by
  (job, attempt): a record written again after a crash (a batch's results read twice) counts once.
- `context`: the characters of SessionStart context autoharness sent to a session.
- `use`: a skill load (a `Skill` call or a read of its SKILL.md): the skill directory, its layer,
  the project whose turns it counts and the layer's turn count then (recall needs "loaded within
  the last N turns", which a use count alone cannot say).
- `calls`: a session's main-session tool calls counted so far (its id and start, the total),
  written when a reflection of it finishes: the book forgets ended sessions, the report's cost
  per 100 tool calls needs them.

Reading is tolerant: a torn or foreign line is skipped, never fatal. Nothing here holds
transcript text: names, paths of skills, counts and times only.
"""

import json
import os
import threading
import time
from collections.abc import Iterator

from claude_autoharness.daemon.persist.dirs import recheck_dir, write_private
from claude_autoharness.daemon.persist.files import AppendFile
from claude_autoharness.protocol import paths

MAX_BYTES = 16 * 1024 * 1024  # past this the file is compacted to the last KEEP_S
KEEP_S = 400 * 86_400
TOKEN_KEYS = ("input_tokens", "cache_creation", "cache_read", "output_tokens")


class ReportLog:
    """Append and read the ledger. Appends are serialised by a lock (threads) and O_APPEND
    (processes); a failed append (a full disk) raises and leaves no partial line behind."""

    def __init__(self, path: str | None = None, *, clock=time.time):
        self.path = path or paths.report_log_file()
        self.clock = clock
        self._lock = threading.Lock()

    def append(self, kind: str, *, sync: bool = False, **fields) -> None:
        rec = {"k": kind, "at": fields.pop("at", None) or self.clock(), **fields}
        line = json.dumps(rec, separators=(",", ":"), sort_keys=True).encode() + b"\n"
        with self._lock:
            d = os.path.dirname(os.path.abspath(self.path))
            paths.make_private_dirs(d)
            recheck_dir(d)  # never into a state dir swapped since start
            f = AppendFile(self.path)
            f.open()
            try:
                f.append(line)  # whole or absent; a torn tail never swallows it
                if sync:
                    f.sync()
            finally:
                f.close()

    def usage(self, *, job: str, attempt: int, kind: str, backend: str, model: str,
              usage: dict, batch: bool = False, ok: bool = True, local: bool = False) -> None:
        """One model call's tokens (fsynced: it is money spent); `local`: the model ran on this
        machine (the report prices it at 0 unless configured)."""
        tokens = {k: int(usage.get(k) or 0) for k in TOKEN_KEYS}
        if not any(tokens.values()):
            return
        extra = {"local": True} if local else {}
        self.append("usage", sync=True, job=job, attempt=attempt, job_kind=kind, backend=backend,
                    model=model, batch=batch, ok=ok, **extra, **tokens)

    def records(self, kind: str | None = None) -> Iterator[dict]:
        """Every readable record (of `kind`), oldest first; usage records once per key."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except OSError:
            return
        seen: set[tuple] = set()
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if not isinstance(rec, dict) or not isinstance(rec.get("k"), str) \
                    or not isinstance(rec.get("at"), (int, float)):
                continue
            if kind is not None and rec["k"] != kind:
                continue
            if rec["k"] == "usage":
                key = (rec.get("job"), rec.get("attempt"), rec.get("batch"))
                if key in seen:
                    continue
                seen.add(key)
            yield rec

    def compact(self) -> bool:
        """Keep the last KEEP_S of records once the file is over MAX_BYTES (atomic replace)."""
        try:
            if os.stat(self.path).st_size <= MAX_BYTES:
                return False
        except OSError:
            return False
        with self._lock:
            cutoff = self.clock() - KEEP_S
            keep = [json.dumps(r, separators=(",", ":"), sort_keys=True)
                    for r in self.records() if r["at"] >= cutoff]
            write_private(self.path, ("\n".join(keep) + "\n" if keep else "").encode())
        return True

