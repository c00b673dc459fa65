"""The report's figures, from what autoharness stores and nothing else.

Sources: the intent queue (proposals and what became of them), the promoter's state dir
(every landing, archive and restore in `history/`, archives with their cause, use counts and
probation stamps, through `list_skills`), the report ledger (`reportlog`: model usage per call,
SessionStart context sizes, skill loads with their turn, sessions' tool calls when reflected)
and the daemon's book (turns, the sessions it holds). No transcript is read; the only text
shown is skill names, finding codes and archive causes (descriptions are only measured).

Fields a newer version adds to what is read here (a skill's `feedback` verdict counts, its
`stale` paths, new archive causes) are taken when present and left out when absent, so the
report reads state written before and after they existed.

Blocking (file reads): call `build` from a worker thread.
"""

import datetime
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..protocol import replies as r
from . import pricing
from .listing.recall import split as recall_split
from .promote import skillfile
from .promote.land import Promoter
from .promote.plan import SKILL_MD
from .promote.skilltree import read_nofollow
from .proposals import VERDICTS, Intent
from .reportlog import ReportLog

DAY_S = 86_400
WRITE_ACTIONS = ("create", "update", "patch", "add_file", "remove_file")
REFLECTION_KINDS_SKIPPED = ("curate",)  # a curator run is a model call, not a reflection


@dataclass
class Inputs:
    """What `build` reads besides files: copies of the daemon's in-memory tables."""

    promoter: Promoter
    intents: list[Intent]
    ledger: ReportLog
    turns: Callable[[str, str | None], int]  # (layer, project root) -> turns counted
    # (session id, started at, tool calls counted, last event at) of the sessions the book holds
    sessions: list[tuple[str, float, int, float]]
    projects: list[str]  # project roots the daemon knows
    model: str  # the configured reflector model
    recall_turns: int
    now: float
    days: int = 30
    prices: dict[str, list[float]] = field(default_factory=dict)  # reflector.prices
    extra: dict = field(default_factory=dict)
    # (layer, name, project) -> Claude Code lists the skill with its description (predicted)
    listed: Callable[[list[tuple[r.SkillInfo, str | None]]], dict] | None = None


def local_midnight(ts: float) -> float:
    d = datetime.datetime.fromtimestamp(ts)
    return d.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


class _Window:
    def __init__(self, since: float, today: float, now: float):
        self.since, self.today, self.now = since, today, now

    def add(self, c: r.Count, at: float | None) -> None:
        if at is None or at < self.since or at > self.now + DAY_S:
            return
        c.period += 1
        if at >= self.today:
            c.today += 1


def build(inp: Inputs) -> r.Report:
    since = inp.now - inp.days * DAY_S
    win = _Window(since, local_midnight(inp.now), inp.now)
    history = inp.promoter.all_history()
    usage = list(inp.ledger.records("usage"))
    infos = inp.promoter.every_skill(inp.projects)
    rows = [skill_row(i, scope) for i, scope in infos]
    report = r.Report(generated_at=inp.now, days=inp.days, since=since,
                      funnel=funnel(inp.intents, history, usage, win),
                      recall=recall(infos, inp.ledger.records("use"), inp.turns,
                                    inp.recall_turns),
                      context=context_cost(infos, inp.ledger.records("context"), win),
                      cost=reflection_cost(usage, tool_calls(inp.ledger.records("calls"),
                                                             inp.sessions, win),
                                           inp.model, win, inp.prices),
                      skills=rows, library=library_days(history, since, inp.now))
    totals = {v: 0 for v in VERDICTS}
    seen = False
    for row in rows:
        if row.feedback is not None:
            seen = True
            for k, n in row.feedback.items():
                totals[k] = totals.get(k, 0) + n
    report.feedback = totals if seen else {}
    full = inp.listed(infos) if inp.listed is not None else {}
    report.recall_split, per_skill = recall_split(infos, inp.ledger.records("use"),
                                                  inp.ledger.records("reminder"), full)
    for (info, _), row in zip(infos, rows, strict=True):
        row.recall = per_skill.get(info.path) if info.status == "live" else None
    return report


# ---- the funnel ------------------------------------------------------------------------------

