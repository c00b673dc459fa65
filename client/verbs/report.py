"""`autoharnessctl report`: what the library learned and what it cost (text, --json, --html).

The figures are the daemon's (`report` request, `replies.Report`); the text, the JSON and the
page all show the same reply, so the page's numbers are the --json numbers.
"""

import argparse
import json
import os
import sys
from functools import partial

from ...protocol import messages as m
from ...protocol import replies as r
from ...protocol.words import adherence_line, day, learned_words, plural
from ..conn import call, typed
from .common import count
from .skills import check_line

HELP = "what was learned and what it costs: funnel, recall, context and model cost, per skill"
DESCRIPTION = """The library's health over the last N days (and today): reflections run,
proposals made, landed, rejected (by reason), held, archived (by cause), restored; the share
of live autoharness skills loaded in the last turns (recall); the characters the skill listing
adds to every request and the SessionStart context; the reflector's tokens and their list
price; every skill with its uses and, when recorded, the reflector's verdicts on it."""


def add_parser(sub) -> None:
    s = sub.add_parser("report", help=HELP, description=DESCRIPTION)
    s.add_argument("--days", type=_days, default=30, metavar="N",
                   help="the period: the last N days (default 30)")
    s.add_argument("--turns", type=partial(count, flag="--turns"), default=0, metavar="N",
                   help="recall counts loads in the last N turns of each layer (default: the "
                        "library's probation length, library.maturity_turns)")
    s.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    s.add_argument("--html", metavar="FILE",
                   help="write one self-contained page (inline styles and charts; opens "
                        "offline) with the same figures")
    s.set_defaults(func=do_report)


def _days(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"--days wants a whole number of days >= 1, not {text!r}")
    return int(text)


def do_report(args) -> int:
    req = m.Report(days=args.days, turns=args.turns)
    data = call(req)
    from ..files import worktree_top
    from ..listing import listing_or_none

    listing = listing_or_none(worktree_top(os.getcwd()))
    if isinstance(data, dict) and listing is not None:
        import msgspec

        data = dict(data, listing=msgspec.to_builtins(listing))
    rep = typed(data, r.Report, req)
    if args.html:
        from ..report_html import render

        path = os.path.abspath(args.html)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(render(rep, data))
        print(f"wrote {path}", file=sys.stderr if args.json else sys.stdout)
    if args.json:  # the headline first, as in the text and on the page
        ordered = json.loads(json.dumps(data, sort_keys=True))  # keys sorted at every level
        if isinstance(ordered, dict) and "headline" in ordered:
            ordered = {"headline": ordered.pop("headline"), **ordered}
        print(json.dumps(ordered, indent=2))
    elif not args.html:
        print(format_report(rep))
    return 0


def _c(c: r.Count) -> str:
    return f"{c.period} ({c.today} today)"


def _usd(v: float | None) -> str:
    return "n/a" if v is None else f"${v:,.4f}"


def format_report(rep: r.Report) -> str:
    parts = (_answer, _funnel, _recall, _context, _cost, _skills)
    return "\n".join(line for part in parts for line in part(rep))


def _answer(rep: r.Report) -> list[str]:
    """The answer first: is it learning, and if not, why and what to do."""
    h = rep.headline
    if not h.answer:
        return []
    return [h.answer, f"next: {h.next}", *([f"later: {h.later}"] if h.later else []), ""]


def _funnel(rep: r.Report) -> list[str]:
    f = rep.funnel
    return [f"autoharness report: the last {rep.days} days (since {day(rep.since)})", "",
            "funnel:",
            f"  reflections run   {_c(f.reflections)}",
            f"  proposals made    {_c(f.proposals)}",
            f"  landed            {_c(f.landed)}",
            f"  rejected          {_c(f.rejected)}",
            *(f"    {code:<16}{_c(c)}" for code, c in f.rejected_by_reason.items()),
            f"  held for review   {_c(f.held)}",
            f"  archived          {_c(f.archived)}",
            *(f"    {cause:<16}{_c(c)}" for cause, c in f.archived_by_cause.items()),
            f"  restored          {_c(f.restored)}", ""]


