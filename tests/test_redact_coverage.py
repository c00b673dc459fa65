"""Redaction measured: planted secrets in every encoding a transcript holds them, the held-out
sets, ordinary engineering text kept, the real corpus left alone, pathological input."""

import json

import pytest

from claude_autoharness.daemon.capture.redact import default_redactor, find_secrets
from conftest import CORPUS
from secret_plant import FORMS, HELD_OUT, HELD_OUT_2, ISSUE_KINDS, cases, leaked, plant, templates

R = default_redactor()


def _leaks(kinds, seed=7):
    """(planted secrets, [(kind, form)] of those that got through), and every redacted line
    must still be a JSON record."""
    total, leaks = 0, []
    for kind, form, text, secrets in cases(kinds, seed=seed):
        out, counts = R.redact(text)
        assert "redaction_error" not in counts
        for line in out.splitlines():
            json.loads(line)
        for s in secrets:
            total += 1
            if leaked(s, out):
                leaks.append((kind, form))
    return total, leaks


@pytest.mark.parametrize("make", ISSUE_KINDS, ids=lambda k: k.__name__.strip("_"))
def test_each_probe_kind_is_redacted_in_every_encoding(make):
    """Each of the 22 kinds the probe planted is gone in every form: typed in a prompt, printed
    by `cat`, read with line numbers, inside JSON inside a tool result (escaped twice), read
    in two chunks, and as a Bash command; the records stay valid JSON."""
    total, leaks = _leaks([make])
    assert total and not leaks, leaks


def test_the_probe_set_is_the_22_kinds_named():
    """The probe set is 22 distinct kinds, each planted in all six forms."""
    names = {k.__name__ for k in ISSUE_KINDS}
    assert len(names) == 22
    assert set(FORMS) == {"prompt", "cat", "read", "json2", "split", "command"}


def test_held_out_kinds_are_redacted_at_least_98_percent():
    """Two sets of kinds written apart from the rules (80+ kinds, mixed encodings, planted into
    real records): at least 98 % of the planted secrets are gone, per set, and in total."""
    kinds = {k.__name__ for k in HELD_OUT + HELD_OUT_2}
    assert len(kinds) >= 40 and not kinds & {k.__name__ for k in ISSUE_KINDS}
    grand_total = grand_leaks = 0
    for kind_set in (HELD_OUT, HELD_OUT_2):
        total, leaks = _leaks(kind_set, seed=11)  # another seed than the measurements used
        assert (total - len(leaks)) / total >= 0.98, leaks
        grand_total, grand_leaks = grand_total + total, grand_leaks + len(leaks)
    assert (grand_total - grand_leaks) / grand_total >= 0.98


def test_secret_split_across_two_records_is_redacted_in_both():
    """A key read in two chunks: the first record holds BEGIN and half the body, the second
    the rest and END; neither half reaches the output."""
    make = next(k for k in ISSUE_KINDS if k.__name__ == "_gcp_sa")
    import random

    p = make(random.Random(3))
    first, second = plant(p.snippet, "split")
    for line in (first, second):
        out, _ = R.redact(line)
        assert not any(leaked(s, out) for s in p.secrets[1:]), out[:400]


BENIGN = [
    "3f2a9c1d5e7b8a0f4c6d2e1b9a8c7d6e5f4a3b2c",  # a commit hash
    "commit 3F2A9C1D5E7B8A0F4C6D2E1B9A8C7D6E5F4A3B2C", "merged 3f2a9c1 into main",
    "55604662-cf2a-4331-851a-ec234028f8ca", "{550E8400-E29B-41D4-A716-446655440000}",
    "toolu_01ABCdefGHI234jklMNO567", "msg_01MKH1ccEGrZGNPvu8pYiiQa", "req_011CY15QS2LGwAeBxdfa6e1V",
    "srvtoolu_01XyZaBcDeFgHiJkLmNoPqRs",
    "2026-02-10T21:11:56.846Z", "1739222400000", "Tue Dec  1 09:55:10 UTC 2026",
    "/home/marco/projects/spotter/assets/js/app.js", "/Users/JaneDoe/Library/Caches/pip/wheels/a1/b2",
    r"C:\Users\Build\AppData\Local\Temp\pytest-of-build\pytest-12", "./node_modules/.bin/vite",
    "v2.1.38", "1.0.108", "python3.11", "^18.2.0 || ~17.0.2", "pip install 'anthropic>=0.40'",
    "===== 5 passed, 1 failed, 2 skipped in 0.42s =====", "FAILED tests/test_x.py::test_y - KeyError",
    "ok  \tgithub.com/acme/api/internal/store\t0.215s", "Tests:       12 passed, 12 total",
    "Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg==",
    "integrity sha1-qjmkVU5+z5yI5/5FJgQbgdC7Y6Q=",
    "\"signature\":\"EsMCCkYICxgCKkDuNR00D0SPshrOAOM1rE2RNrkHn0aXuAp7lW1sP8HECP+s" + "Ab9" * 80 + "\"",
    "max_tokens=4096", "\"input_tokens\":3,\"output_tokens\":1024", "token = os.environ['GITHUB_TOKEN']",
    "password: str", "api_key=None", "self.token = token", "password: <your-password>",
    "token: ${{ secrets.GH_TOKEN }}", "--password-file /run/secrets/db", "export TOKEN=$(cat .token)",
    "mkdir -p build/out", "docker run -u 1000:1000 alpine", "psql -P pager=off -U app",
    "https://github.com/anthropics/claude-code/issues/1234",
    "http://localhost:8080/health", "127.0.0.1:5432", "postgres://localhost:5432/app",
    "color: #1a2b3c; background: #FFFFFF;", "kubectl get pods -n kube-system",
    "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIE\n-----END CERTIFICATE-----",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me@host",
    "the password reset flow sends a link", "Tests exist and pass\",\"status\":\"open",
    "keyboard: us", "sort_key: created_at", "PRIMARY_KEY=id", "tokenizer: cl100k_base",
    "git log --oneline -5", "npm WARN deprecated inflight@1.0.6", "@pytest.fixture",
    "icon@2x.png", "user@localhost",
]