def funnel(intents: list[Intent], history: list[dict], usage: list[dict],
           win: _Window) -> r.Funnel:
    f = r.Funnel()
    jobs: dict[str, float] = {}
    for u in usage:  # a job reflected once however many calls (repairs, retries) it took
        if u.get("job_kind") in REFLECTION_KINDS_SKIPPED or not isinstance(u.get("job"), str):
            continue
        jobs.setdefault(u["job"], float(u["at"]))
    for at in jobs.values():
        win.add(f.reflections, at)
    for i in intents:
        if i.source == "curator":
            continue  # the curator's merges are counted as archives and landings below
        win.add(f.proposals, i.created_at)
        at = i.updated_at or i.created_at
        if i.status == "landed":
            win.add(f.landed, at)
        elif i.status == "held":
            win.add(f.held, at)
        elif i.status == "rejected":
            win.add(f.rejected, at)
            code = i.findings[0].code if i.findings else "unknown"
            win.add(f.rejected_by_reason.setdefault(code, r.Count()), at)
    for e in history:
        at = float(e["at"])
        if e.get("action") == "archive":
            win.add(f.archived, at)
            cause = str(e["retired"]) if isinstance(e.get("retired"), str) else "archived"
            win.add(f.archived_by_cause.setdefault(cause, r.Count()), at)
        elif e.get("action") == "restore":
            win.add(f.restored, at)
    f.rejected_by_reason = {k: v for k, v in sorted(f.rejected_by_reason.items()) if v.period}
    f.archived_by_cause = {k: v for k, v in sorted(f.archived_by_cause.items()) if v.period}
    return f


def library_days(history: list[dict], since: float, now: float) -> list[r.LibraryDay]:
    """Live autoharness skills per layer at the end of each day of the period, with the
    landings (writes) and archives of that day."""
    live: dict[str, str] = {}  # target -> layer
    days: list[r.LibraryDay] = []
    by_day: dict[str, r.LibraryDay] = {}
    d = datetime.date.fromtimestamp(since)
    last = datetime.date.fromtimestamp(now)
    while d <= last:
        day = r.LibraryDay(day=d.isoformat())
        days.append(day)
        by_day[day.day] = day
        d += datetime.timedelta(days=1)
    i = 0

    def count_into(day: r.LibraryDay) -> None:
        day.user = sum(1 for layer in live.values() if layer == "user")
        day.project = sum(1 for layer in live.values() if layer != "user")

    for day in days:
        end = (datetime.datetime.fromisoformat(day.day) + datetime.timedelta(days=1)).timestamp()
        while i < len(history) and history[i]["at"] < end:
            e = history[i]
            i += 1
            target, layer = str(e.get("target")), str(e.get("layer") or "project")
            action = e["action"]
            in_period = e["at"] >= since
            if action == "archive":
                live.pop(target, None)
                if in_period:
                    day.archived += 1
            else:
                if action in ("create", "restore", "adopt"):  # adopt: taken in from another home
                    live[target] = layer
                if action in WRITE_ACTIONS and in_period:
                    day.landed += 1
        count_into(day)
    return days


# ---- skills: rows, recall, context -----------------------------------------------------------

def skill_row(info: r.SkillInfo, project: str | None) -> r.SkillRow:
    return r.SkillRow(name=info.name, layer=info.layer, owner=info.owner, stage=info.stage,
                      status=info.status, reason=info.reason, project=project, uses=info.uses,
                      turns=info.turns, landed_at=info.created, updated_at=info.last_changed,
                      feedback={k: getattr(info.feedback, k) for k in VERDICTS},
                      learned=info.learned, stale=list(info.stale), check=info.check)


def recall(infos: list[tuple[r.SkillInfo, str | None]], uses: Iterable[dict],
           turns: Callable[[str, str | None], int], n_turns: int) -> r.Recall:
    """Per layer: of the live autoharness skills, how many were loaded in the last `n_turns`
    turns of their layer (a load at turn count t is within them when t >= now - n_turns)."""
    last: dict[str, float] = {}  # skill dir -> the turn count at its latest load
    for u in uses:
        d, t = u.get("dir"), u.get("turn")
        if isinstance(d, str) and isinstance(t, int):
            last[os.path.realpath(d)] = max(last.get(os.path.realpath(d), -1), t)
    out = r.Recall(turns=n_turns)
    for info, scope in infos:
        if info.status != "live" or info.owner != "autoharness":
            continue
        lr = out.layers.setdefault(info.layer, r.LayerRecall())
        lr.live += 1
        t = last.get(os.path.realpath(info.path))
        if t is not None and t >= turns(info.layer, scope) - n_turns:
            lr.loaded += 1
    for lr in out.layers.values():
        lr.share = round(lr.loaded / lr.live, 4) if lr.live else None
    return out


def listing_chars(info: r.SkillInfo) -> int:
    """The characters of the line Claude Code lists for a skill in every request:
    `- name: description` (the description as its SKILL.md frontmatter has it)."""
    data = read_nofollow(info.path, SKILL_MD, limit=64 * 1024)
    desc = skillfile.description(None if data is None else data.decode("utf-8", "replace"))
    return len(f"- {info.name}: {desc}\n")


