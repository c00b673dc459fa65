"""The durable intent queue: every proposal a model (or /learn, or a marker) makes, and its fate.

Storage is one typed record log in the state dir (0600, `persist.journal.RecordLog`): each line
is a record of the tagged union `IntentRecord` (`add`, `update`, `verdict`, `verdict_update`).
Every append is fsynced before the call returns, so a job may be marked done (and its watermark
advanced) right after `intake` returns; an append a full disk cuts short is cut back (or ended
on a line of its own), as in the daemon's journal.

Feedback verdicts on skills (`helped`, `ignored`, `harmful`, `missed`) are recorded in the same
file and the same append as the job's proposals, so a crash either keeps the whole answer or
none of it: each verdict counts once.

Intake judges each proposal once, at the door (`intake`); every proposal is recorded, rejected
or not. Intake is idempotent by job id + proposal hash, so re-running a job after a crash adds
nothing new.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field, replace

import msgspec

from ..protocol import paths
from .intake import Scanner, dedupe_key, judge_proposal, judge_verdict
from .persist.journal import RecordLog, damage
from .proposals import (
    SOURCES,
    STATUSES,
    VERDICT_STATUSES,
    Finding,
    Intent,
    VerdictRecord,
)


class AddRecord(msgspec.Struct, kw_only=True, tag_field="op", tag="add"):
    """An intent recorded under its dedupe key (older files may lack the key)."""

    key: str = ""
    intent: Intent


class UpdateRecord(msgspec.Struct, kw_only=True, omit_defaults=True, tag_field="op",
                   tag="update"):
    """An intent's new status; `findings`, when present, replace the old ones."""

    id: str
    status: str
    updated_at: float = 0.0
    findings: list[Finding] | None = None


class VerdictAddRecord(msgspec.Struct, kw_only=True, tag_field="op", tag="verdict"):
    key: str
    verdict: VerdictRecord


class VerdictUpdateRecord(UpdateRecord, tag="verdict_update"):
    """A verdict's new status (as `UpdateRecord` for an intent)."""


IntentRecord = AddRecord | UpdateRecord | VerdictAddRecord | VerdictUpdateRecord


@dataclass
class LoadReport:
    """What `load` found: counts, and where unreadable records went (None if none)."""

    intents: int = 0
    records: int = 0
    bad_lines: int = 0
    quarantined: str | None = None
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _State:
    """One published, immutable view of the queue. Writers never mutate a published state: they
    build the next one (copying what changes) and swap it in with one attribute assignment, so a
    reader holds whatever state it picked up for as long as it likes, without a lock."""

    intents: dict[str, Intent] = field(default_factory=dict)  # arrival order
    key_of: dict[str, str] = field(default_factory=dict)  # intent id -> dedupe key
    by_key: dict[str, str] = field(default_factory=dict)  # dedupe key -> intent id
    records: int = 0  # records in the file, for needs_compaction
    verdicts: dict[str, VerdictRecord] = field(default_factory=dict)  # arrival order


def _updated(cur, rec: UpdateRecord):
    """`cur` (an Intent or a VerdictRecord) with an update record applied."""
    changes: dict = {"status": rec.status, "updated_at": rec.updated_at}
    if rec.findings is not None:
        changes["findings"] = list(rec.findings)
    return msgspec.structs.replace(cur, **changes)


def _replay(rec: IntentRecord, intents: dict, key_of: dict, by_key: dict, verdicts: dict,
            report: LoadReport) -> None:
    """Apply one file record to the (private, not yet published) dicts being built by `load`."""
    match rec:
        case AddRecord():
            key = rec.key or f"id:{rec.intent.id}"
            intents[rec.intent.id] = rec.intent
            key_of[rec.intent.id] = key
            by_key[key] = rec.intent.id
        case VerdictAddRecord():
            verdicts[rec.verdict.id] = rec.verdict
            key_of[rec.verdict.id] = rec.key
            by_key[rec.key] = rec.verdict.id
        case VerdictUpdateRecord() | UpdateRecord():
            what, table = ("verdict", verdicts) if isinstance(rec, VerdictUpdateRecord) \
                else ("intent", intents)
            cur = table.get(rec.id)
            if cur is None:
                report.problems.append(f"update for unknown {what} {rec.id!r} ignored")
                return
            table[cur.id] = _updated(cur, rec)


