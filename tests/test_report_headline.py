"""The report opens with a one-line answer and the next step, in the text, the JSON and the
page: waiting (and for what) when nothing can reflect, paused, nothing to learn from yet (and
when something will appear); the page reads as numbers for people (percents, dollars, plain
counts, words for column headers, dates that do not wrap, a table that scrolls) and its time
charts start where the library does. Real daemon, real CLI."""

import json
import re

from claude_autoharness.client import report_html
from claude_autoharness.protocol import replies as r
from harness import Daemon, ctl, hook, pre_tool, wait_for


def _report(tmp):
    text = ctl("report")
    js = ctl("report", "--json")
    page = tmp / "report.html"
    assert ctl("report", "--html", str(page)).returncode == 0
    assert text.returncode == 0 and js.returncode == 0, text.stderr + js.stderr
    return text.stdout, js.stdout, page.read_text()


def test_no_backend_and_two_jobs_waiting_say_so_first_everywhere(home, short_tmp, monkeypatch):
    monkeypatch.setenv("PATH", str(short_tmp / "no-claude-here"))  # and no API key (home)
    d = Daemon(home["home"])
    try:
        for sid in ("s1", "s2"):
            hook(pre_tool(sid))
        assert ctl("flush", "--all").returncode == 0
        wait_for(lambda: d.status()["jobs"]["pending"] == 2, what="two jobs queued")
        text, js, page = _report(short_tmp)
    finally:
        d.stop()
    first, second = text.splitlines()[:2]
    assert first.startswith("waiting: 2 reflection jobs cannot run (no reflector backend")
    assert second.startswith("next: give the daemon a reflector: ANTHROPIC_API_KEY")
    assert "autoharnessctl restart" in second
    assert js.lstrip().startswith('{\n  "headline": {')
    head = json.loads(js)["headline"]
    assert head["state"] == "waiting" and head["answer"] == first
    assert 'data-state="waiting"' in page and report_html.esc(first) in page
    assert page.index("headline") < page.index("<h1>")


def test_no_backend_before_any_session_is_waiting_for_one(home, short_tmp, monkeypatch):
    monkeypatch.setenv("PATH", str(short_tmp / "no-claude-here"))
    d = Daemon(home["home"])
    try:
        head = json.loads(ctl("report", "--json").stdout)["headline"]
    finally:
        d.stop()
    assert head["state"] == "waiting"
    assert head["answer"].startswith("waiting: no reflection can run (no reflector backend")


def test_an_empty_state_says_what_will_appear_and_when(home, short_tmp):
    d = Daemon(home["home"], env={"AUTOHARNESS_REFLECT_EVERY": "20",
                                  "ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key"})
    try:
        text, js, page = _report(short_tmp)
        assert ctl("pause").returncode == 0
        paused = json.loads(ctl("report", "--json").stdout)["headline"]
    finally:
        d.stop()
    lines = text.splitlines()
    assert lines[0] == ("nothing to learn from yet: no Claude Code session has reported to the "
                        "daemon")
    assert lines[1].startswith("next: wire the hooks (`autoharnessctl install`)")
    assert lines[2].startswith("later: each session is reflected on once it has 20 tool calls")
    assert json.loads(js)["headline"]["state"] == "nothing_yet"
    # the page: no blank charts, the words of what will come instead
    assert "Library size over time" not in page
    assert "nothing landed in the period yet: each session is reflected on once" in page
    assert paused["state"] == "paused" and paused["next"] == "`autoharnessctl resume`"


def test_sessions_counted_but_none_reflected_name_the_way_to_reflect_now(home, short_tmp):
    d = Daemon(home["home"], env={"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key"})
    try:
        hook(pre_tool("s1"))
        head = json.loads(ctl("report", "--json").stdout)["headline"]
    finally:
        d.stop()
    assert head["state"] == "nothing_yet"
    assert head["answer"] == "nothing to learn from yet: 1 session counted, none reflected on " \
                             "in the last 30 days"
    assert "`autoharnessctl flush --all`" in head["next"]


def _rep() -> tuple[r.Report, dict]:
    days = [r.LibraryDay(day=f"2026-11-{d:02d}") for d in range(1, 31)]
    days[-1] = r.LibraryDay(day="2026-11-30", project=1, landed=1)
    rep = r.Report(
        generated_at=1796000000.0, days=30, since=1793400000.0,
        recall=r.Recall(turns=50, layers={"project": r.LayerRecall(live=2, loaded=1,
                                                                    share=0.5)}),
        context=r.ContextCost(session_start=r.SessionStartContext(sent=1, mean_chars=814.2,
                                                                  max_chars=814)),
        cost=r.ReflectionCost(model="claude-haiku-4-5", calls=1, jobs=1, usd=0.007438,
                              tokens=r.Tokens(input_uncached=16842.0)),
        skills=[r.SkillRow(name="a-rather-long-skill-name", layer="project",
                           owner="autoharness", landed_at=1796000000.0,
                           updated_at=1796000000.0)],
        library=days)
    import msgspec

    return rep, msgspec.to_builtins(rep)


def test_the_page_reads_as_numbers_for_people():
    rep, data = _rep()
    page = report_html.render(rep, data)

    def shown(path):
        m = re.search(rf'data-figure="{re.escape(path)}" data-value="([^"]*)">([^<]*)<', page)
        assert m, path
        return m.group(1), m.group(2)

    assert shown("recall.layers.project.share") == ("0.5", "50%")
    assert shown("cost.usd") == ("0.007438", "$0.0074")
    assert shown("context.session_start.mean_chars") == ("814.2", "814")
    assert shown("cost.tokens.input_uncached") == ("16842.0", "16,842")
    assert "1</span> time, mean" in page and "1 times" not in page
    assert ">input (uncached)<" in page and ">input_uncached<" not in page
    assert '<td class="d">' in page and "td.d{white-space:nowrap}" in page
    assert '<div class="scroll"><table><tr><th>skill</th>' in page
    # the time charts start a week before the first day with anything in the library
    assert ">2026-11-24<" in page and ">2026-11-01<" not in page
    assert report_html.active_days(rep.library)[0].day == "2026-11-24"
