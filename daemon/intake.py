"""Judging a proposal at the door, before the intent queue records it: each is judged once.

Malformed → rejected `schema`, past the per-job cap → `over_limit`, carrying a secret → `secret`
(and stored redacted), evidence not a verbatim quote of the window → `unattributable`. A
feedback verdict is checked for shape, secrets and a verbatim quote; the promoter grounds the
rest, one per skill per job among them (see `promote.feedback`). Pure but for the redactor: no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter

import msgspec

from .proposals import (
    Finding,
    Proposal,
    proposal_from_obj,
    verdict_from_obj,
)

RAW_LIMIT = 20_000  # chars of a malformed proposal kept for the operator to read
MAX_VERDICTS = 20  # per job: more are recorded as over_limit (a window touches few skills)
_TEXT_FIELDS = ("skill", "layer", "reason", "evidence", "description", "body", "old", "new",
                "path", "content", "action")


def canonical(raw: object) -> str:
    return json.dumps(raw, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


class Scanner:
    """Capture's Redactor as intake judges with it: text redacted, and the kinds found."""

    def __init__(self, redactor=None):
        if redactor is None:
            from .capture.redact import default_redactor

            redactor = default_redactor()
        self._r = redactor

    def redact(self, text: str) -> str:
        return self._r.redact(text)[0]

    def kinds(self, text: str) -> Counter:
        """What would make this text unfit to land: secrets, and PII that is not an obvious
        placeholder."""
        return Counter(kind for kind, _s, _e in self._r.find(text, allow_placeholders=True))


def scan_proposal(p: Proposal, scan: Scanner) -> tuple[Proposal, Counter]:
    """The proposal's hits, and the proposal to store: redacted when it has any, else as is
    (so a placeholder like user@example.com survives to land)."""
    texts = {name: v for name in _TEXT_FIELDS if isinstance(v := getattr(p, name), str) and v}
    kinds = sum((scan.kinds(v) for v in texts.values()), Counter())
    if not kinds:
        return p, kinds
    return msgspec.structs.replace(p, **{n: scan.redact(v) for n, v in texts.items()}), kinds


def judge_proposal(raw, index: int, window: str, max_intents: int, scan: Scanner) -> tuple:
    """(proposal or None, raw text or None, findings) for one raw proposal."""
    from .promote.evidence import evidence_in_window

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
        return None, scan.redact(canonical(raw))[:RAW_LIMIT], findings
    stored, kinds = scan_proposal(proposal, scan)
    if kinds:
        findings.append(Finding(family="safe", code="secret",
                                message="the proposal carries " + ", ".join(sorted(kinds))
                                + "; stored redacted"))
    if not evidence_in_window(proposal.evidence, window):
        findings.append(Finding(family="attributable", code="unattributable",
                                message="the evidence is not a verbatim quote from the window"))
    return stored, None, findings


def judge_verdict(raw, index: int, window: str, scan: Scanner, *, fresh: str | None = None,
                  source: str = "reflector") -> tuple:
    """(verdict or None, raw text or None, findings) for one raw feedback item: the checks that
    need only the window. The promoter grounds the rest against the tree.

    `fresh`: the part of the window no earlier window had (None: all of it); a verdict must
    quote it, so a record re-read (by /learn) is never judged twice. The curator sees skills,
    not work: its verdicts are refused. One verdict per skill per window is the promoter's
    check (`repeated`), made once the first is grounded: an invalid one takes no one's place."""
    from .promote.evidence import evidence_in_window

    verdict, problems = verdict_from_obj(raw)
    findings = [Finding(family="well_formed", code="schema", message=scan.redact(m)[:500])
                for m in problems]
    if index >= MAX_VERDICTS:
        findings.append(Finding(family="limit", code="over_limit",
                                message=f"verdict {index + 1} of a job limited to {MAX_VERDICTS}"))
    if verdict is None:
        return None, scan.redact(canonical(raw))[:RAW_LIMIT], findings
    kinds = scan.kinds(verdict.skill) + scan.kinds(verdict.evidence)
    if kinds:
        findings.append(Finding(family="safe", code="secret",
                                message="the verdict carries " + ", ".join(sorted(kinds))
                                + "; stored redacted"))
        verdict = msgspec.structs.replace(verdict, skill=scan.redact(verdict.skill),
                                          evidence=scan.redact(verdict.evidence))
    if source == "curator":
        findings.append(Finding(family="grounded", code="curator",
                                message="the curator sees skills, not work: it gives no verdicts"))
    if not evidence_in_window(verdict.evidence, window):
        findings.append(Finding(family="attributable", code="unattributable",
                                message="the evidence is not a verbatim quote from the window"))
    elif fresh is not None and not evidence_in_window(verdict.evidence, fresh):
        findings.append(Finding(family="grounded", code="judged",
                                message="the quote is from records an earlier window already "
                                        "judged"))
    return verdict, None, findings


def dedupe_key(job_id: str | None, raw) -> str:
    return f"{job_id or ''}:{hashlib.sha256(canonical(raw).encode()).hexdigest()[:32]}"
