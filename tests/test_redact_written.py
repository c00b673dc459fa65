"""The same rules guard everything written: a secret wrapped over two lines, in base64, or
URL-encoded lands in no skill, provenance, evidence file, wiki, journal or doc draft."""

import base64
import random

import pytest

from claude_autoharness.daemon.capture.redact import find_secrets
from claude_autoharness.daemon.learnings import markers as mk
from claude_autoharness.daemon.learnings import save as sv
from claude_autoharness.daemon.learnings import state as st
from marker_support import marker
from promote_support import assert_rejected_without_writes, intent
from redact_corpus import ALNUM, HEX, leaked, rnd, secret_cases

_R = random.Random(38)
GHP = "ghp_" + rnd(_R, ALNUM, 36)
DAPI = "dapi" + rnd(_R, HEX, 32)
PASSWORD = rnd(_R, ALNUM, 14) + "!7"
ENV = f"APP=web\nSTRIPE_SECRET_KEY=sk_live_{rnd(_R, ALNUM, 24)}\nDB_PASSWORD={PASSWORD}\n"
B64 = base64.b64encode(ENV.encode()).decode()

# (name, text as written, what must not land)
HOSTILE = [
    ("ghp_wrapped", f"Set the remote with the token {GHP[:21]}\n{GHP[21:]} and push.",
     [GHP[4:21], GHP[21:]]),
    ("ghp_wrapped_indented", f"token:\n    {GHP[:30]}\n    {GHP[30:]}\n", [GHP[4:30]]),
    ("base64_env", f"Restore the env with `echo {B64} | base64 -d > .env`.", [B64[8:40]]),
    ("base64_basic", "curl -H 'Authorization: Basic "
     + base64.b64encode(f"ci:{PASSWORD}".encode()).decode() + "' https://ci.example.org",
     [base64.b64encode(f"ci:{PASSWORD}".encode()).decode()]),
    ("url_encoded_password", "curl 'https://api.example.org/login?data=user%3Dci%26password%3D"
     + PASSWORD.replace("!", "%21") + "'", [PASSWORD[:14]]),
    ("databricks", f"Use the workspace token {DAPI} for the job.", [DAPI[4:]]),
]
IDS = [h[0] for h in HOSTILE]


@pytest.mark.parametrize("h", HOSTILE, ids=IDS)
def test_a_hostile_secret_in_a_skill_evidence_or_reason_is_rejected(env, h):
    """In SKILL.md's body, in the evidence file's quote, in provenance's reason: rejected
    `secret` by the real promoter, nothing written."""
    _, text, _ = h
    assert_rejected_without_writes(
        env, intent("create", "hostile-body", body=f"Do this:\n\n{text}\n"), "secret")
    assert_rejected_without_writes(env, intent("create", "hostile-evidence", evidence=text),
                                   "secret")
    assert_rejected_without_writes(env, intent("create", "hostile-reason",
                                               reason=f"the user said: {text}"), "secret")


def test_the_guard_finds_what_capture_redacts_in_every_context():
    """`find_secrets` (what the promoter, intake and history use) finds the corpus's secrets
    in every context as capture does: at least 98 % of cases."""
    cases = list(secret_cases(seed=5))
    found = sum(1 for c in cases if find_secrets(c.text))
    assert found >= 0.98 * len(cases), (found, len(cases))


@pytest.mark.parametrize("h", HOSTILE, ids=IDS)
def test_learnings_save_writes_no_secret_in_wiki_journal_or_drafts(home, short_tmp, h):
    """A marker carrying the secret is saved: the journal, wiki pages and doc drafts under
    `.claude/` hold the lesson, never the secret."""
    _, text, frags = h
    project = short_tmp / "proj"
    (project / "src").mkdir(parents=True)
    (project / "README.md").write_text("# app\n")
    body = text.replace("\n", " ") if "indented" in h[0] else text
    ms = mk.markers_in_text(marker("setup-notes", "decision", body, doc="readme"))
    assert ms
    sv.save_markers(str(project), ms, st.LearningState("-p"), queue_intent=None, now=1.8e9)
    written = "".join(p.read_text() for p in (project / ".claude").rglob("*") if p.is_file())
    assert "setup-notes" in written or "REDACTED" in written
    assert not leaked(frags, written)