def _recall(rep: r.Report) -> list[str]:
    lines = [f"recall (loaded in the last {rep.recall.turns} turns of the layer):"]
    for layer, lr in sorted(rep.recall.layers.items()):
        share = "n/a" if lr.share is None else f"{lr.share:.0%}"
        lines.append(f"  {layer:<8} {lr.loaded} of {lr.live} live autoharness skills ({share})")
    if not rep.recall.layers:
        lines.append("  no live autoharness skills")
    sp = rep.recall_split
    lines.append("  when its situation came up (sessions), loaded:")
    for label, p in (("reminded", sp.reminded), ("not reminded", sp.not_reminded),
                     ("listed with description", sp.listed_full),
                     ("listed by name only", sp.name_only)):
        share = "-" if p.share is None else f"{p.share:.0%}"
        lines.append(f"    {label:<24} {p.loaded} of {p.situations} ({share})")
    return lines


def _context(rep: r.Report) -> list[str]:
    cx = rep.context
    lines = ["", "context cost (the skill listing in every request, characters):"]
    for layer, lc in sorted(cx.layers.items()):
        lines.append(f"  {layer:<8} {lc.chars:>7,} chars, {plural(lc.skills, 'skill')} "
                     f"(autoharness: {lc.autoharness_chars:,} chars, {lc.autoharness_skills})")
    lines.append(f"  total    {cx.total_chars:>7,} chars (autoharness {cx.total_autoharness_chars:,})")
    ss = cx.session_start
    lines.append(f"  SessionStart context: {ss.sent} sent, mean {ss.mean_chars:,.0f} chars, "
                 f"max {ss.max_chars:,}")
    if rep.listing is not None:
        lines.append(f"  Claude Code's listing here: {rep.listing.text}")
        if rep.listing.fix:
            lines.append(f"    fix: {rep.listing.fix}")
    return lines


def _cost(rep: r.Report) -> list[str]:
    c = rep.cost
    t = c.tokens
    lines = ["", f"reflection cost ({c.model}, list price; batch items at the batch price):",
             f"  {c.calls} model calls for {c.jobs} jobs ({c.batch_items} batch items); "
             f"{c.tool_calls:,} main-session tool calls",
             f"  tokens: input {t.input_uncached:,.0f} uncached, {t.cache_write:,.0f} cache "
             f"write, {t.cache_read:,.0f} cache read; output {t.output:,.0f}",
             f"  money: {_usd(c.usd)} in all, {_usd(c.usd_per_job)} per job, "
             f"{_usd(c.usd_per_100_tool_calls)} per 100 tool calls"]
    if c.per_job is not None:
        pj = c.per_job
        lines.append(f"  per job: input {pj.input_uncached:,.0f} + cache write "
                     f"{pj.cache_write:,.0f} + cache read {pj.cache_read:,.0f}, output "
                     f"{pj.output:,.0f}")
    return lines


def _skills(rep: r.Report) -> list[str]:
    lines = ["", "skills:"] + ([] if rep.skills else ["  none"])
    for s in rep.skills:
        stage = f"archived ({s.reason})" if s.status == "archived" else s.stage
        fb = "  " + " ".join(f"{k} {v}" for k, v in s.feedback.items() if v) if s.feedback else ""
        stale = f"  stale: {', '.join(s.stale)}" if s.stale else ""
        lines.append(f"  {s.name:<28} {s.layer:<8} {s.owner:<11} {stage:<20} uses {s.uses:<4} "
                     f"turns {s.turns:<4} landed {day(s.landed_at)} updated "
                     f"{day(s.updated_at)}{fb}{stale}")
        if s.check is not None:
            lines.append(f"    check: {check_line(s.check)}")
            lines += [f"      {a.project or '(no project)'}: {adherence_line(a)}"
                      for a in s.check.adherence]
        if s.learned is not None:
            lines.append(f"    {learned_words(s.learned)}")
    if rep.feedback:
        lines.append("verdicts: " + ", ".join(f"{k} {v}" for k, v in rep.feedback.items()))
    return lines
