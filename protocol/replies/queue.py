"""The durable queues: intents (`queue list|show`) and the reflector's verdicts."""

import msgspec

from .skills import Finding


class Check(msgspec.Struct, kw_only=True):
    """A lesson's check: the tool calls it is about, in Claude Code's permission-rule syntax
    (`Bash(pytest *)`, `Edit(src/generated/**)`), what to do about one once the lesson is
    confirmed (`remind`, `ask`, `deny`: a new check only reminds), and the message the agent
    gets (the lesson in a line or two, with the right way when there is one)."""

    rule: str
    action: str = "remind"
    message: str = ""


class Proposal(msgspec.Struct, kw_only=True):
    """What a model (or a marker, or /learn) suggests; per-action fields are optional here so
    that a malformed proposal can still be recorded as a rejected intent."""

    action: str
    skill: str
    layer: str = "project"
    reason: str = ""
    evidence: str = ""
    description: str | None = None
    body: str | None = None
    old: str | None = None
    new: str | None = None
    path: str | None = None
    content: str | None = None
    check: Check | None = None  # create/update: the tool calls the lesson is held against


class Verdict(msgspec.Struct, kw_only=True):
    """One verdict as the model gave it (checked by `verdict_from_obj`)."""

    skill: str
    layer: str
    verdict: str
    evidence: str = ""


class VerdictRecord(msgspec.Struct, kw_only=True):
    """A verdict in the durable queue: where it came from and whether the promoter grounded it
    (`accepted`) or refused it (`rejected`, with the findings that say why)."""

    id: str
    source: str
    created_at: float
    verdict: Verdict | None = None  # None when the model's item was malformed
    raw: str | None = None
    job_id: str | None = None
    session_id: str | None = None
    project_root: str | None = None
    status: str = "queued"
    findings: list[Finding] = []
    updated_at: float = 0.0
    # the session's loads before its window ended (`skill:<name>`, `read:<path>`): a `missed`
    # verdict needs none of them to be the skill
    loaded_before: list[str] = []
    window_at: float = 0.0  # when its window ended (0: unknown): the skill version it judged


class Intent(msgspec.Struct, kw_only=True):
    """A proposal in the durable queue, with where it came from and what became of it."""

    id: str
    source: str
    created_at: float
    proposal: Proposal | None = None  # None when the model's proposal was malformed
    raw: str | None = None  # the malformed proposal, redacted, for the operator to read
    job_id: str | None = None
    session_id: str | None = None
    project_root: str | None = None
    status: str = "queued"
    findings: list[Finding] = []
    updated_at: float = 0.0
