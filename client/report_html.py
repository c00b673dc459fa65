"""`report --html`: one self-contained page of the report's figures.

Nothing is fetched and nothing runs: styles are inline CSS, the charts inline SVG drawn here
from the numbers (bars, lines and text, a few dozen lines of Python, so no plotting library
enters the install), and the page works from disk with no network. Every number shown sits in
an element whose `data-figure` attribute names its path in the `--json` reply and whose text is
that value as JSON writes it, so the page can be checked against the JSON; the reply itself is
embedded as `application/json` data (read by no script). All text is HTML-escaped.
"""

import html
import json
import math

from ..protocol import replies as r
from ..protocol.words import day, learned_words

W, BAR_H, GAP = 640, 22, 8
COLORS = {"user": "#4c72b0", "project": "#dd8452", "landed": "#55a868", "archived": "#c44e52",
          "bar": "#4c72b0", "input_uncached": "#4c72b0", "cache_write": "#dd8452",
          "cache_read": "#8c8c8c", "output": "#55a868"}
# the token kinds as column headers and legends say them (the JSON keys are for programs)
LABELS = {"input_uncached": "input (uncached)", "cache_write": "cache write",
          "cache_read": "cache read", "output": "output"}
CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px auto;max-width:980px;
color:#222;background:#fff;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;
padding-bottom:4px}.sub{color:#666;margin:0 0 16px}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eee;vertical-align:top}
th{background:#f6f6f6;font-weight:600}td.n,th.n{text-align:right}
.cards{display:flex;flex-wrap:wrap;gap:12px}.card{border:1px solid #ddd;border-radius:6px;
padding:8px 12px;min-width:130px}.card b{display:block;font-size:20px}.card span.l{color:#666}
svg{display:block;max-width:100%;height:auto}svg text{font:12px system-ui,sans-serif;fill:#333}
.scroll{overflow-x:auto}td.d{white-space:nowrap}
.headline{border:1px solid #ccd;border-radius:6px;background:#f5f7ff;padding:10px 14px;margin:12px 0}
.headline b{font-size:16px}.state-waiting,.state-paused{background:#fff6e5;border-color:#e8c98a}
.legend span{display:inline-block;margin-right:14px}.legend i{display:inline-block;width:10px;
height:10px;margin-right:4px;vertical-align:middle}.muted{color:#888}
"""


def esc(v: object) -> str:
    return html.escape(str(v), quote=True)


def jtext(v: object) -> str:
    """A value as the JSON reply writes it, `n/a` for null (the page's figures are compared
    with the JSON)."""
    return "n/a" if v is None else json.dumps(v)


def human(path: str, v: object) -> str:
    """A figure as a person reads it: shares as percents, money to the cent's hundredth,
    counts with thousands separators, means without decimals; `n/a` for null."""
    if v is None:
        return "n/a"
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    leaf = path.rsplit(".", 1)[-1]
    if leaf == "share":
        return f"{v:.0%}"
    if leaf.startswith("usd"):
        return f"${v:,.4f}"
    return f"{v:,.0f}"


def fig(path: str, value: object, *, tag: str = "span", cls: str = "") -> str:
    """One figure: its text for people (`human`), its `--json` path and value as attributes,
    so the page can be checked against the reply."""
    c = f' class="{cls}"' if cls else ""
    return (f'<{tag}{c} data-figure="{esc(path)}" data-value="{esc(jtext(value))}">'
            f'{esc(human(path, value))}</{tag}>')


# ---- charts ------------------------------------------------------------------------------------

def ticks(peak: float, n: int = 4) -> list[int]:
    """Whole-number axis ticks from 0 to at least `peak`, about `n` steps."""
    step = max(1, math.ceil(peak / n))
    out = [0]
    while out[-1] < peak:
        out.append(out[-1] + step)
    return out if len(out) > 1 else [0, 1]


def hbars(rows: list[tuple[str, str, float]], title: str) -> str:
    """Horizontal bars: (label, figure path, value) each; widths scale to the largest."""
    left, right = 150, 70
    top = 6
    h = top + len(rows) * (BAR_H + GAP)
    peak = max([v for _, _, v in rows] + [1])
    out = [f'<svg viewBox="0 0 {W} {h}" width="{W}" height="{h}" role="img" '
           f'aria-label="{esc(title)}"><title>{esc(title)}</title>']
    for i, (label, path, v) in enumerate(rows):
        y = top + i * (BAR_H + GAP)
        w = (W - left - right) * (v / peak)
        out.append(f'<text x="{left - 8}" y="{y + 15}" text-anchor="end">{esc(label)}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{BAR_H}" '
                   f'fill="{COLORS["bar"]}" rx="2"/>')
        out.append(f'<text x="{left + w + 6:.1f}" y="{y + 15}" data-figure="{esc(path)}" '
                   f'data-value="{esc(jtext(v))}">{esc(human(path, v))}</text>')
    out.append("</svg>")
    return "".join(out)


def lines_chart(days: list[str], series: dict[str, list[int]], title: str) -> str:
    """A line per series over the days (the library's size)."""
    left, bottom, top, h = 40, 24, 10, 200
    axis = ticks(max([max(s, default=0) for s in series.values()] + [1]))
    peak = axis[-1]
    n = max(1, len(days) - 1)
    pw, ph = W - left - 10, h - top - bottom
    out = [f'<svg viewBox="0 0 {W} {h}" width="{W}" height="{h}" role="img" '
           f'aria-label="{esc(title)}"><title>{esc(title)}</title>']
    out += _grid(axis, left, top, ph)
    for name, vals in series.items():
        pts = " ".join(f"{left + pw * i / n:.1f},{top + ph - ph * v / peak:.1f}"
                       for i, v in enumerate(vals))
        if len(vals) == 1:
            pts += f" {left + pw:.1f},{top + ph - ph * vals[0] / peak:.1f}"
        out.append(f'<polyline fill="none" stroke="{COLORS[name]}" stroke-width="2" '
                   f'points="{pts}"/>')
    out += _day_labels(days, left, h)
    out.append("</svg>")
    return "".join(out)


def day_bars(days: list[str], series: dict[str, list[int]], title: str) -> str:
    """Side-by-side bars per day (landings and archives)."""
    left, bottom, top, h = 40, 24, 10, 180
    axis = ticks(max([max(s, default=0) for s in series.values()] + [1]), 3)
    peak = axis[-1]
    pw, ph = W - left - 10, h - top - bottom
    slot = pw / max(1, len(days))
    bw = max(1.0, slot * 0.8 / max(1, len(series)))
    out = [f'<svg viewBox="0 0 {W} {h}" width="{W}" height="{h}" role="img" '
           f'aria-label="{esc(title)}"><title>{esc(title)}</title>']
    out += _grid(axis, left, top, ph)
    for j, (name, vals) in enumerate(series.items()):
        for i, v in enumerate(vals):
            if not v:
                continue
            bh = ph * v / peak
            x = left + slot * i + slot * 0.1 + bw * j
            out.append(f'<rect x="{x:.1f}" y="{top + ph - bh:.1f}" width="{bw:.1f}" '
                       f'height="{bh:.1f}" fill="{COLORS[name]}"><title>{esc(days[i])}: '
                       f'{v} {esc(name)}</title></rect>')
    out += _day_labels(days, left, h)
    out.append("</svg>")
    return "".join(out)


def _day_labels(days: list[str], left: int, h: int) -> list[str]:
    """The first and the last day under a chart's x axis."""
    if not days:
        return []
    return [f'<text x="{left}" y="{h - 6}">{esc(days[0])}</text>',
            f'<text x="{W - 10}" y="{h - 6}" text-anchor="end">{esc(days[-1])}</text>']


def _grid(axis: list[int], left: int, top: int, ph: int) -> list[str]:
    out = []
    for v in axis:
        y = top + ph - ph * v / axis[-1]
        out.append(f'<line x1="{left}" x2="{W - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{v}</text>')
    return out


def stacked(parts: list[tuple[str, str, float]], title: str) -> str:
    """One stacked bar of token kinds, with a legend carrying the figures."""
    total = sum(v for _, _, v in parts) or 1
    h, x = 30, 0.0
    out = [f'<svg viewBox="0 0 {W} {h}" width="{W}" height="{h}" role="img" '
           f'aria-label="{esc(title)}"><title>{esc(title)}</title>']
    for name, _, v in parts:
        w = W * v / total
        if w > 0:
            out.append(f'<rect x="{x:.1f}" y="4" width="{w:.1f}" height="22" '
                       f'fill="{COLORS[name]}"/>')
        x += w
    out.append("</svg>")
    legend = "".join(f'<span><i style="background:{COLORS[name]}"></i>{esc(LABELS[name])} '
                     f'{fig(path, v)}</span>' for name, path, v in parts)
    return "".join(out) + f'<p class="legend">{legend}</p>'


def legend(names: list[str]) -> str:
    return '<p class="legend">' + "".join(
        f'<span><i style="background:{COLORS[n]}"></i>{esc(n)}</span>' for n in names) + "</p>"


# ---- the page ----------------------------------------------------------------------------------

def render(rep: r.Report, data: dict) -> str:
    """The page for one reply: `rep` is `data` (the reply as JSON builtins) typed."""
    f = rep.funnel
    names = [("reflections run", "reflections"), ("proposals made", "proposals"),
             ("landed", "landed"), ("rejected", "rejected"), ("held", "held"),
             ("archived", "archived"), ("restored", "restored")]
    funnel_rows = [(label, f"funnel.{key}.period", getattr(f, key).period)
                   for label, key in names]
    body = [_headline(rep.headline),
            f"<h1>autoharness: what it learned and what it costs</h1>"
            f'<p class="sub">the last {fig("days", rep.days)} days, since '
            f"{esc(day(rep.since))}; generated {esc(day(rep.generated_at))}</p>",
            "<h2>Funnel</h2>", hbars(funnel_rows, "proposals to landings over the period"),
            _count_table("rejected, by reason", "funnel.rejected_by_reason",
                         f.rejected_by_reason),
            _count_table("archived, by cause", "funnel.archived_by_cause", f.archived_by_cause),
            _today(f, names)]
    shown = active_days(rep.library)
    days = [d.day for d in shown]
    if not any(d.user or d.project or d.landed or d.archived for d in shown):
        later = rep.headline.later or "the charts fill from the first landing"
        body += ["<h2>Library over time</h2>",
                 f'<p class="muted">nothing landed in the period yet: {esc(later)}</p>']
    else:
        body += ["<h2>Library size over time</h2>",
                 lines_chart(days, {"user": [d.user for d in shown],
                                    "project": [d.project for d in shown]},
                             "live autoharness skills per layer"), legend(["user", "project"]),
                 "<h2>Landings and archives over time</h2>",
                 day_bars(days, {"landed": [d.landed for d in shown],
                                 "archived": [d.archived for d in shown]},
                          "landings and archives per day"), legend(["landed", "archived"])]
    body += ["<h2>Recall</h2>", _recall(rep.recall), _recall_split(rep.recall_split),
             "<h2>Context cost</h2>",
             _context(rep.context), _listing(rep.listing), "<h2>Reflection cost</h2>", _cost(rep.cost),
             "<h2>Skills</h2>", _skills(rep), "<h2>Checks</h2>", _checks(rep)]
    blob = json.dumps(data, sort_keys=True).replace("</", "<\\/")
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            "<title>autoharness report</title>"
            f"<style>{CSS}</style></head><body>{''.join(body)}"
            f'<script type="application/json" id="report-data">{blob}</script>'
            "</body></html>\n")


MIN_DAYS = 7


def active_days(library: list[r.LibraryDay]) -> list[r.LibraryDay]:
    """The days a time chart shows: from the first with anything in the library (at least the
    last MIN_DAYS), so a library a day old is not one spike at the right edge of a month."""
    first = next((i for i, d in enumerate(library)
                  if d.user or d.project or d.landed or d.archived), len(library))
    return library[max(0, min(first, len(library) - MIN_DAYS)):]


def _headline(h: r.Headline) -> str:
    """The page's first words: the one-line answer and the next step."""
    if not h.answer:
        return ""
    later = f'<div class="muted">{esc(h.later)}</div>' if h.later else ""
    return (f'<div class="headline state-{esc(h.state)}" data-state="{esc(h.state)}">'
            f"<b>{esc(h.answer)}</b><div>next: {esc(h.next)}</div>{later}</div>")


def _today(f: r.Funnel, names: list[tuple[str, str]]) -> str:
    cards = "".join(f'<div class="card"><b>{fig(f"funnel.{key}.today", getattr(f, key).today)}'
                    f'</b><span class="l">{esc(label)} today</span></div>' for label, key in names)
    return f'<div class="cards">{cards}</div>'


def _count_table(title: str, path: str, counts: dict[str, r.Count]) -> str:
    if not counts:
        return f'<p class="muted">{esc(title)}: none</p>'
    rows = "".join(f"<tr><td>{esc(k)}</td>{fig(f'{path}.{k}.period', c.period, tag='td', cls='n')}"
                   f"{fig(f'{path}.{k}.today', c.today, tag='td', cls='n')}</tr>"
                   for k, c in counts.items())
    return (f"<h3>{esc(title)}</h3><table><tr><th></th><th class=\"n\">period</th>"
            f"<th class=\"n\">today</th></tr>{rows}</table>")


def _recall(rc: r.Recall) -> str:
    if not rc.layers:
        return '<p class="muted">no live autoharness skills</p>'
    rows = "".join(
        f"<tr><td>{esc(layer)}</td>{fig(f'recall.layers.{layer}.loaded', lr.loaded, tag='td', cls='n')}"
        f"{fig(f'recall.layers.{layer}.live', lr.live, tag='td', cls='n')}"
        f"{fig(f'recall.layers.{layer}.share', lr.share, tag='td', cls='n')}</tr>"
        for layer, lr in sorted(rc.layers.items()))
    return (f"<p>live autoharness skills loaded at least once in the last "
            f"{fig('recall.turns', rc.turns)} turns of their layer</p><table><tr><th>layer</th>"
            f"<th class=\"n\">loaded</th><th class=\"n\">live</th><th class=\"n\">share</th></tr>"
            f"{rows}</table>")


def _recall_split(sp: r.RecallSplit) -> str:
    """Recall with and without a reminder, and listed with and without a description."""
    rows = "".join(
        f"<tr><td>{esc(label)}</td>"
        + "".join(fig(f"recall_split.{key}.{k}", getattr(getattr(sp, key), k), tag="td", cls="n")
                  for k in ("loaded", "situations", "share")) + "</tr>"
        for label, key in (("reminded", "reminded"), ("not reminded", "not_reminded"),
                           ("listed with description", "listed_full"),
                           ("listed by name only", "name_only")))
    return ("<p>sessions where a learned skill's situation came up, and how many loaded it"
            "</p><table><tr><th></th><th class=\"n\">loaded</th><th class=\"n\">situations"
            "</th><th class=\"n\">share</th></tr>" + rows + "</table>")


def _context(cx: r.ContextCost) -> str:
    rows = "".join(
        f"<tr><td>{esc(layer)}</td>"
        + "".join(fig(f"context.layers.{layer}.{k}", getattr(lc, k), tag="td", cls="n")
                  for k in ("skills", "chars", "autoharness_skills", "autoharness_chars"))
        + "</tr>" for layer, lc in sorted(cx.layers.items()))
    ss = cx.session_start
    return ("<p>characters of the skill listing (<code>- name: description</code> lines) "
            "Claude Code sends in every request</p><table><tr><th>layer</th>"
            "<th class=\"n\">skills</th><th class=\"n\">chars</th><th class=\"n\">autoharness "
            "skills</th><th class=\"n\">autoharness chars</th></tr>" + rows
            + "<tr><th>total</th><td></td>"
            + fig("context.total_chars", cx.total_chars, tag="td", cls="n") + "<td></td>"
            + fig("context.total_autoharness_chars", cx.total_autoharness_chars, tag="td", cls="n")
            + "</tr></table>"
            f"<p>SessionStart context autoharness added: "
            f"{fig('context.session_start.sent', ss.sent)} {'time' if ss.sent == 1 else 'times'}, mean "
            f"{fig('context.session_start.mean_chars', ss.mean_chars)} chars, max "
            f"{fig('context.session_start.max_chars', ss.max_chars)} chars</p>")


def _listing(s: r.ListingSummary | None) -> str:
    """Claude Code's skill listing where the report was made: its budget, and the learned
    skills it shows by name only, with the fix."""
    if s is None:
        return ""
    hidden = "".join(f"<li>{esc(n)}</li>" for n in s.autoharness_name_only)
    return ("<p>Claude Code's skill listing here: "
            f"{fig('listing.chars', s.chars)} of {fig('listing.budget', s.budget)} characters; "
            f"{fig('listing.name_only', s.name_only)} entries by name only, of them "
            f"{len(s.autoharness_name_only)} learned skills</p>"
            + (f"<ul>{hidden}</ul><p>fix: {esc(s.fix)}</p>" if hidden else ""))


def _cost(c: r.ReflectionCost) -> str:
    kinds = ("input_uncached", "cache_write", "cache_read", "output")
    parts = [(k, f"cost.tokens.{k}", getattr(c.tokens, k)) for k in kinds]

    def per(name: str, t: r.Tokens | None) -> str:
        if t is None:
            return fig(f"cost.{name}", None, tag="td", cls="n") + "<td></td>" * (len(kinds) - 1)
        return "".join(fig(f"cost.{name}.{k}", getattr(t, k), tag="td", cls="n") for k in kinds)

    return (f"<p>model {esc(c.model)}: {fig('cost.calls', c.calls)} model calls for "
            f"{fig('cost.jobs', c.jobs)} jobs ({fig('cost.batch_items', c.batch_items)} batch "
            f"items), {fig('cost.tool_calls', c.tool_calls)} main-session tool calls</p>"
            + stacked(parts, "tokens by kind")
            + "<table><tr><th></th>" + "".join(f'<th class="n">{esc(LABELS[k])}</th>' for k in kinds)
            + "</tr><tr><td>per job</td>" + per("per_job", c.per_job)
            + "</tr><tr><td>per 100 tool calls</td>"
            + per("per_100_tool_calls", c.per_100_tool_calls) + "</tr></table>"
            + f"<p>at list price: {fig('cost.usd', c.usd)} in all, "
            f"{fig('cost.usd_per_job', c.usd_per_job)} per job, "
            f"{fig('cost.usd_per_100_tool_calls', c.usd_per_100_tool_calls)} per 100 tool "
            f"calls (batch items at the batch price)</p>")


def _skills(rep: r.Report) -> str:
    if not rep.skills:
        return '<p class="muted">no skills</p>'
    head = ("<tr><th>skill</th><th>layer</th><th>owner</th><th>stage</th><th class=\"n\">uses"
            "</th><th class=\"n\">turns</th><th>landed</th><th>updated</th><th>feedback</th></tr>")
    rows = []
    for i, s in enumerate(rep.skills):
        stage = f"archived ({s.reason})" if s.status == "archived" and s.reason else s.stage
        if s.stale:
            stage += " · stale: " + ", ".join(s.stale)
        if s.feedback is not None:
            fb = " ".join(f"{esc(k)} {fig(f'skills.{i}.feedback.{k}', v)}"
                          for k, v in s.feedback.items())
        else:
            fb = '<span class="muted">none recorded</span>'
        who = (f'<div class="muted">{esc(learned_words(s.learned))}</div>' if s.learned
               else "")
        rows.append(f"<tr><td>{esc(s.name)}{who}</td><td>{esc(s.layer)}</td><td>{esc(s.owner)}</td>"
                    f"<td>{esc(stage)}</td>{fig(f'skills.{i}.uses', s.uses, tag='td', cls='n')}"
                    f"{fig(f'skills.{i}.turns', s.turns, tag='td', cls='n')}"
                    f'<td class="d">{esc(day(s.landed_at))}</td>'
                    f'<td class="d">{esc(day(s.updated_at))}</td>'
                    f"<td>{fb}</td></tr>")
    total = ""
    if rep.feedback:
        total = "<p>verdicts over all skills: " + ", ".join(
            f"{esc(k)} {fig(f'feedback.{k}', v)}" for k, v in rep.feedback.items()) + "</p>"
    return f'<div class="scroll"><table>{head}{"".join(rows)}</table></div>{total}'


_CHECK_FIGURES = (("before_violations", "violations before"), ("before_calls", "calls before"),
                  ("violations", "violations since"), ("calls", "calls since"),
                  ("reminded", "reminded"), ("asked", "asked"),
                  ("approved", "asks approved"), ("declined", "asks declined"), ("denied", "denied"),
                  ("complied", "complied after a deny"), ("repeated", "repeated after a deny"))


def _checks(rep: r.Report) -> str:
    """Per lesson with a check and per project: violations before it landed and since."""
    rows = []
    for i, s in enumerate(rep.skills):
        c = s.check
        if c is None:
            continue
        for j, a in enumerate(c.adherence):
            at = f"skills.{i}.check.adherence.{j}"
            cells = "".join(fig(f"{at}.{k}", getattr(a, k), tag="td", cls="n")
                            for k, _ in _CHECK_FIGURES)
            rows.append(f"<tr><td>{esc(s.name)}</td><td>{esc(c.rule)}</td>"
                        f"<td>{esc(c.action)}</td><td>{esc(a.project or '-')}</td>{cells}</tr>")
    if not rows:
        return '<p class="muted">no checks</p>'
    head = ("<tr><th>skill</th><th>rule</th><th>action</th><th>project</th>"
            + "".join(f'<th class="n">{esc(t)}</th>' for _, t in _CHECK_FIGURES) + "</tr>")
    return (f"<table>{head}{''.join(rows)}</table><p class=\"muted\">a before/after on your own "
            "sessions, not a controlled trial</p>")
