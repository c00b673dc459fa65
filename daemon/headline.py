"""The report's headline: one line that answers "is it learning, and if not, why, and what do
I do", from what `status` knows (paused, why jobs wait, sessions and events counted) and the
report's own figures. A pure function: the report handler calls it with both.

The states, first match wins:
- paused: the hooks count nothing until `resume`;
- waiting: reflection jobs cannot run (no reflector backend, the daily token budget spent),
  said with how many wait and the fix;
- nothing_yet: nothing has been reflected on in the period (no session reported yet, or none
  reached a reflection), said with when the first reflection comes;
- learning: reflections ran; the next step is what needs the user (held proposals) or where
  to look.
"""

from __future__ import annotations

from ..protocol import replies as r
from ..protocol.words import plural, waiting_reason

NO_BACKEND_FIX = ("give the daemon a reflector: ANTHROPIC_API_KEY (or reflector.api_key in "
                  "the config) in its environment, or Claude Code's `claude` on its PATH, then "
                  "`autoharnessctl restart`; `autoharnessctl doctor` checks it")
BUDGET_FIX = ("jobs run again once the day's tokens reset at local midnight; raise "
              "reflector.daily_token_budget to let them run now")


def _later(reflect_every: int) -> str:
    return (f"each session is reflected on once it has {plural(reflect_every, 'tool call')} "
            "at the end of a turn, and when it ends; the funnel, the costs and the charts "
            "fill from the first reflection, skills from the first landing")


def headline(st: r.Status, rep: r.Report, *, reflect_every: int) -> r.Headline:
    f = rep.funnel
    waiting = waiting_reason(st)
    queued = st.jobs.pending + st.jobs.running
    live = sum(1 for s in rep.skills if s.status == "live" and s.owner == "autoharness")
    if st.paused:
        return r.Headline(state="paused", answer="paused: the hooks count nothing and no "
                          "session is reflected on", next="`autoharnessctl resume`",
                          later=_later(reflect_every))
    if waiting:
        if st.jobs.pending:
            answer = (f"waiting: {plural(st.jobs.pending, 'reflection job')} cannot run "
                      f"({waiting}); nothing is reflected on until then")
        else:
            answer = (f"waiting: no reflection can run ({waiting}); sessions are counted, "
                      "nothing is reflected on until then")
        return r.Headline(
            state="waiting", answer=answer,
            next=BUDGET_FIX if "budget" in waiting else NO_BACKEND_FIX,
            later=_later(reflect_every))
    if f.reflections.period == 0:
        if st.events.received == 0 and st.sessions_total == 0:
            answer = "nothing to learn from yet: no Claude Code session has reported to the daemon"
            step = ("wire the hooks (`autoharnessctl install`), then work in Claude Code; "
                    "`autoharnessctl doctor` checks the set-up")
        else:
            answer = (f"nothing to learn from yet: {plural(st.sessions_total, 'session')} "
                      f"counted, none reflected on in the last {plural(rep.days, 'day')}"
                      + (f"; {plural(queued, 'job')} queued" if queued else ""))
            step = "keep working, or reflect now: `autoharnessctl flush --all`"
        return r.Headline(state="nothing_yet", answer=answer, next=step,
                          later=_later(reflect_every))
    answer = (f"learning: {plural(f.reflections.period, 'reflection')} in the last "
              f"{plural(rep.days, 'day')}, {f.landed.period} landed, "
              f"{plural(live, 'live autoharness skill')}")
    if f.held.period:
        step = (f"{plural(f.held.period, 'proposal')} held for your review: "
                "`autoharnessctl queue list --status held`")
    elif not live:
        step = ("nothing landed yet: `autoharnessctl queue list` shows what was proposed and "
                "why it was refused")
    else:
        step = "see what it learned: `autoharnessctl skills list`"
    return r.Headline(state="learning", answer=answer, next=step,
                      later="" if live else _later(reflect_every))