@pytest.mark.parametrize("text", BENIGN)
def test_ordinary_engineering_text_is_kept(text):
    """Hashes, ids, timestamps, paths, versions, test output, code that names secrets without
    holding one, public keys and certificates: untouched alone, in a real prompt record and in
    a real tool result (JSON-escaped), and not a finding for the promoter."""
    assert R.redact(text) == (text, {})
    for form in ("prompt", "cat", "json2"):
        [line] = plant(text, form)
        assert R.redact(line) == (line, {}), form
    assert find_secrets(text) == []


def test_real_corpus_is_left_alone():
    """Over every real transcript and hook log of the corpus (5 MB, public fixtures with no
    secrets in them): no secret finding at all, and at most 0.05 % of the bytes changed (the
    few real email addresses they hold)."""
    total = changed = 0
    kinds: set[str] = set()
    for path in sorted(CORPUS.rglob("*.jsonl")):
        data = path.read_bytes()
        text = data.decode("utf-8", "replace")
        for kind, s, e in R.find(text):
            kinds.add(kind)
            changed += len(text[s:e].encode())
        total += len(data)
    assert total > 4_000_000
    assert kinds <= R.pii_kinds, kinds - R.pii_kinds
    assert changed / total <= 0.0005, changed / total


def test_find_secrets_is_the_promoters_test():
    """`find_secrets` reports secret kinds (not PII unless asked, never placeholders) with
    character offsets and no text; an empty list when there is none."""
    text = "héllo → token=hunter2xyz and alice@corp.io and user@example.com"
    [(kind, s, e)] = find_secrets(text)
    assert kind == "secret_assignment" and text[s:e] == "hunter2xyz"
    assert [k for k, _, _ in find_secrets(text, pii=True)] == ["secret_assignment", "email"]
    assert not find_secrets("user@example.com and [REDACTED:github_token]")


PATHOLOGICAL = [
    "a" * 1_000_000,
    "token=" * 200_000,
    "-----BEGIN PRIVATE KEY-----" + "A" * 1_000_000,
    "-----BEGIN PRIVATE KEY-----\\n" + ("QUJD" * 16 + "\\n") * 15_000,
    ("QUJDZEVGZ2hpSktMbW5vUFFSc3R1VldYeXoxMjM0NTY3ODkwKy9BQkNEZUZHaGlK" + "\\n") * 15_000,
    "@" * 500_000 + "x" * 500_000,
    "a." * 500_000 + "@",
    ":5432:" * 150_000,
    "login -u x " * 80_000,
    "mysql " + "-x " * 300_000,
    "key" * 100_000,
    "\\" * 1_000_000,
    "\\\"password\\\": \\\"" * 50_000,
    "<password>" * 100_000,
    "sshpass " * 100_000,
    "machine h login u " * 50_000,
    "AKIA" * 250_000,
    "sk-" + "a-" * 400_000,
]


@pytest.mark.parametrize("i", range(len(PATHOLOGICAL)))
def test_pathological_input_finishes(i):
    """Inputs built to make a backtracking rule or a per-position search blow up (megabyte runs
    of needles, of key-like lines, of backslashes): redaction finishes — a quadratic rule
    would not, on a megabyte — without an internal error, and is idempotent."""
    text = PATHOLOGICAL[i]
    out, counts = R.redact(text)
    assert "redaction_error" not in counts
    assert R.redact(out)[0] == out


def test_templates_are_real_records():
    """The records secrets are planted into come from the real corpus, not made up."""
    user, result, call = templates()
    assert user["type"] == "user" and "sessionId" in user
    assert any(c.get("type") == "tool_result" for c in result["message"]["content"])
    assert any(c.get("name") == "Bash" for c in call["message"]["content"])
