"""The promoter and the intent queue refuse every planted secret kind, by capture's rules."""

import json
import random

import pytest

from claude_autoharness.daemon.capture.redact import find_secrets
from claude_autoharness.daemon.intents import IntentQueue
from claude_autoharness.protocol.paths import intents_file
from promote_support import assert_rejected_without_writes, intent
from secret_plant import ISSUE_KINDS, leaked

PLANTED = [make(random.Random(5)) for make in ISSUE_KINDS]
IDS = [p.kind for p in PLANTED]


@pytest.mark.parametrize("p", PLANTED, ids=IDS)
def test_a_secret_in_the_body_is_rejected_and_nothing_written(env, p):
    """A skill whose body carries the secret (as a config example) is rejected `secret` by the
    real promoter and no file changes; the finding names the kind, never the value."""
    it = intent("create", "configure-it", body=f"Configure it like this:\n\n```\n{p.snippet}\n```\n")
    out = assert_rejected_without_writes(env, it, "secret")
    shown = json.dumps([f.message for f in out.findings])
    assert not any(leaked(s, shown) for s in p.secrets)


@pytest.mark.parametrize("p", PLANTED, ids=IDS)
def test_a_secret_in_the_evidence_or_reason_is_rejected(env, p):
    """The evidence quote and the reason go into provenance and history, not SKILL.md: a secret
    there is rejected `secret` too, before anything is written."""
    assert_rejected_without_writes(env, intent("create", "quoted", evidence=p.snippet), "secret")
    assert_rejected_without_writes(
        env, intent("create", "reasoned", reason=f"the user pasted {p.snippet}"), "secret")


@pytest.fixture
def queue(home):
    q = IntentQueue()
    q.load()
    return q


def test_intake_rejects_every_kind_and_stores_it_redacted(queue):
    """At intake each proposal carrying a kind is rejected `secret`, and neither the stored
    intent nor the queue file holds any piece of the secret."""
    window = '{"type":"user","message":{"content":"always run make lint"}}\n'
    proposals = [{"action": "create", "skill": f"kind-{n}", "layer": "project", "reason": "r",
                  "evidence": "always run make lint", "description": "Use when linting.",
                  "body": f"Set it up:\n{p.snippet}", "old": None, "new": None, "path": None,
                  "content": None} for n, p in enumerate(PLANTED)]
    out = queue.intake("job-1", "sess-1", "reflector", proposals, window, "/proj", len(proposals))
    assert [i.status for i in out] == ["rejected"] * len(PLANTED)
    stored = open(intents_file(), encoding="utf-8").read()
    for i, p in zip(out, PLANTED, strict=True):
        assert "secret" in {f.code for f in i.findings}, p.kind
        assert not any(leaked(s, i.proposal.body) or leaked(s, stored) for s in p.secrets), p.kind


@pytest.mark.parametrize("p", PLANTED, ids=IDS)
def test_find_secrets_finds_every_kind(p):
    """The function feedback quotes and provenance are checked with finds each kind."""
    assert find_secrets(p.snippet), p.kind
