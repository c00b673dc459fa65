"""The docs' examples are the real output: each block marked `checked against the real
output` is compared with what the command prints here, in a real daemon, after the parts that
change from run to run (paths, ids, dates, numbers, names, plurals) are masked on both sides.
The doctor example lists the very checks doctor runs, in order, with the real count; the
report and history examples have only lines of the real output's shape, and the report's
every section."""

import json
import re

from conftest import REPO
from fake_anthropic import FakeAnthropic, tool_reply
from harness import ctl, wait_for
from pipeline_support import proposal
from report_support import Env

MARK = "<!-- checked against the real output by tests/test_docs_examples.py -->"


def examples(doc: str) -> dict[str, list[str]]:
    """The checked blocks of a doc: the command after `$ ` -> the lines it shows."""
    text = (REPO / "docs" / doc).read_text()
    out = {}
    for block in re.findall(re.escape(MARK) + r"\n```\n(.*?)```", text, flags=re.S):
        first, *lines = block.rstrip("\n").split("\n")
        assert first.startswith("$ autoharnessctl "), first
        out[first[2:]] = lines
    return out


MASKS = [
    (r"(?:~|/)[^\s,;()`]*", "PATH"),
    (r"\d{4}-\d{2}-\d{2}(?: \d{2}:\d{2})?", "DATE"),
    (r"\bi-[0-9a-f]{16}\b", "ID"),
    (r"\bsession [^\s,]+", "session S"),
    (r"\b[a-z0-9]+(?:-[a-z0-9]+)+\b", "NAME"),
    (r"\$?\d[\d,.]*%?", "N"),
    (r"^( {4})[a-z_]+ +N \(N today\)$", r"\1REASON N (N today)"),
    (r"(\w{3,})s\b", r"\1"),  # plurals: `1 skill`, `4 skills`
    (r"\s+", " "),
]


def mask(line: str) -> str:
    for pattern, repl in MASKS:
        line = re.sub(pattern, repl, line)
    return line.rstrip()


def test_the_doctor_example_is_the_checks_doctor_runs(home, short_tmp, monkeypatch):
    """The example's checks, in order, and its count line are the real ones."""
    from harness import BIN, Daemon

    monkeypatch.setenv("PATH", f"{BIN}:/usr/bin:/bin")  # and no `claude`: no backend
    assert ctl("install").returncode == 0
    d = Daemon(home["home"])
    try:
        real = ctl("doctor", "--project", str(short_tmp)).stdout.splitlines()
    finally:
        d.stop()
    [doc] = [v for k, v in examples("troubleshooting.md").items() if k == "autoharnessctl doctor"]

    def checks(lines):
        return [m.groups() for m in (re.match(r"^(ok|FAIL|warn) +([a-z]+):", x) for x in lines) if m]

    assert checks(doc) == checks(real)
    assert doc[-1] == real[-1]  # `1 of N checks failed`


def test_the_report_and_history_examples_have_the_real_outputs_shape(home, monkeypatch):
    with FakeAnthropic() as fake:
        fake.push(tool_reply({"proposals": [
            proposal(), proposal(skill="made-up", evidence="words the session never said")]}))
        e = Env(home, fake, monkeypatch)
        try:
            e.work(n=3)
            wait_for(lambda: e.status()["intents"].get("landed") == 1
                     and e.status()["intents"].get("rejected") == 1, timeout=60, what="intake")
            report = ctl("report", "--days", "7").stdout.splitlines()
            history = ctl("skills", "history", "check-server-start", "--project",
                          str(e.project)).stdout.splitlines()
            assert json.loads(ctl("report", "--json").stdout)["headline"]["state"] == "learning"
        finally:
            e.daemon.stop()
    docs = examples("cli.md")
    shapes = {mask(x) for x in report}
    doc = docs["autoharnessctl report --days 7"]
    assert [x for x in doc if mask(x) not in shapes] == []
    sections = [x for x in report if re.match(r"^[a-z].*:$", x) or x.startswith("next: ")]
    assert [mask(x) for x in sections if mask(x) not in {mask(y) for y in doc}] == []
    assert mask(doc[0]) == mask(report[0])  # it opens with the headline
    def landing(line):  # the action, its source and its reason vary with what landed
        shape = re.sub(r"(intent ID): .*$", r"\1: TEXT", mask(line))
        return re.sub(r"^(vN) \w+ (DATE, source) \w+", r"\1 ACTION \2 SOURCE", shape)

    doc = docs["autoharnessctl skills history integration-tests"]
    assert {landing(x) for x in doc} <= {landing(x) for x in history}, history
