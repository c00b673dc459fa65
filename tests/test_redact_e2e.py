"""End to end: the 22 probe kinds planted in a real transcript never reach the model, nor the
daemon's logs, nor `capture`'s output."""

import os
import random

import pytest

from claude_autoharness.protocol.paths import log_file
from fake_anthropic import FakeAnthropic, tool_reply
from harness import ctl, wait_for
from pipeline_support import Env, proposal
from secret_plant import FORMS, ISSUE_KINDS, leaked, plant


@pytest.fixture
def fake():
    with FakeAnthropic() as f:
        yield f


def test_planted_secrets_never_reach_the_model(home, fake, monkeypatch):
    """Every probe kind, each in another encoding (prompt, cat, Read, JSON in JSON, two chunks,
    Bash command), appended to a real transcript: a real daemon reflects on it through the
    real SDK against the fake API, and no piece of any secret is in what the API received,
    in the daemon's log or in `capture`'s output — while the window around them still is."""
    rng = random.Random(9)
    planted = [make(rng) for make in ISSUE_KINDS]
    fake.push(tool_reply({"proposals": [proposal()]}))
    e = Env(home, fake, monkeypatch)
    try:
        lines = []
        for n, p in enumerate(planted):
            form = FORMS[n % len(FORMS)]
            if form == "split" and len(p.snippet.splitlines()) < 2:
                form = "cat"
            lines += plant(p.snippet, form)
        with open(e.transcript, "a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        e.work()
        wait_for(lambda: e.status()["jobs"]["done"] == 1, timeout=90, what="the reflection")
        [req] = fake.messages_requests
        sent = req.body.decode("utf-8")
        assert "REDACTED" in sent and "check the project structure" in sent
        captured = ctl("capture", "--session", e.sid, "--json").stdout
        for p in planted:
            for s in p.secrets:
                assert not leaked(s, sent), (p.kind, "sent to the model")
                assert not leaked(s, captured), (p.kind, "in capture")
        e.daemon.stop()
        logs = e.daemon.output()  # its stdout and stderr, and the log file if it wrote one
        if os.path.exists(log_file()):
            logs += open(log_file(), encoding="utf-8", errors="replace").read()
        assert "job" in logs  # the log is there, and it is not empty
        for p in planted:
            assert not any(leaked(s, logs) for s in p.secrets), (p.kind, "logged")
    finally:
        e.daemon.stop()


def test_every_provider_format_in_every_context_never_reaches_the_model(home, fake, monkeypatch):
    """Each format of the corpus written apart from the rules, each in another context (wrapped,
    URL-encoded, base64 of a .env, a cookie, a query, prose…) and another record form, appended
    to a real transcript: what a real daemon sends the fake API, and what `capture` shows,
    holds no piece of any of them."""
    from redact_corpus import FORMS as CORPUS_FORMS
    from redact_corpus import leaked as corpus_leaked
    from redact_corpus import secret_cases

    by_format: dict = {}
    for c in secret_cases(seed=21):
        by_format.setdefault(c.format, []).append(c)
    picked = [cs[n % len(cs)] for n, cs in enumerate(by_format.values())]
    assert len({c.context for c in picked}) >= 14
    fake.push(tool_reply({"proposals": [proposal()]}))
    e = Env(home, fake, monkeypatch)
    try:
        lines = []
        for n, c in enumerate(picked):
            lines += plant(c.text, CORPUS_FORMS[n % len(CORPUS_FORMS)])
        with open(e.transcript, "a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        e.work()
        wait_for(lambda: e.status()["jobs"]["done"] == 1, timeout=90, what="the reflection")
        [req] = fake.messages_requests
        sent = req.body.decode("utf-8")
        captured = ctl("capture", "--session", e.sid, "--json").stdout
        assert "REDACTED" in sent
        for c in picked:
            assert not corpus_leaked(c.fragments, sent), (c.format, c.context, "sent")
            assert not corpus_leaked(c.fragments, captured), (c.format, c.context, "capture")
    finally:
        e.daemon.stop()
