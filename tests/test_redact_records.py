"""Redaction never breaks a record: keys and types survive every finding, session slugs stay
slugs, the look-alikes real sessions hold are left alone, and the home directory reads `~`."""

import json
from pathlib import Path

import pytest

from claude_autoharness.daemon.capture.redact import Redactor, default_redactor
from claude_autoharness.daemon.capture.redact_records import shape

CORPUS = Path(__file__).resolve().parent / "corpus"
FILES = sorted((CORPUS / "real").rglob("*.jsonl")) + sorted((CORPUS / "claude-code").rglob("*.jsonl"))
SLUGS = ["wise-tumbling-token", "calm-river-secret", "odd-fox-password", "big-sky-pass",
         "quiet-owl-credentials", "bold-elk-auth"]


def _records(path: Path) -> list[bytes]:
    return [ln for ln in path.read_bytes().split(b"\n") if ln.strip()]


def _json(line: bytes):
    try:
        return json.loads(line)
    except ValueError:
        return None


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(CORPUS)))
def test_every_real_record_keeps_its_keys_and_types(path):
    """Each real transcript redacted as a window: every record that was JSON is JSON with the
    same structure (keys, nesting, types), record for record."""
    lines = _records(path)
    out, _ = default_redactor().redact_bytes(b"\n".join(lines))
    got = out.split(b"\n")
    assert len(got) == len(lines)
    for before, after in zip(lines, got, strict=True):
        b = _json(before)
        if b is not None:
            assert shape(_json(after)) == shape(b)


@pytest.mark.parametrize("slug", SLUGS)
def test_a_session_slug_ending_in_a_keyword_does_not_eat_the_next_key(slug):
    """Claude Code names sessions like `wise-tumbling-token`; a record carrying that slug keeps
    its `message` (and every other key), compact or spaced."""
    rec = next(_json(ln) for p in FILES for ln in _records(p)
               if (_json(ln) or {}).get("type") == "user" and "message" in (_json(ln) or {}))
    rec = dict(rec, slug=slug)
    for text in (json.dumps(rec, separators=(",", ":")), json.dumps(rec)):
        out, counts = default_redactor().redact_bytes(text.encode())
        assert json.loads(out) == json.loads(text), counts


def test_a_finding_across_a_quote_is_redone_value_by_value():
    """Should a rule's match reach past a string's end (here a user rule written to), the record
    is redacted again string by string: its keys and types stay, and the secret in a value is
    still removed."""
    rule = {"kind": "greedy", "pattern": r'tumbling-token",.{0,40}', "needles": "tumbling"}
    r = Redactor([rule])
    rec = {"slug": "wise-tumbling-token", "message": {"role": "user", "content": [
        {"type": "text", "text": "GITHUB_TOKEN=ghp_aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"}]},
        "n": 3, "ok": True}
    out, counts = r.redact_bytes(json.dumps(rec, separators=(",", ":")).encode())
    got = json.loads(out)
    assert shape(got) == shape(rec) and got["slug"] == rec["slug"]
    assert counts == {"github_token": 1}  # what the output holds, not the first pass
    assert "ghp_" not in out.decode() and "[REDACTED:" in got["message"]["content"][0]["text"]


@pytest.mark.parametrize("text", [
    "1Password: item 'Staging DB' updated in vault Engineering",
    "PASS: tests/test_login.py::test_password_reset created 3 fixtures",
    "$ date +%Y-%m-%dT%H:%M\n2026-03-14T09:26",
    "2026-01-15 10:30:45,123 INFO worker-3 done at 2026-01-15 10:31:02 (run 12345-678-9012)",
    "token: your-token-here\npassword: \"********\"\nsecret: REPLACE_ME",
    "API_KEY=your-api-key-here\nSECRET_KEY=changeme",
    "credentials: AccessTokenProvider | None = None",
    '__all__ = ["TokenStore", "PasswordHasher", "SecretManager", "AccessTokenProvider"]',
    "golang.org/x/sys v0.1.0 h1:slHUbeR2J8HLpWu5g0QAGrmL9BDXOcxd2CSnsp/QnXY=",
])
def test_what_real_sessions_hold_that_only_looks_like_a_secret_is_kept(text):
    """Findings that were not secrets on real sessions: a password manager's name, a test
    runner's PASS, a `date` format, dates and run numbers, placeholders, a type annotation,
    an `__all__` list, a go.sum hash."""
    rec = json.dumps({"type": "user", "message": {"role": "user", "content": text}})
    out, counts = default_redactor().redact_bytes(rec.encode())
    assert counts == {} and out == rec.encode()


def test_the_home_directory_becomes_a_tilde_and_nothing_else_does():
    """Every record's cwd and paths under the home read `~`; a longer name that only starts
    like the home does not, and nothing is counted as a finding."""
    r = Redactor(home="/home/alice")
    rec = {"cwd": "/home/alice/src/app", "message": {"content": "ls /home/alice\n/home/alice2/x"}}
    out, counts = r.redact_bytes(json.dumps(rec).encode())
    got = json.loads(out)
    assert got["cwd"] == "~/src/app" and counts == {}
    assert got["message"]["content"] == "ls ~\n/home/alice2/x"
    assert r.redact("cd /home/alice/src && make")[0] == "cd ~/src && make"