def context_cost(infos: list[tuple[r.SkillInfo, str | None]], contexts: Iterable[dict],
                 win: _Window) -> r.ContextCost:
    out = r.ContextCost()
    per_project: dict[str, r.ProjectContext] = {}
    for info, scope in infos:
        if info.status != "live":
            continue
        n = listing_chars(info)
        parts = [out.layers.setdefault(info.layer, r.LayerContext())]
        if info.layer == "project":
            parts.append(per_project.setdefault(scope or "", r.ProjectContext(project=scope or "")))
        for c in parts:
            c.skills += 1
            c.chars += n
            if info.owner == "autoharness":
                c.autoharness_skills += 1
                c.autoharness_chars += n
    out.projects = sorted(per_project.values(), key=lambda p: p.project)
    user = out.layers.get("user", r.LayerContext())
    biggest = max(out.projects, key=lambda p: p.chars, default=r.ProjectContext())
    out.total_chars = user.chars + biggest.chars
    out.total_autoharness_chars = user.autoharness_chars + max(
        (p.autoharness_chars for p in out.projects), default=0)
    sizes = [int(c.get("chars") or 0) for c in contexts if win.since <= c["at"] <= win.now + DAY_S]
    if sizes:
        out.session_start = r.SessionStartContext(sent=len(sizes), max_chars=max(sizes),
                                                  mean_chars=round(sum(sizes) / len(sizes), 1))
    return out


# ---- reflection cost ---------------------------------------------------------------------------

def _tokens(u: dict) -> dict[str, float]:
    return {"input_uncached": u.get("input_tokens") or 0, "cache_write": u.get("cache_creation") or 0,
            "cache_read": u.get("cache_read") or 0, "output": u.get("output_tokens") or 0}


def _scaled(t: dict[str, float], k: float) -> r.Tokens:
    return r.Tokens(**{key: round(v * k) for key, v in t.items()})


def tool_calls(records: Iterable[dict], sessions: list[tuple[str, float, int, float]],
               win: _Window) -> int:
    """Main-session tool calls of the sessions active in the period: per session (its id and
    start), the latest count the book holds or the ledger kept when it was last reflected."""
    totals: dict[tuple[str, float], int] = {}
    for rec in records:
        sid, started, total = rec.get("session"), rec.get("started"), rec.get("total")
        if isinstance(sid, str) and isinstance(started, (int, float)) and type(total) is int \
                and win.since <= rec["at"] <= win.now + DAY_S:
            totals[(sid, float(started))] = max(totals.get((sid, float(started)), 0), total)
    for sid, started, total, last in sessions:
        if last >= win.since:
            totals[(sid, float(started))] = max(totals.get((sid, float(started)), 0), total)
    return sum(totals.values())


def reflection_cost(usage: list[dict], calls: int, model: str, win: _Window,
                    table: dict[str, list[float]] | None = None) -> r.ReflectionCost:
    """Tokens and money of the period's model calls; each call priced for the model that
    answered it (the configured one when it did not say) from `table` or the list prices,
    batch items at the batch price, calls to a model on this machine at 0 unless priced."""
    out = r.ReflectionCost(model=model)
    total = {"input_uncached": 0.0, "cache_write": 0.0, "cache_read": 0.0, "output": 0.0}
    jobs: set[str] = set()
    usd: float | None = 0.0
    for u in usage:
        if not win.since <= u["at"] <= win.now + DAY_S:
            continue
        out.calls += 1
        t = _tokens(u)
        for k, v in t.items():
            total[k] += float(v)
        batch = bool(u.get("batch"))
        if batch:
            out.batch_items += 1
        jobs.add(str(u.get("job")))
        c = pricing.cost_usd(str(u.get("model") or model), t, batch=batch, table=table,
                             local=bool(u.get("local")))
        usd = None if c is None or usd is None else usd + c
    out.jobs = len(jobs)
    out.tokens = _scaled(total, 1)
    out.tool_calls = calls
    out.price_per_mtok = pricing.prices(model, table) or {}
    out.usd = None if usd is None else round(usd, 6)
    if out.jobs:
        out.per_job = _scaled(total, 1 / out.jobs)
        out.usd_per_job = None if usd is None else round(usd / out.jobs, 6)
    if out.tool_calls:
        out.per_100_tool_calls = _scaled(total, 100 / out.tool_calls)
        out.usd_per_100_tool_calls = None if usd is None else round(usd * 100 / out.tool_calls, 6)
    return out