class IntentQueue:
    """In-memory view of the intent file. Thread-safe; every mutation is durable on return.

    Concurrency: writers (`intake`, `update`, `compact`, `load`) are serialised by a writer lock,
    held over the durable append/rewrite (and its fsync) but never over judging a proposal.
    Readers (`get`, `list`, `counts`, `needs_compaction`) take no lock at all: they read the
    current immutable `_State`, which a writer replaces wholesale (copy-on-write) only after its
    append is durable. So a reader never waits on a writer's I/O, and never sees an intent or a
    status that a crash could still take back.
    """

    def __init__(self, path: str | None = None, *, clock=time.time):
        self.path = path or paths.intents_file()
        self._clock = clock
        self._write_lock = threading.RLock()
        self._state = _State()  # swapped, never mutated; a reference read/write is atomic
        self._log: RecordLog[IntentRecord] = RecordLog(self.path, IntentRecord)
        self._loaded = False

    # -- persistence -------------------------------------------------------------------------

    def load(self) -> LoadReport:
        """Replay the file. Unreadable lines (a torn last append, garbage) are kept aside: the
        file is moved into the quarantine and a clean one is written from what was read."""
        with self._write_lock:
            report = LoadReport()
            records, bad = self._log.read()
            intents: dict[str, Intent] = {}
            verdicts: dict[str, VerdictRecord] = {}
            key_of: dict[str, str] = {}
            by_key: dict[str, str] = {}
            for rec in records:
                _replay(rec, intents, key_of, by_key, verdicts, report)
            report.bad_lines = len(bad)
            report.problems += bad
            self._state = _State(intents, key_of, by_key, len(records), verdicts)
            self._loaded = True
            if bad:
                report.quarantined = self._log.set_aside(damage(bad))
                self._rewrite(self._state)
            report.records = self._state.records
            report.intents = len(self._state.intents)
            return report

    def _rewrite(self, st: _State) -> None:
        """Write `st` as one `add` per intent and one `verdict` per verdict (atomically) and
        publish it with the new record count. Caller holds the writer lock."""
        self._log.rewrite(
            [AddRecord(key=st.key_of[iid], intent=i) for iid, i in st.intents.items()]
            + [VerdictAddRecord(key=st.key_of[vid], verdict=v) for vid, v in st.verdicts.items()])
        self._state = _State(st.intents, st.key_of, st.by_key,
                             len(st.intents) + len(st.verdicts), st.verdicts)

    def compact(self) -> None:
        """Fold status updates into their intents; a crash mid-way leaves the old file intact."""
        self._require_loaded()
        with self._write_lock:
            self._rewrite(self._state)

    def needs_compaction(self) -> bool:
        """Worth compacting: updates make up most of the file."""
        self._require_loaded()
        st = self._state
        return st.records > 2 * (len(st.intents) + len(st.verdicts)) + 64

    def _require_loaded(self) -> None:
        if not self._loaded:
            with self._write_lock:
                if not self._loaded:  # another thread may have loaded while we waited
                    self.load()

    # -- the queue -----------------------------------------------------------------------------

    def intake(self, job_id: str | None, session_id: str | None, source: str,
               raw_proposals, window: str, project_root: str | None, max_intents: int,
               redactor=None, raw_feedback=(), feedback_window: str | None = None,
               loaded_before: list[str] | tuple[str, ...] = (),
               window_at: float = 0.0) -> list[Intent]:
        """Record every proposal of one job as an intent, judged at the door. Durable on return.

        `window` is the redacted text the proposals must quote (for /learn: the window plus the
        user's guidance). `redactor`: capture's Redactor (default: its packaged rules).
        Re-intake of the same job returns the intents already recorded instead of adding more.
        `raw_feedback`: the job's verdicts, recorded in the same append (see `verdicts`);
        `feedback_window`: the part of `window` they may quote (records no earlier window had;
        None: all of it); `loaded_before`: the loads of the session before the window ends
        (`promote.loads` refs), kept with each verdict for grounding a `missed`; `window_at`:
        when the window ended, which says the version of a skill its verdicts judge.
        """
        if source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES} (got {source!r})")
        scan = Scanner(redactor)
        now = self._clock()
        self._require_loaded()
        raws = list(raw_proposals or ())
        keys = [dedupe_key(job_id, raw) for raw in raws]
        judged: dict[str, Intent] = {}  # key -> the new intent for it, judged without a lock
        fb_raws = list(raw_feedback or ())
        fb_keys = ["v:" + dedupe_key(job_id, raw) for raw in fb_raws]
        fb_new: dict[str, VerdictRecord] = {}
        for index, (key, raw) in enumerate(zip(fb_keys, fb_raws, strict=True)):
            if key in fb_new:
                continue
            verdict, raw_text, findings = judge_verdict(raw, index, window, scan,
                                                        fresh=feedback_window, source=source)
            fb_new[key] = VerdictRecord(
                id="v-" + hashlib.sha256(key.encode()).hexdigest()[:16], source=source,
                created_at=now, verdict=verdict, raw=raw_text, job_id=job_id,
                session_id=session_id, project_root=project_root,
                status="rejected" if findings else "queued", findings=findings,
                updated_at=now, loaded_before=list(loaded_before),
                window_at=window_at)

        def judge_missing(known: dict[str, str]) -> None:
            for index, (key, raw) in enumerate(zip(keys, raws, strict=True)):
                if key in known or key in judged:  # recorded already, or repeated in the reply
                    continue
                proposal, raw_text, findings = judge_proposal(raw, index, window, max_intents,
                                                              scan)
                judged[key] = Intent(
                    id="i-" + hashlib.sha256(key.encode()).hexdigest()[:16],
                    source=source, created_at=now, proposal=proposal, raw=raw_text,
                    job_id=job_id, session_id=session_id, project_root=project_root,
                    status="rejected" if findings else "queued", findings=findings,
                    updated_at=now,
                )

        while True:
            judge_missing(self._state.by_key)  # the slow part: redaction, evidence, secrets
            with self._write_lock:
                st = self._state  # may be newer than what we judged against
                if any(k not in st.by_key and k not in judged for k in keys):
                    continue  # a reload dropped a key we skipped: judge it, outside the lock
                out: list[Intent] = []
                new: list[tuple[str, Intent]] = []
                batch: set[str] = set()
                for key in keys:
                    seen = st.by_key.get(key)
                    if seen is not None:  # a concurrent intake of the same job got there first
                        out.append(st.intents[seen])
                        continue
                    if key in batch:  # the same proposal twice in one reply: one intent
                        continue
                    intent = judged[key]
                    batch.add(key)
                    new.append((key, intent))
                    out.append(intent)
                fb = [(k, v) for k, v in fb_new.items() if k not in st.by_key]
                if not new and not fb:
                    return out
                self._log.append([AddRecord(key=k, intent=i) for k, i in new]
                                 + [VerdictAddRecord(key=k, verdict=v) for k, v in fb])
                intents, key_of, by_key = dict(st.intents), dict(st.key_of), dict(st.by_key)
                verdicts = dict(st.verdicts)
                for k, i in new:
                    intents[i.id] = i
                    key_of[i.id] = k
                    by_key[k] = i.id
                for k, v in fb:
                    verdicts[v.id] = v
                    key_of[v.id] = k
                    by_key[k] = v.id
                self._state = _State(intents, key_of, by_key, st.records + len(new) + len(fb),
                                     verdicts)
                return out

    def update(self, intent_id: str, status: str, findings: list[Finding] | None = None) -> Intent:
        """Move an intent to a new status (durably). `findings`, if given, replace the old ones."""
        return self._move("intents", UpdateRecord, STATUSES, intent_id, status, findings)

    def add_held(self, key: str, intent: Intent) -> Intent:
        """Record an intent the daemon itself made, already `held` for the user (a lifecycle
        archive in review mode); the same `key` again returns the one recorded."""
        self._require_loaded()
        with self._write_lock:
            st = self._state
            known = st.by_key.get(key)
            if known is not None and known in st.intents:
                return st.intents[known]
            self._log.append([AddRecord(key=key, intent=intent)])
            intents, key_of, by_key = dict(st.intents), dict(st.key_of), dict(st.by_key)
            intents[intent.id] = intent
            key_of[intent.id] = key
            by_key[key] = intent.id
            self._state = _State(intents, key_of, by_key, st.records + 1, st.verdicts)
            return intent

    def update_verdict(self, verdict_id: str, status: str,
                       findings: list[Finding] | None = None) -> VerdictRecord:
        """Move a verdict to `accepted` or `rejected` (durably)."""
        return self._move("verdicts", VerdictUpdateRecord, VERDICT_STATUSES, verdict_id, status,
                          findings)

    def _move(self, table: str, record: type[UpdateRecord] | type[VerdictUpdateRecord],
              allowed: tuple[str, ...], item_id: str, status: str,
              findings: list[Finding] | None):
        """One durable status change of an intent or a verdict (`table` names its dict in the
        state): check the status, append the record, publish the next state."""
        if status not in allowed:
            raise ValueError(f"status must be one of {allowed} (got {status!r})")
        self._require_loaded()
        with self._write_lock:
            st = self._state
            items = getattr(st, table)
            cur = items.get(item_id)
            if cur is None:
                raise KeyError(item_id)
            rec = record(id=item_id, status=status, updated_at=self._clock(),
                         findings=None if findings is None else list(findings))
            self._log.append([rec])
            new = _updated(cur, rec)
            # key_of / by_key do not change on an update: the next state shares them.
            self._state = replace(st, records=st.records + 1,
                                  **{table: {**items, item_id: new}})
            return new

    def verdicts(self, status: str | None = None) -> list[VerdictRecord]:
        """Feedback verdicts in arrival order, optionally only those with `status`."""
        self._require_loaded()
        return [v for v in self._state.verdicts.values() if status is None or v.status == status]

    def job_recorded(self, job_id: str) -> bool:
        """Whether intake already recorded anything (an intent or a verdict) for this job."""
        self._require_loaded()
        st = self._state
        return any(i.job_id == job_id for i in st.intents.values()) or any(
            v.job_id == job_id for v in st.verdicts.values())

    # Readers: no lock. Each reads `self._state` once and works on that immutable snapshot.

    def get(self, intent_id: str) -> Intent | None:
        self._require_loaded()
        return self._state.intents.get(intent_id)

    def list(self, status: str | None = None) -> list[Intent]:
        """Intents in arrival order, optionally only those with `status`."""
        self._require_loaded()
        st = self._state
        return [i for i in st.intents.values() if status is None or i.status == status]

    def counts(self) -> dict[str, int]:
        self._require_loaded()
        st = self._state
        c = dict.fromkeys(STATUSES, 0)
        for i in st.intents.values():
            c[i.status] = c.get(i.status, 0) + 1
        return c
