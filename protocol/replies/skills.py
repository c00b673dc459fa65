"""The promoter's answers and the skills verbs: `skills list|show|revert|restore`, `sync`,
`queue approve|reject`."""

from typing import Any

import msgspec


class Finding(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One reason a proposal may not land; `family` groups them (well_formed, safe, ...)."""

    family: str
    code: str
    message: str = ""


class Outcome(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What became of one landing: `skills revert|restore`, `queue approve|reject`."""

    status: str  # landed | rejected | held
    findings: list[Finding] = []
    skill_path: str | None = None  # the SKILL.md (or, for archive, the archive directory)
    version: int | None = None

    @classmethod
    def rejected(cls, *findings: Finding) -> "Outcome":
        return cls(status="rejected", findings=list(findings))


class FeedbackCounts(msgspec.Struct, kw_only=True):
    """Grounded verdicts on the current version of one skill (since its create, update,
    repair or restore)."""

    helped: int = 0
    ignored: int = 0
    harmful: int = 0
    missed: int = 0


class CheckAdherence(msgspec.Struct, kw_only=True):
    """What the agent did about one check in one project (None: outside any project, for a
    user-level check): before the lesson landed (from the project's transcripts, bounded) and
    since (every main-session call heard)."""

    project: str | None = None
    tool: str = ""
    before_calls: int = 0
    before_violations: int = 0
    before_sessions: int = 0
    calls: int = 0  # of the check's tool since landing
    violations: int = 0  # of those, calls the rule matches
    reminded: int = 0
    asked: int = 0
    approved: int = 0  # asks the user approved (the transcript shows the call ran)
    declined: int = 0  # asks the user declined
    denied: int = 0
    complied: int = 0  # the next call of the tool after a deny did not break the rule
    repeated: int = 0  # it broke it again (the user insisted)


class SkillCheck(msgspec.Struct, kw_only=True):
    """A lesson's check: its rule (Claude Code's permission-rule syntax), the action in force
    (`remind` until confirmed), the one proposed for after, who confirmed it, its message."""

    rule: str
    action: str
    proposed: str
    message: str
    confirmed: str | None = None  # user | repeat; None: it only reminds
    since: float = 0.0  # when this check landed
    adherence: list[CheckAdherence] = []  # a row per project
class Learned(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Who learned a skill and when, from its provenance's first landing: the source (reflector,
    learn, marker, curator, sync, operator), the session or the machine it came from. `here`
    is False for a skill autoharness landed in another home (a teammate's committed skill);
    `adopted_at`: when this home took it in and began to manage it as its own (None: it does
    not, its text having changed since it landed)."""

    source: str = ""
    at: float | None = None
    session: str | None = None
    machine: str | None = None
    here: bool = True
    adopted_at: float | None = None


class SkillInfo(msgspec.Struct, kw_only=True):
    """One skill of `skills list`, live or archived."""

    name: str
    layer: str
    path: str
    owner: str  # autoharness | user | elsewhere (landed by autoharness in another home)
    status: str = "live"  # live | archived
    created: float | None = None
    last_changed: float | None = None
    uses: int = 0
    version: int | None = None
    turns: int = 0  # of its layer since it landed or was restored (autoharness skills)
    stage: str = ""  # probation | graduated | hand-written | archived
    reason: str | None = None  # archived: dormant | capacity | harmful | stale | curated | proposed
    feedback: FeedbackCounts = msgspec.field(default_factory=FeedbackCounts)
    stale: list[str] = []  # repository paths it names that are gone (project skills)
    check: SkillCheck | None = None  # the tool calls the lesson is held against
    learned: Learned | None = None  # autoharness's skills (and those it landed elsewhere)


class SkillView(msgspec.Struct, kw_only=True):
    """`skills show`: one skill (live, else its latest archive), its SKILL.md, files and
    provenance landings."""

    info: SkillInfo
    skill_md: str
    files: list[str]
    landings: list[dict[str, Any]]
    sync_conflicts: list["SyncConflict"] = []  # user layer: changed on two machines at once
    # every accepted verdict in its history: verdict, quote, at, job, version (the one it
    # judged), current (on the version live now: what the counts hold)
    verdicts: list[dict[str, Any]] = []


class SyncConflict(msgspec.Struct, kw_only=True):
    """A skill changed on two machines between rounds whose changes could not be merged."""

    skill: str
    at: float  # when this machine resolved it
    kept: str  # the machine whose version is live now
    other: str  # the machine whose version went into the skill's history
    note: str = ""


class SyncRefusal(msgspec.Struct, kw_only=True):
    """A change from another machine this machine's promoter would not land, and why."""

    skill: str
    machine: str
    findings: list[Finding] = []


class SyncInfo(msgspec.Struct, kw_only=True):
    """`autoharnessctl sync`: the user layer's sync repository and its last rounds."""

    configured: bool = False
    remote: str = ""
    machine: str = ""
    every_s: float = 0.0
    last_round_at: float | None = None
    last_good_at: float | None = None
    last_error: str | None = None  # why the last round failed (None: it completed)
    last_fix: str = ""  # its fix when it was this machine's ("": the remote's, FIX_REMOTE)
    failures: int = 0  # rounds failed in a row
    next_try_at: float | None = None  # the daemon's next round, when it runs them
    took: list[str] = []  # skills the last completed round changed here
    pushed: list[str] = []  # skills it sent
    merged: list[str] = []
    conflicts: list[SyncConflict] = []  # the latest, newest last
    refused: list[SyncRefusal] = []  # of the last completed round
