"""`autoharnessctl report`: what was learned and what it costs."""

import msgspec

from .codec import Part
from .listing import ListingSummary
from .skills import Learned, SkillCheck


class Count(Part):
    """A figure over the report's period and over today (since local midnight)."""

    period: int = 0
    today: int = 0


class Funnel(Part):
    """Reflections to landings: what the model proposed and what the promoter made of it.
    `rejected_by_reason` is keyed by the first finding's code; `archived_by_cause` by the
    archive's reason (dormant, capacity, curated, proposed, and any other a version records)."""

    reflections: Count = msgspec.field(default_factory=Count)
    proposals: Count = msgspec.field(default_factory=Count)
    landed: Count = msgspec.field(default_factory=Count)
    rejected: Count = msgspec.field(default_factory=Count)
    rejected_by_reason: dict[str, Count] = {}
    held: Count = msgspec.field(default_factory=Count)
    archived: Count = msgspec.field(default_factory=Count)
    archived_by_cause: dict[str, Count] = {}
    restored: Count = msgspec.field(default_factory=Count)


class LayerRecall(Part):
    live: int = 0  # live autoharness skills
    loaded: int = 0  # of them, loaded at least once in the last `turns` turns of their layer
    share: float | None = None  # loaded / live; None without live skills


class Recall(Part):
    turns: int = 0
    layers: dict[str, LayerRecall] = {}


class RecallPart(Part):
    """Situations (sessions where a skill was called for) and how many ended with it loaded."""

    skills: int = 0  # listed_full / name_only: the skills counted in it
    situations: int = 0
    loaded: int = 0
    share: float | None = None  # loaded / situations; None without situations


class RecallSplit(Part):
    """Recall of the live autoharness skills with a prompt reminder and without one, and as
    Claude Code lists them: with their description or by name only."""

    reminded: RecallPart = msgspec.field(default_factory=RecallPart)
    not_reminded: RecallPart = msgspec.field(default_factory=RecallPart)
    listed_full: RecallPart = msgspec.field(default_factory=RecallPart)
    name_only: RecallPart = msgspec.field(default_factory=RecallPart)


class SkillRecall(Part):
    """One skill's situations: reminded (and loaded then), not reminded (and loaded), and
    whether Claude Code lists it with its description."""

    reminded: int = 0
    reminded_loaded: int = 0
    unreminded: int = 0
    unreminded_loaded: int = 0
    listed: bool = True


class LayerContext(Part):
    """What one layer's skill listing costs every request: `- name: description` lines."""

    skills: int = 0
    chars: int = 0
    autoharness_skills: int = 0
    autoharness_chars: int = 0


class ProjectContext(LayerContext):
    project: str = ""


class SessionStartContext(Part):
    """The SessionStart context autoharness added, per session start that got any."""

    sent: int = 0
    mean_chars: float = 0.0
    max_chars: int = 0


class ContextCost(Part):
    """`total_chars`: the user layer plus the largest project layer (one request's listing)."""

    layers: dict[str, LayerContext] = {}
    projects: list[ProjectContext] = []
    total_chars: int = 0
    total_autoharness_chars: int = 0
    session_start: SessionStartContext = msgspec.field(default_factory=SessionStartContext)


class Tokens(Part):
    """Tokens by kind (per job and per 100 tool calls: rounded to whole tokens)."""

    input_uncached: int = 0
    cache_write: int = 0
    cache_read: int = 0
    output: int = 0


class ReflectionCost(Part):
    """Model calls of the period: tokens in total, per job and per 100 main-session tool
    calls, and their price at list price for `model` (batch items at the batch price).
    `usd` is None when the model's price is not known."""

    model: str = ""
    calls: int = 0
    jobs: int = 0
    batch_items: int = 0
    tool_calls: int = 0
    tokens: Tokens = msgspec.field(default_factory=Tokens)
    per_job: Tokens | None = None
    per_100_tool_calls: Tokens | None = None
    usd: float | None = None
    usd_per_job: float | None = None
    usd_per_100_tool_calls: float | None = None
    price_per_mtok: dict[str, float] = {}  # the list prices used (USD per million tokens)


class SkillRow(Part):
    """One skill of the report: live or archived, with its usage and (when recorded) the
    reflector's verdicts on it and the paths it names that no longer exist."""

    name: str
    layer: str
    owner: str
    stage: str = ""
    status: str = "live"
    reason: str | None = None
    project: str | None = None
    uses: int = 0
    turns: int = 0
    landed_at: float | None = None
    updated_at: float | None = None
    feedback: dict[str, int] | None = None
    stale: list[str] = []
    check: SkillCheck | None = None  # its check and the measured adherence
    recall: SkillRecall | None = None  # autoharness skills, live
    learned: Learned | None = None  # who learned it, when, from which session or machine


class LibraryDay(Part):
    """Live autoharness skills per layer at the end of `day`, and what changed that day."""

    day: str
    user: int = 0
    project: int = 0
    landed: int = 0
    archived: int = 0


class Headline(Part):
    """The report's first line: is autoharness learning, and if not, why, and what to do.
    `state` is one of learning | waiting | paused | nothing_yet; `answer` says it in words,
    `next` is the step to take, `later` what will appear in the report, and when."""

    state: str = "nothing_yet"
    answer: str = ""
    next: str = ""
    later: str = ""


class Report(Part):
    """`autoharnessctl report`: the period is the last `days` days (since `since`)."""

    generated_at: float
    days: int
    since: float
    headline: Headline = msgspec.field(default_factory=Headline)
    funnel: Funnel = msgspec.field(default_factory=Funnel)
    recall: Recall = msgspec.field(default_factory=Recall)
    recall_split: RecallSplit = msgspec.field(default_factory=RecallSplit)
    context: ContextCost = msgspec.field(default_factory=ContextCost)
    cost: ReflectionCost = msgspec.field(default_factory=ReflectionCost)
    skills: list[SkillRow] = []
    library: list[LibraryDay] = []
    feedback: dict[str, int] = {}  # verdicts over the skills listed, when any are recorded
    # Claude Code's skill listing for a session where the report was asked (added by the CLI)
    listing: ListingSummary | None = None
