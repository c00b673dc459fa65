"""The durable intent queue: every proposal a model (or /learn, or a marker) makes, and its fate.

Storage is one append-only JSONL file in the state dir (0600). Each line is a record:
`{"op": "add", "key": ..., "intent": {...}}` or `{"op": "update", "id": ..., "status": ...,
"findings": [...], "updated_at": ...}`. Every append is fsynced before the call returns, so a
job may be marked done (and its watermark advanced) right after `intake` returns.

Intake judges each proposal once, at the door (DESIGN.md §11): malformed → rejected `schema`,
past the per-job cap → `over_limit`, carrying a secret → `secret` (and stored redacted), evidence
not a verbatim quote of the window → `unattributable`. Every proposal is recorded, rejected or
not. Intake is idempotent by job id + proposal hash, so re-running a job after a crash adds
nothing new.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import msgspec

from autoharness.daemon.proposals import (
    SOURCES,
    STATUSES,
    Finding,
    Intent,
    Proposal,
    proposal_from_obj,
)
from autoharness.protocol import paths
from autoharness.daemon.atomic import fsync_dir, write_atomic

RAW_LIMIT = 20_000  # chars of a malformed proposal kept for the operator to read
_REDACTED = re.compile(r"\[REDACTED:([A-Za-z0-9_.-]+)\]")
_TEXT_FIELDS = ("skill", "layer", "reason", "evidence", "description", "body", "old", "new",
                "path", "content", "action")


@dataclass
class LoadReport:
    """What `load` found: counts, and where unreadable records went (None if none)."""

    intents: int = 0
    records: int = 0
    bad_lines: int = 0
    quarantined: str | None = None
    problems: list[str] = field(default_factory=list)


def _canonical(raw: object) -> str:
    return json.dumps(raw, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


class _Scanner:
    """One interface over capture's Redactor (`find` + `redact` -> (text, counts)) and a plain
    `str -> str` callable (tests, custom rules)."""

    def __init__(self, redactor=None):
        if redactor is None:
            from autoharness.daemon.capture.redact import default_redactor

            redactor = default_redactor()
        self._r = redactor

    def redact(self, text: str) -> str:
        fn = getattr(self._r, "redact", self._r)
        out = fn(text)
        return out[0] if isinstance(out, tuple) else out

    def kinds(self, text: str) -> Counter:
        """What would make this text unfit to land: secrets, and PII that is not an obvious
        placeholder (DESIGN.md §11)."""
        find = getattr(self._r, "find", None)
        if find is not None:
            return Counter(kind for kind, _s, _e in find(text, allow_placeholders=True))
        return _new_kinds(text, self.redact(text))


def _new_kinds(before: str, after: str) -> Counter:
    """Which redaction kinds appeared (a text may legitimately quote `[REDACTED:x]` already)."""
    added = Counter(_REDACTED.findall(after)) - Counter(_REDACTED.findall(before))
    if not added and after != before:
        added["private"] += 1  # something was removed without a marker (a <private> span)
    return added


def _scan_proposal(p: Proposal, scan: _Scanner) -> tuple[Proposal, Counter]:
    """The proposal's hits, and the proposal to store: redacted when it has any, else as is
    (so a placeholder like user@example.com survives to land)."""
    kinds: Counter = Counter()
    for name in _TEXT_FIELDS:
        v = getattr(p, name)
        if isinstance(v, str) and v:
            kinds += scan.kinds(v)
    if not kinds:
        return p, kinds
    changes = {}
    for name in _TEXT_FIELDS:
        v = getattr(p, name)
        if isinstance(v, str) and v:
            changes[name] = scan.redact(v)
    return msgspec.structs.replace(p, **changes), kinds


def _judge(raw, index: int, window: str, max_intents: int, scan: _Scanner) -> tuple:
    """(proposal or None, raw text or None, findings) for one raw proposal."""
    from autoharness.daemon.promote.evidence import evidence_in_window

    proposal, problems = proposal_from_obj(raw)
    findings: list[Finding] = []
    for msg in problems:
        findings.append(Finding(family="well_formed", code="schema",
                                message=scan.redact(msg)[:500]))
    if index >= max_intents:
        findings.append(Finding(family="limit", code="over_limit",
                                message=f"proposal {index + 1} of a job limited to {max_intents}"))
    if proposal is None:
        # Redact the whole text before clipping: a cut could hide half a secret from the rules.
        return None, scan.redact(_canonical(raw))[:RAW_LIMIT], findings
    stored, kinds = _scan_proposal(proposal, scan)
    if kinds:
        findings.append(Finding(family="safe", code="secret",
                                message="the proposal carries " + ", ".join(sorted(kinds))
                                + "; stored redacted"))
    if not evidence_in_window(proposal.evidence, window):
        findings.append(Finding(family="attributable", code="unattributable",
                                message="the evidence is not a verbatim quote from the window"))
    return stored, None, findings


class IntentQueue:
    """In-memory view of the intent file. Thread-safe; every mutation is durable on return."""

    def __init__(self, path: str | None = None, *, clock=time.time):
        self.path = path or paths.intents_file()
        self._clock = clock
        self._lock = threading.RLock()
        self._intents: dict[str, Intent] = {}
        self._key_of: dict[str, str] = {}  # intent id -> dedupe key
        self._by_key: dict[str, str] = {}  # dedupe key -> intent id
        self._records = 0
        self._loaded = False

    # -- persistence -------------------------------------------------------------------------

    def load(self) -> LoadReport:
        """Replay the file. Unreadable lines (a torn last append, garbage) are kept aside: the
        file is moved into the quarantine dir and a clean one is written from what was read."""
        with self._lock:
            self._intents.clear()
            self._key_of.clear()
            self._by_key.clear()
            self._records = 0
            report = LoadReport()
            try:
                with open(self.path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                self._loaded = True
                return report
            for n, line in enumerate(data.split(b"\n"), 1):
                if not line.strip():
                    continue
                try:
                    self._apply(msgspec.json.decode(line), report)
                    self._records += 1
                except (msgspec.DecodeError, msgspec.ValidationError, KeyError, TypeError,
                        ValueError, AttributeError) as e:
                    report.bad_lines += 1
                    report.problems.append(f"line {n}: unreadable record ({type(e).__name__})")
            self._loaded = True
            if report.bad_lines:
                report.quarantined = self._quarantine()
                self._rewrite()
            report.records = self._records
            report.intents = len(self._intents)
            return report

    def _apply(self, rec: dict, report: LoadReport | None = None) -> None:
        op = rec["op"]
        if op == "add":
            intent = msgspec.convert(rec["intent"], Intent)
            key = rec.get("key") or f"id:{intent.id}"
            self._intents[intent.id] = intent
            self._key_of[intent.id] = key
            self._by_key[key] = intent.id
        elif op == "update":
            cur = self._intents.get(rec["id"])
            if cur is None:
                if report is not None:
                    report.problems.append(f"update for unknown intent {rec['id']!r} ignored")
                return
            changes = {"status": rec["status"], "updated_at": float(rec.get("updated_at") or 0)}
            if rec.get("findings") is not None:
                changes["findings"] = msgspec.convert(rec["findings"], list[Finding])
            self._intents[cur.id] = msgspec.structs.replace(cur, **changes)
        else:
            raise ValueError(f"unknown op {op!r}")

    def _quarantine(self) -> str:
        qdir = paths.quarantine_dir()
        os.makedirs(qdir, mode=0o700, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        dest = os.path.join(qdir, f"intents-{stamp}-{os.getpid()}.jsonl")
        try:
            os.replace(self.path, dest)
        except OSError:
            shutil.move(self.path, dest)
        return dest

    def _ensure_dir(self) -> None:
        d = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(d):
            os.makedirs(d, mode=0o700, exist_ok=True)

    def _fsync_dir(self) -> None:
        fsync_dir(os.path.dirname(os.path.abspath(self.path)))

    def _append(self, records: list[dict]) -> None:
        if not records:
            return
        data = b"".join(msgspec.json.encode(r) + b"\n" for r in records)
        self._ensure_dir()
        created = not os.path.exists(self.path)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            self._fsync_dir()  # the new file's name must survive a crash too
        self._records += len(records)

    def _rewrite(self) -> None:
        """Write the current state as one `add` per intent: temp file, fsync, rename, fsync dir."""
        self._ensure_dir()
        data = b"".join(
            msgspec.json.encode({"op": "add", "key": self._key_of[iid], "intent": intent}) + b"\n"
            for iid, intent in self._intents.items())
        write_atomic(self.path, data, 0o600)
        self._records = len(self._intents)

    def compact(self) -> None:
        """Fold status updates into their intents; a crash mid-way leaves the old file intact."""
        with self._lock:
            self._require_loaded()
            self._rewrite()

    def needs_compaction(self) -> bool:
        """Worth compacting: updates make up most of the file."""
        with self._lock:
            return self._records > 2 * len(self._intents) + 64

    def _require_loaded(self) -> None:
        if not self._loaded:
            self.load()

    # -- the queue -----------------------------------------------------------------------------

    def intake(self, job_id: str | None, session_id: str | None, source: str,
               raw_proposals, window: str, project_root: str | None, max_intents: int,
               redactor=None) -> list[Intent]:
        """Record every proposal of one job as an intent, judged at the door. Durable on return.

        `window` is the redacted text the proposals must quote (for /learn: the window plus the
        user's guidance). `redactor`: capture's Redactor (default: its packaged rules) or a
        plain `str -> str` callable.
        Re-intake of the same job returns the intents already recorded instead of adding more.
        """
        if source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES} (got {source!r})")
        scan = _Scanner(redactor)
        now = self._clock()
        with self._lock:
            self._require_loaded()
            out: list[Intent] = []
            new: list[tuple[str, Intent]] = []
            batch: dict[str, Intent] = {}
            for index, raw in enumerate(raw_proposals or ()):
                key = f"{job_id or ''}:{hashlib.sha256(_canonical(raw).encode()).hexdigest()[:32]}"
                seen = self._by_key.get(key)
                if seen is not None:
                    out.append(self._intents[seen])
                    continue
                if key in batch:  # the same proposal twice in one reply: one intent
                    continue
                proposal, raw_text, findings = _judge(raw, index, window, max_intents, scan)
                intent = Intent(
                    id="i-" + hashlib.sha256(key.encode()).hexdigest()[:16],
                    source=source, created_at=now, proposal=proposal, raw=raw_text,
                    job_id=job_id, session_id=session_id, project_root=project_root,
                    status="rejected" if findings else "queued", findings=findings,
                    updated_at=now,
                )
                batch[key] = intent
                new.append((key, intent))
                out.append(intent)
            self._append([{"op": "add", "key": k, "intent": i} for k, i in new])
            for k, i in new:
                self._intents[i.id] = i
                self._key_of[i.id] = k
                self._by_key[k] = i.id
            return out

    def update(self, intent_id: str, status: str, findings: list[Finding] | None = None) -> Intent:
        """Move an intent to a new status (durably). `findings`, if given, replace the old ones."""
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES} (got {status!r})")
        with self._lock:
            self._require_loaded()
            cur = self._intents.get(intent_id)
            if cur is None:
                raise KeyError(intent_id)
            rec = {"op": "update", "id": intent_id, "status": status,
                   "updated_at": self._clock()}
            if findings is not None:
                rec["findings"] = list(findings)
            self._append([rec])
            self._apply(msgspec.json.decode(msgspec.json.encode(rec)))
            return self._intents[intent_id]

    def get(self, intent_id: str) -> Intent | None:
        with self._lock:
            self._require_loaded()
            return self._intents.get(intent_id)

    def list(self, status: str | None = None) -> list[Intent]:
        """Intents in arrival order, optionally only those with `status`."""
        with self._lock:
            self._require_loaded()
            return [i for i in self._intents.values() if status is None or i.status == status]

    def counts(self) -> dict[str, int]:
        with self._lock:
            self._require_loaded()
            c = dict.fromkeys(STATUSES, 0)
            for i in self._intents.values():
                c[i.status] = c.get(i.status, 0) + 1
            return c
