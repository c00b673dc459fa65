"""The durable intent queue: every proposal a model (or /learn, or a marker) makes, and its fate.

Storage is one append-only JSONL file in the state dir (0600). Each line is a record:
`{"op": "add", "key": ..., "intent": {...}}` or `{"op": "update", "id": ..., "status": ...,
"findings": [...], "updated_at": ...}`. Every append is fsynced before the call returns, so a
job may be marked done (and its watermark advanced) right after `intake` returns; an append a
full disk cuts short is cut back (or ended on a line of its own), as in the daemon's journal.

Feedback verdicts on skills (`helped`, `ignored`, `harmful`, `missed`) are recorded in the same
file and the same append as the job's proposals (`{"op": "verdict", ...}`, `{"op":
"verdict_update", ...}`), so a crash either keeps the whole answer or none of it: each verdict
counts once. At the door a verdict is checked for shape, secrets, a verbatim quote and one per
skill per job; the promoter grounds the rest (see `promote.feedback`).

Intake judges each proposal once, at the door: malformed → rejected `schema`,
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

from claude_autoharness.daemon.atomic import append_durably, write_atomic
from claude_autoharness.daemon.proposals import (
    SOURCES,
    STATUSES,
    VERDICT_STATUSES,
    Finding,
    Intent,
    Proposal,
    VerdictRecord,
    proposal_from_obj,
    verdict_from_obj,
)
from claude_autoharness.protocol import paths

RAW_LIMIT = 20_000  # chars of a malformed proposal kept for the operator to read
MAX_VERDICTS = 20  # per job: more are recorded as over_limit (a window touches few skills)
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
            from claude_autoharness.daemon.capture.redact import default_redactor

            redactor = default_redactor()
        self._r = redactor

    def redact(self, text: str) -> str:
        fn = getattr(self._r, "redact", self._r)
        out = fn(text)
        return out[0] if isinstance(out, tuple) else out

    def kinds(self, text: str) -> Counter:
        """What would make this text unfit to land: secrets, and PII that is not an obvious
        placeholder."""
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
    from claude_autoharness.daemon.promote.evidence import evidence_in_window

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


def _judge_verdict(raw, index: int, window: str, scan: _Scanner,
                   seen: set[tuple[str, str]]) -> tuple:
    """(verdict or None, raw text or None, findings) for one raw feedback item: the checks that
    need only the window. The promoter grounds the rest against the tree."""
    from claude_autoharness.daemon.promote.evidence import evidence_in_window

    verdict, problems = verdict_from_obj(raw)
    findings = [Finding(family="well_formed", code="schema", message=scan.redact(m)[:500])
                for m in problems]
    if index >= MAX_VERDICTS:
        findings.append(Finding(family="limit", code="over_limit",
                                message=f"verdict {index + 1} of a job limited to {MAX_VERDICTS}"))
    if verdict is None:
        return None, scan.redact(_canonical(raw))[:RAW_LIMIT], findings
    kinds: Counter = Counter()
    for v in (verdict.skill, verdict.evidence):
        kinds += scan.kinds(v)
    if kinds:
        findings.append(Finding(family="safe", code="secret",
                                message="the verdict carries " + ", ".join(sorted(kinds))
                                + "; stored redacted"))
        verdict = msgspec.structs.replace(verdict, skill=scan.redact(verdict.skill),
                                          evidence=scan.redact(verdict.evidence))
    if not evidence_in_window(verdict.evidence, window):
        findings.append(Finding(family="attributable", code="unattributable",
                                message="the evidence is not a verbatim quote from the window"))
    who = (verdict.layer, verdict.skill)
    if who in seen:
        findings.append(Finding(family="grounded", code="repeated",
                                message=f"a second verdict on {verdict.skill} for one window"))
    seen.add(who)
    return verdict, None, findings


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


def _dedupe_key(job_id: str | None, raw) -> str:
    return f"{job_id or ''}:{hashlib.sha256(_canonical(raw).encode()).hexdigest()[:32]}"


def _updated(cur, rec: dict):
    """`cur` (an Intent or a VerdictRecord) with an `update` record applied."""
    changes = {"status": rec["status"], "updated_at": float(rec.get("updated_at") or 0)}
    if rec.get("findings") is not None:
        changes["findings"] = msgspec.convert(rec["findings"], list[Finding])
    return msgspec.structs.replace(cur, **changes)


def _replay(rec: dict, intents: dict, key_of: dict, by_key: dict,
            report: LoadReport | None = None, verdicts: dict | None = None) -> None:
    """Apply one file record to the (private, not yet published) dicts being built by `load`."""
    op = rec["op"]
    if op in ("verdict", "verdict_update") and verdicts is not None:
        _replay_verdict(rec, verdicts, key_of, by_key, report)
    elif op == "add":
        intent = msgspec.convert(rec["intent"], Intent)
        key = rec.get("key") or f"id:{intent.id}"
        intents[intent.id] = intent
        key_of[intent.id] = key
        by_key[key] = intent.id
    elif op == "update":
        cur = intents.get(rec["id"])
        if cur is None:
            if report is not None:
                report.problems.append(f"update for unknown intent {rec['id']!r} ignored")
            return
        intents[cur.id] = _updated(cur, rec)
    else:
        raise ValueError(f"unknown op {op!r}")


def _replay_verdict(rec: dict, verdicts: dict, key_of: dict, by_key: dict,
                    report: LoadReport | None) -> None:
    if rec["op"] == "verdict":
        v = msgspec.convert(rec["verdict"], VerdictRecord)
        verdicts[v.id] = v
        key_of[v.id] = rec["key"]
        by_key[rec["key"]] = v.id
        return
    cur = verdicts.get(rec["id"])
    if cur is None:
        if report is not None:
            report.problems.append(f"update for unknown verdict {rec['id']!r} ignored")
        return
    verdicts[cur.id] = _updated(cur, rec)


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
        self._loaded = False

    # -- persistence -------------------------------------------------------------------------

    def load(self) -> LoadReport:
        """Replay the file. Unreadable lines (a torn last append, garbage) are kept aside: the
        file is moved into the quarantine dir and a clean one is written from what was read."""
        with self._write_lock:
            report = LoadReport()
            try:
                with open(self.path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                self._state = _State()
                self._loaded = True
                return report
            intents: dict[str, Intent] = {}
            verdicts: dict[str, VerdictRecord] = {}
            key_of: dict[str, str] = {}
            by_key: dict[str, str] = {}
            records = 0
            for n, line in enumerate(data.split(b"\n"), 1):
                if not line.strip():
                    continue
                try:
                    _replay(msgspec.json.decode(line), intents, key_of, by_key, report,
                            verdicts)
                    records += 1
                except (msgspec.DecodeError, msgspec.ValidationError, KeyError, TypeError,
                        ValueError, AttributeError) as e:
                    report.bad_lines += 1
                    report.problems.append(f"line {n}: unreadable record ({type(e).__name__})")
            self._state = _State(intents, key_of, by_key, records, verdicts)
            self._loaded = True
            if report.bad_lines:
                report.quarantined = self._quarantine()
                self._rewrite(self._state)
            report.records = self._state.records
            report.intents = len(self._state.intents)
            return report

    def _quarantine(self) -> str:
        qdir = paths.quarantine_dir()
        paths.make_private_dirs(qdir)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        dest = os.path.join(qdir, f"intents-{stamp}-{os.getpid()}.jsonl")
        try:
            os.replace(self.path, dest)
        except OSError:
            shutil.move(self.path, dest)
        return dest

    def _ensure_dir(self) -> None:
        d = os.path.dirname(os.path.abspath(self.path))
        paths.make_private_dirs(d)

    def _append(self, records: list[dict]) -> None:
        """Append records and fsync them. Caller holds the writer lock and publishes after.
        An append a full disk cuts short leaves no partial line for the next one to be glued
        to (which would set both aside at the next load): nothing reported is ever lost."""
        if not records:
            return
        self._ensure_dir()
        append_durably(self.path, b"".join(msgspec.json.encode(r) + b"\n" for r in records))

    def _rewrite(self, st: _State) -> None:
        """Write `st` as one `add` per intent (temp file, fsync, rename, fsync dir) and publish
        it with the new record count. Caller holds the writer lock."""
        self._ensure_dir()
        data = b"".join(
            msgspec.json.encode({"op": "add", "key": st.key_of[iid], "intent": intent}) + b"\n"
            for iid, intent in st.intents.items())
        data += b"".join(
            msgspec.json.encode({"op": "verdict", "key": st.key_of[vid], "verdict": v}) + b"\n"
            for vid, v in st.verdicts.items())
        write_atomic(self.path, data, 0o600)
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
               redactor=None, raw_feedback=()) -> list[Intent]:
        """Record every proposal of one job as an intent, judged at the door. Durable on return.

        `window` is the redacted text the proposals must quote (for /learn: the window plus the
        user's guidance). `redactor`: capture's Redactor (default: its packaged rules) or a
        plain `str -> str` callable.
        Re-intake of the same job returns the intents already recorded instead of adding more.
        `raw_feedback`: the job's verdicts, recorded in the same append (see `verdicts`).
        """
        if source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES} (got {source!r})")
        scan = _Scanner(redactor)
        now = self._clock()
        self._require_loaded()
        raws = list(raw_proposals or ())
        keys = [_dedupe_key(job_id, raw) for raw in raws]
        judged: dict[str, Intent] = {}  # key -> the new intent for it, judged without a lock
        fb_raws = list(raw_feedback or ())
        fb_keys = ["v:" + _dedupe_key(job_id, raw) for raw in fb_raws]
        fb_new: dict[str, VerdictRecord] = {}
        judged_skills: set[tuple[str, str]] = set()
        for index, (key, raw) in enumerate(zip(fb_keys, fb_raws, strict=True)):
            if key in fb_new:
                continue
            verdict, raw_text, findings = _judge_verdict(raw, index, window, scan,
                                                         judged_skills)
            fb_new[key] = VerdictRecord(
                id="v-" + hashlib.sha256(key.encode()).hexdigest()[:16], source=source,
                created_at=now, verdict=verdict, raw=raw_text, job_id=job_id,
                session_id=session_id, project_root=project_root,
                status="rejected" if findings else "queued", findings=findings,
                updated_at=now)

        def judge_missing(known: dict[str, str]) -> None:
            for index, (key, raw) in enumerate(zip(keys, raws, strict=True)):
                if key in known or key in judged:  # recorded already, or repeated in the reply
                    continue
                proposal, raw_text, findings = _judge(raw, index, window, max_intents, scan)
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
                self._append([{"op": "add", "key": k, "intent": i} for k, i in new]
                             + [{"op": "verdict", "key": k, "verdict": v} for k, v in fb])
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
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES} (got {status!r})")
        self._require_loaded()
        with self._write_lock:
            st = self._state
            cur = st.intents.get(intent_id)
            if cur is None:
                raise KeyError(intent_id)
            rec = {"op": "update", "id": intent_id, "status": status,
                   "updated_at": self._clock()}
            if findings is not None:
                rec["findings"] = list(findings)
            self._append([rec])
            new = _updated(cur, msgspec.json.decode(msgspec.json.encode(rec)))
            intents = dict(st.intents)
            intents[intent_id] = new
            # key_of / by_key do not change on update: share them with the old state.
            self._state = _State(intents, st.key_of, st.by_key, st.records + 1, st.verdicts)
            return new

    def add_held(self, key: str, intent: Intent) -> Intent:
        """Record an intent the daemon itself made, already `held` for the user (a lifecycle
        archive in review mode); the same `key` again returns the one recorded."""
        self._require_loaded()
        with self._write_lock:
            st = self._state
            known = st.by_key.get(key)
            if known is not None and known in st.intents:
                return st.intents[known]
            self._append([{"op": "add", "key": key, "intent": intent}])
            intents, key_of, by_key = dict(st.intents), dict(st.key_of), dict(st.by_key)
            intents[intent.id] = intent
            key_of[intent.id] = key
            by_key[key] = intent.id
            self._state = _State(intents, key_of, by_key, st.records + 1, st.verdicts)
            return intent

    def update_verdict(self, verdict_id: str, status: str,
                       findings: list[Finding] | None = None) -> VerdictRecord:
        """Move a verdict to `accepted` or `rejected` (durably)."""
        if status not in VERDICT_STATUSES:
            raise ValueError(f"status must be one of {VERDICT_STATUSES} (got {status!r})")
        self._require_loaded()
        with self._write_lock:
            st = self._state
            cur = st.verdicts.get(verdict_id)
            if cur is None:
                raise KeyError(verdict_id)
            rec = {"op": "verdict_update", "id": verdict_id, "status": status,
                   "updated_at": self._clock()}
            if findings is not None:
                rec["findings"] = list(findings)
            self._append([rec])
            new = _updated(cur, msgspec.json.decode(msgspec.json.encode(rec)))
            verdicts = dict(st.verdicts)
            verdicts[verdict_id] = new
            self._state = _State(st.intents, st.key_of, st.by_key, st.records + 1, verdicts)
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
