"""`report --html`: one self-contained page, checked in a real headless Chromium: it renders
with no console message, its screenshot is not blank, and every figure it shows is the
`--json` figure at the path its `data-figure` names. Under CI (CI=true) the browser must be
there: the test fails instead of skipping."""

import json
import os
import re
from html.parser import HTMLParser

import pytest

import browser
from claude_autoharness.client.report_html import human
from fake_anthropic import FakeAnthropic, tool_reply
from harness import ctl, hook, wait_for
from pipeline_support import proposal
from report_support import Env

EXE = browser.chromium()
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture
def chromium():
    if EXE is None:
        if IN_CI:
            pytest.fail("CI needs Chromium for the page test: apt-get install -y chromium")
        pytest.skip("no Chromium on PATH (apt-get install -y chromium)")
    return EXE


class Figures(HTMLParser):
    """Every element with a data-figure attribute: (path, its data-value). Its text, what a
    person reads (`50%` for 0.5), is kept in `texts`."""

    def __init__(self):
        super().__init__()
        self.found: list[tuple[str, str]] = []
        self.texts: dict[str, str] = {}
        self._values: list[str] = []
        self._open: list[list] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-figure" in a:
            self._values.append(a.get("data-value") or "")
            self._open.append([tag, a["data-figure"], ""])
        elif self._open:
            self._open.append([tag, None, ""])

    def handle_endtag(self, tag):
        if self._open:
            t, path, text = self._open.pop()
            if path is not None:
                self.texts[path] = text.strip()
                self.found.append((path, self._values.pop()))
            elif self._open:
                self._open[-1][2] += text

    def handle_data(self, data):
        if self._open:
            self._open[-1][2] += data


def lookup(data, path: str):
    for part in path.split("."):
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


def shown(v) -> str:
    return "n/a" if v is None else json.dumps(v)


def test_page_renders_in_chromium_and_shows_the_json_figures(home, monkeypatch, chromium,
                                                             short_tmp):
    """A daemon that reflected once (one landing, one rejection), counted a skill load and
    a SessionStart: `report --json --html FILE` writes a page that fetches nothing, that
    Chromium renders with no console message, whose screenshot is far from blank, and whose
    every figure (funnel, recall, context, cost, skills) equals the JSON's."""
    with FakeAnthropic() as fake:
        fake.push(tool_reply({"proposals": [
            proposal(), proposal(skill="made-up", evidence="words the session never said")]}))
        e = Env(home, fake, monkeypatch)
        try:
            e.work(n=3)
            wait_for(lambda: e.status()["intents"].get("rejected") == 1
                     and e.status()["intents"].get("landed") == 1, timeout=60, what="intake")
            hook(e.ev("PreToolUse", tool_name="Skill", tool_input={"skill": "check-server-start"}))
            hook(e.ev("SessionStart", source="startup"))
            wait_for(lambda: json.loads(ctl("report", "--json").stdout)["recall"]["layers"]
                     .get("project", {}).get("loaded"), what="the load counted")
            page = short_tmp / "report.html"
            r = ctl("report", "--json", "--html", str(page))
            assert r.returncode == 0, r.stderr
            data = json.loads(r.stdout)
        finally:
            e.daemon.stop()
    text = page.read_text()
    assert oct(page.stat().st_mode & 0o777) == "0o600"
    # self-contained: nothing to fetch, no script to run
    assert not re.search(r"""(src|href)\s*=|@import|url\(|<link|<script(?![^>]*application/json)""",
                         text, re.I), "the page references something outside itself"
    assert text.count("<svg") >= 4

    profile = short_tmp / "profile"
    profile.mkdir()
    dom = browser.run(chromium, page, "--dump-dom", profile=profile)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert browser.console_lines(dom.stderr) == []
    parser = Figures()
    parser.feed(dom.stdout.decode())
    figures = parser.found
    paths = {p for p, _ in figures}
    for must in ("funnel.reflections.period", "funnel.landed.period", "funnel.rejected.period",
                 "funnel.rejected_by_reason.unattributable.period", "recall.layers.project.share",
                 "context.total_chars", "context.session_start.max_chars",
                 "cost.tokens.input_uncached", "cost.usd", "cost.per_job.output",
                 "cost.per_100_tool_calls.cache_read", "skills.0.uses"):
        assert must in paths, f"{must} not shown"
    for path, value in figures:
        assert value == shown(lookup(data, path)), f"{path}: page {value!r}, JSON {lookup(data, path)!r}"
        assert parser.texts[path] == human(path, lookup(data, path))  # what a person reads
    assert data["funnel"]["landed"]["period"] == 1 and data["cost"]["usd"]

    shot = short_tmp / "shot.png"
    r = browser.run(chromium, page, f"--screenshot={shot}", "--window-size=900,1800",
                    profile=profile)
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    assert browser.console_lines(r.stderr) == []
    drawn, total = browser.non_white(shot.read_bytes())
    assert drawn > total // 50, f"the screenshot is nearly blank: {drawn} of {total} pixels"


def test_the_console_check_sees_console_errors(chromium, short_tmp):
    """The console check is not vacuous: a page that logs an error is caught by it."""
    bad = short_tmp / "bad.html"
    bad.write_text("<!doctype html><p>x</p><script>console.error('boom-7c1')</script>")
    profile = short_tmp / "profile"
    profile.mkdir()
    r = browser.run(chromium, bad, "--dump-dom", profile=profile)
    lines = browser.console_lines(r.stderr)
    assert any("boom-7c1" in line for line in lines), r.stderr.decode()[-2000:]
