"""Redaction (capture/redact.py): every rule, JSON escapes, <private>, and properties."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claude_autoharness.daemon.capture.redact import (
    Redactor,
    default_redactor,
    is_placeholder,
    load_rule_data,
    luhn_ok,
    redactor_for,
)
from claude_autoharness.protocol.config import RedactionConfig
from conftest import REAL
from redact_blind_formats import FORMATS as BLIND_FORMATS
from redact_blind_formats import Gen
from redact_corpus import FORMATS

# provider formats with a fixed prefix: a token of each from the corpus generator, as rule kind
# -> corpus format (the corpus is written from the providers' formats, apart from the rules)
_BY_FORMAT = {
    "google_client_secret": "google_client_secret", "discord_token": "discord_bot",
    "discord_webhook": "discord_webhook", "teams_webhook": "teams_webhook",
    "mailgun_key": "mailgun", "mailchimp_key": "mailchimp", "twilio_key": "twilio_api_key",
    "databricks_token": "databricks", "supabase_key": "supabase_pat",
    "tailscale_key": "tailscale_auth", "shopify_token": "shopify_access",
    "digitalocean_token": "digitalocean_pat", "pypi_token": "pypi", "rubygems_key": "rubygems",
    "docker_token": "docker_pat", "vault_token": "vault_service",
    "grafana_token": "grafana_service_account", "newrelic_key": "newrelic_user",
    "linear_key": "linear", "notion_token": "notion", "figma_token": "figma",
    "atlassian_token": "atlassian", "planetscale_token": "planetscale_token",
    "azure_client_secret": "azure_ad_client_secret", "postman_key": "postman",
    "doppler_token": "doppler", "pulumi_token": "pulumi", "sentry_token": "sentry_user",
    "llm_api_key": "groq", "ci_token": "buildkite", "brevo_key": "brevo",
    "contentful_token": "contentful", "sourcegraph_token": "sourcegraph",
    "dynatrace_token": "dynatrace", "terraform_token": "terraform_cloud", "nuget_key": "nuget",
    "mapbox_token": "mapbox_secret", "airtable_token": "airtable_pat",
    "cloudflare_ca_key": "cloudflare_origin_ca", "meta_token": "facebook_access",
    "shippo_token": "shippo", "openrouter_key": "openrouter",
}
_LITERAL = {  # formats the corpus does not generate
    "square_token": "sq0atp-" + "aB3dE6gH9jK2mN5pQ8sT1v",
    "heroku_token": "HRKU-" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6aB3dE6gH9jK2mN5p",
    "flyio_token": "FlyV1 fm2_" + "lJPECAAAAAAAAMS0xxAQ" * 5,
    "netlify_token": "nfp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6",
    "prefect_key": "pnu_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6",
    "onepassword_token": "ops_eyJ" + "hbGciOiJFUzI1NiIsImtpZCI6" * 5,
}
_BY_BLIND = {  # rule kind -> formats of the blind set (tests/redact_blind_formats.py)
    "firebase_key": ["firebase-fcm-server-key"], "artifactory_token": ["artifactory"],
    "twitter_token": ["twitter-bearer"], "dropbox_token": ["dropbox"],
    "api_token": ["adafruit-io", "alibaba", "typeform", "bitbucket-app-password", "resend",
                  "elevenlabs", "clojars", "flutterwave", "hubspot-private-app", "braintree"],
}


def _provider_rows() -> dict:
    import random
    rng = random.Random(3)
    by_name = {f.name: f for f in FORMATS}
    rows = {kind: ([by_name[name].make(rng)], []) for kind, name in _BY_FORMAT.items()}
    rows.update({kind: ([tok], []) for kind, tok in _LITERAL.items()})
    blind, g = {f.name: f for f in BLIND_FORMATS}, Gen(random.Random(3))
    rows.update({kind: (["".join(blind[n].make(g)) for n in names], [])
                 for kind, names in _BY_BLIND.items()})
    for kind, (pos, _neg) in rows.items():
        pos.append(f"export X={pos[0]}")
        if kind == "mailchimp_key":
            continue  # its needle (`-us1`) ends the key: a wrap before it is not followed
        cut = len(pos[0]) - 6  # wrapped past its prefix: the terminal's width cut it
        pos.append(f"the value is {pos[0][:cut]}\n{pos[0][cut:]} (wrapped)")
    return rows

R = default_redactor()
GH = "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"
COMMIT = "3f2a9c1d5e7b8a0f4c6d2e1b9a8c7d6e5f4a3b2c"
SESSION = "55604662-cf2a-4331-851a-ec234028f8ca"

# kind -> (texts that must be caught, texts that must be left alone)
TABLE = _provider_rows() | {
    "named_secret": (
        ["aws configure set twilio_auth_token 324cc06de146562476c9262254909e9a",
         "The DD_API_KEY for staging is d6ac0779d8b57c2af162718e5ff6fd54 (rotate it).",
         "<add key=\"AZURE_DEVOPS_EXT_PAT\" value=\"ez6p2mvlczlq4mmukrmesldyjfi42fsd7gznvtmf\" />",
         "heroku config:get STRIPE_WEBHOOK_SECRET -> wJa7rXUtnF3MI0K7MDiNGx"],
        ["primary_key 3f2a9c1d5e7b8a0f4c6d2e1b9a8c7d6e", "the session_token is " + SESSION,
         "next_page_token CAUQAA-dGhpcyBpcyBhIGN1cnNvcg", "api_key is required (see setup_guide_v2)",
         "public_key ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG9vbGxhcmdlcmtleWJvZHk0"],
    ),
    "session_cookie": (
        ["Cookie: theme=dark; sessionid=qw03pdoqoomoyhoaync6bfmst2m5rl7m",
         "Set-Cookie: _shop_session=Xk3pQ9vL2mN8rT5wZ1yB4cF7hJ0; Path=/"],
        [json.dumps({"sessionId": SESSION}), "session_id=" + SESSION, "sessionid=abc"],
    ),
    "auth_header": (
        ["Authorization: SSWS 00GRTqXEwy44By0OS_f8GuuxaU1Mt8lmy4OhN7yJNj",
         "{'Authorization': 'Digest 9f86d081884c7d659a2feaea0c55ad01'}"],
        ["Authorization: Bearer $TOKEN", "authorization = request.headers.get('Authorization')"],
    ),
    "private_key": (
        ["-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx4fz\nQ2Vk=\n-----END RSA PRIVATE KEY-----",
         "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA",  # clipped: no END
         "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF0\n-----END PGP PRIVATE KEY BLOCK-----"],
        ["-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkq\n-----END PUBLIC KEY-----",
         "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIE\n-----END CERTIFICATE-----"],
    ),
    "aws_access_key": (
        ["AKIAQYLPMN5HHHFPZAM2", "key ASIAQYLPMN5HHHFPZAM2 here", "ABIAQYLPMN5HHHFPZAM2"],
        ["AKIA1234", "XAKIAQYLPMN5HHHFPZAM2X", "AKIAQYLPMN5HHHFPZAM2EXTRA"],
    ),
    "aws_secret_key": (
        ["aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
         'AWS_SECRET_ACCESS_KEY="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"'],
        ["aws_secret_access_key = ${AWS_SECRET}", "aws_secret_access_key is required"],
    ),
    "github_token": (
        [GH, "github_pat_11ABCDEFG0aBcDeFgHiJkLm_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7" * 2 + "x5Y8z",
         "gho_" + "x1" * 18],
        ["ghp_short", "the ghost town", "gh_pr_list"],
    ),
    "gitlab_token": (
        ["glpat-abcdefghij1234567890", "gldt-ABCDEFGHIJKLMNOPQRSTU"],
        ["glpat-short", "global-settings-are-fine-here"],
    ),
    "slack_token": (
        ["xoxb-1234567890-0987654321-abcdefghijKLMNOP", "xoxp-12345-abcdefghijkl"],
        ["xoxb-", "xoxo gossip"],
    ),
    "slack_webhook": (
        ["https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXX"],
        ["hooks.slack.com/apps"],
    ),
    "stripe_key": (
        ["sk_live_51H8abcdefghij1234567890", "rk_test_abcdefghij1234", "whsec_abcdefghij0123456789ab"],
        ["sk_live_", "disk_live_data", "risk_test_plan"],
    ),
    "anthropic_key": (
        ["sk-ant-api03-" + "Ab1_" * 12, "ANTHROPIC_API_KEY=sk-ant-admin01-abcdefghijklmnopqrstuvwx"],
        ["sk-ant-short"],
    ),
    "openai_key": (
        ["sk-proj-abc123DEF456ghi789JKL012mno345", "sk-" + "a1B2c3D4e5" * 5],
        ["task-1234567890abcdefghijk", "sk-no-digits-here-at-all-whatsoever", "sk-123"],
    ),
    "google_api_key": (
        ["AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"],
        ["AIzaShort123"],
    ),
    "google_oauth": (
        ["ya29.a0AfH6SMBx1234567890abcdefghij"],
        ["ya29.short"],
    ),
    "npm_token": (
        ["npm_" + "a1B2c3D4e5F6" * 3],
        ["npm_install_script", "npm_config_cache"],
    ),
    "jwt": (
        ["eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"],
        ["eyJhbGciOiJIUzI1NiJ9", "eyJ.is.short"],
    ),
    "url_credentials": (
        ["postgres://admin:s3cr3tPw@db.internal:5432/app", "https://x-access-token:abc@github.com/o/r"],
        ["https://github.com/user/repo", "ssh://git@github.com/x/y", "http://localhost:8080/p@x"],
    ),
    "bearer": (
        ["Authorization: Bearer abc123def456ghi789jkl", '"authorization":"bearer 0123456789abcdefXYZ"'],
        ["bearer tokens are short-lived", "Bearer <token>", "Bearer abcdefghijklmnopqrstuv"],
    ),
    "basic_auth": (
        ["Authorization: Basic dXNlcjpwYXNzd29yZA==", '-H "authorization: basic QWxhZGRpbjpvcGVu"'],
        ["basic authentication is weak", "Basic usage: run it"],
    ),
    "secret_assignment": (
        ["password=hunter22", '"auth_token": "abc123xyz789"', "DB_PASSWORD='Tr0ub4dor&3'",
         "client_secret: 8f7a6b5c4d3e", "export GITHUB_TOKEN=abcdef123456", "token=plainletters"],
        ["token = os.environ['GITHUB_TOKEN']", "max_tokens=4096", "password: str",
         '"input_tokens":3', "params: { _csrf_token: csrfToken }", "token: ${{ secrets.GH }}",
         "self.token = token", "password: <your-password>", "api_key=None"],
    ),
    "huggingface_token": (
        ["hf_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3h",
         "--token\\nhf_" + "Q8sT1vW4yZ7bC0eF3hJ6aB3dE6gH9jK2mN"],
        ["hf_hub_download", "pkg.hf_model_name_for_the_tests_of_this_suite_x"],
    ),
    "age_secret_key": (
        ["AGE-SECRET-KEY-1" + "QYLPMN5HHHFPZAM2QYLPMN5HHHFPZAM2QYLPMN5HHHFPZAM2QYLPMN5HHH"],
        ["AGE-SECRET-KEY-1", "age-secret-key-file.txt"],
    ),
    "sendgrid_key": (
        ["SG.aB3dE6gH9jK2mN5pQ8sT1v.W4yZ7bC0eF3hJ6aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0"],
        ["SG.1", "config.SG.enabled"],
    ),
    "telegram_token": (
        ["bot123456789:AAF3hJ6aB3dE6gH9jK2mN5pQ8sT1vW4yZ7b/getMe"],
        ["12:AA", "10:30:AA batteries"],
    ),
    "azure_sas": (
        ["https://a.blob.core.windows.net/c?sv=2022-11-02&sp=r&sig=aB3dE6gH9jK2mN5pQ8sT1v%3D"],
        ["sig=x", "design=flat"],
    ),
    "cli_password": (
        ["mysql -u root -pS3cretPw shop", "sshpass -p 'hunter2' ssh host", "sshpass -pHunter2 ssh h",
         "curl -u admin:S3cretPw https://x", "docker login -u ci -p S3cretPw reg.io",
         "tool --password S3cretPw2 --host x", "gh auth login --with-token --token abc123def456"],
        ["mysql -u root -p shop", "mkdir -p build/out", "docker run -u 1000:1000 img",
         "curl -u $USER:$PASS https://x", "psql -P pager=off", "tool --password $PW"],
    ),
    "pgpass": (
        ["db.acme.io:5432:orders:app:S3cretPw\n", "*:*:*:postgres:hunter22"],
        ["2026-02-10T21:11:56", "localhost:8080", "a:b:c:d:e"],
    ),
    "key_assignment": (
        ["api_key: 0123456789abcdef0123456789abcdef", '"private_key_id": "' + "ab12" * 10 + '"',
         "AccountKey=" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6" + "==;", "STRIPE_KEY=rk_x_123456",
         "client-key-data: c2VjcmV0LWtleS1ieXRlcy1oZXJl", "maps?key=abc123xyz789&q=1",
         '{\\"apiKey\\": \\"zz99YY88xx77\\"}'],
        ["primary_key = True", "api_key=None", "sort_key: name_of_field", "keyboard: us",
         "api_key = os.environ['API_KEY']", "PRIMARY_KEY=123456", "key_id: 42"],
    ),
    "random_token": (
        ["the key is wJa7rXUtnF3MI/K7MDiNG/bPxRfiCYz5xAm9LEkEY ok", "x=Q8sT1vW4yZ7bC0eF+3hJ6aB3dE6gH9jK2mN5p",
         "x=Q8sT1vW4yZ7bC0eF3hJ6aB3dE6gH9jK2mN5pQrSt"],  # +/ or an AWS secret key's 40
        [COMMIT, "/home/user/projects/SomeProject/src/components/x",
         # URL-safe or base62 ids (no + or /), padded digests (go.sum h1:, integrity)
         "x=Q8sT1vW4yZ7bC0eF3hJ6aB3dE6gH9jK2mN5p", "id: 3a6UtiqDQQPYr9ZodwpoosIOhhcGJBtnyOAcaGIOZy4",
         "golang.org/x/sys v0.1.0 h1:slHUbeR2J8HLpWu5g0QAGrmL9BDXOcxd2CSnsp/QnXY=",
         "sha512-" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6" * 2,
         "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJKLMN", "a" * 40, SESSION.replace("-", "")],
    ),
    "xml_secret": (
        ["<password>S3cretPw1</password>", '<add key="DbPassword" value="S3cretPw1" />',
         "<apiKey>aB3dE6gH9jK2</apiKey>"],
        ["<password></password>", "<passwordPolicy>strict</passwordPolicy>", "<token/>"],
    ),
    "email": (
        ["alice.smith@corp.io", "mail bob+tag@mail.example-corp.co.uk now"],
        ["icon@2x.png", "user@localhost", "@decorator", "pkg@1.2.3"],
    ),
    "card": (
        ["4012 8888 8888 1881", "5555555555554444", "3782-822463-10005"],
        ["4111 1111 1111 1112", "1739222400000", "4012888888881882", "0.4012888888881881"],
    ),
    "ssn": (
        ["219-09-9999", "ssn: 078-05-1120"],
        ["000-12-3456", "2026-02-10", "666-12-3456", "219-00-9999"],
    ),
    "phone": (
        ["(415) 555-2671", "+44 20 7946 0958", "call 415-555-2671", "+14155552671"],
        ["2026-02-10", "1.0.108", "+1", "192.168.100.100", "v415-555-2671x", "+0000"],
    ),
}


@pytest.mark.parametrize("kind", sorted(TABLE))
def test_every_rule_catches_its_positives(kind):
    """Each rule's positive examples become `[REDACTED:<kind>]` and are counted; the secret
    value itself is gone from the output."""
    for text in TABLE[kind][0]:
        out, counts = R.redact(text)
        assert counts.get(kind, 0) >= 1, (kind, text, out, counts)
        assert f"[REDACTED:{kind}]" in out
        assert any(f[0] == kind for f in R.find(text))


@pytest.mark.parametrize("kind", sorted(TABLE))
def test_every_rule_leaves_its_negatives_alone(kind):
    """Each rule's negative examples (look-alikes) are not redacted as that kind."""
    for text in TABLE[kind][1]:
        out, counts = R.redact(text)
        assert kind not in counts, (kind, text, out)


def test_every_packaged_rule_is_in_the_table():
    """The table above covers every rule shipped in redact_rules.toml."""
    assert {d["kind"] for d in load_rule_data() if d.get("class") != "public"} == set(TABLE)


def test_commit_hashes_uuids_and_real_ids_are_not_secrets():
    """40-char git commit hashes, session UUIDs, request/message ids, timestamps survive."""
    text = json.dumps({"sessionId": SESSION, "commit": COMMIT, "sha": COMMIT.upper(),
                       "requestId": "req_011CY15QS2LGwAeBxdfa6e1V",
                       "id": "msg_01MKH1ccEGrZGNPvu8pYiiQa", "timestamp": "2026-02-10T21:11:56.846Z",
                       "tool": "toolu_01ABCdefGHI234jklMNO567", "ts_ms": 1739222400000})
    out, counts = R.redact(text)
    assert (out, counts) == (text, {})


@pytest.mark.parametrize("secret,kind", [
    (GH, "github_token"),
    ("sk-proj-abc123DEF456ghi789JKL012mno345", "openai_key"),
    ("alice.smith@corp.io", "email"),
    ("AKIAQYLPMN5HHHFPZAM2", "aws_access_key"),
    ("415-555-2671", "phone"),
    ("4012 8888 8888 1881", "card"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9Pl", "jwt"),
])
@pytest.mark.parametrize("before", ["\n", "\t", '"', "\\", "\r\n", "é\n", "\u001b[0m\n"])
def test_secrets_right_after_json_escapes_are_caught_and_json_stays_valid(secret, kind, before):
    """In raw JSONL a secret often follows an escape (`\\nghp_…`, `\\"sk-…`): it is still
    caught, the escape is kept intact, and the line stays valid JSON, also one level deeper
    (JSON inside a JSON string, as in tool output)."""
    value = f"line one{before}{secret}{before}tail"
    for raw in (json.dumps({"text": value}), json.dumps({"text": value}, ensure_ascii=False),
                json.dumps({"outer": json.dumps({"text": value})})):
        out, counts = R.redact(raw)
        assert counts.get(kind) == 1, (raw, out)
        assert secret not in out
        doc = json.loads(out)  # valid JSON after redaction
        inner = doc["text"] if "text" in doc else json.loads(doc["outer"])["text"]
        # after a literal backslash the first letter may stay visible: an edge is never put
        # right after a backslash, whatever the nesting depth of the JSON
        allowed = {f"line one{before}[REDACTED:{kind}]{before}tail",
                   f"line one{before}{secret[0]}[REDACTED:{kind}]{before}tail"}
        assert inner in allowed


def test_assignment_inside_escaped_json_keeps_the_quotes():
    """`{\\"password\\": \\"…\\"}` inside a JSON string: only the value goes, the escaped quotes
    around it stay, and the record parses."""
    cmd = 'curl -d \'{"password": "hunter22x", "user": "bob"}\' https://api.local'
    raw = json.dumps({"type": "tool_use", "input": {"command": cmd}})
    out, counts = R.redact(raw)
    assert counts == {"secret_assignment": 1}
    assert json.loads(out)["input"]["command"] == cmd.replace("hunter22x", "[REDACTED:secret_assignment]")


def test_private_spans_are_removed_whole():
    """`<private>…</private>` spans go whole (tags included) whatever they contain, across
    lines, case-insensitively, with a JSON-escaped close tag; an unclosed tag takes the rest of
    its line; secrets inside are not counted separately."""
    out, counts = R.redact("a <private>my diary " + GH + "</private> b")
    assert out == "a [REDACTED:private] b" and counts == {"private": 1}
    out, _ = R.redact("x <PRIVATE>line1\nline2</Private> y")
    assert out == "x [REDACTED:private] y"
    raw = json.dumps({"content": "keep <private>secret stuff<\\/private> keep"})
    raw = raw.replace("<\\\\/private>", "<\\/private>")  # as a JSON encoder escaping '/' writes it
    out, _ = R.redact(raw)
    assert json.loads(out)["content"] == "keep [REDACTED:private] keep"
    out, _ = R.redact("first <private>never closed\nsecond line")
    assert out == "first [REDACTED:private]\nsecond line"
    found = R.find("a <private>x</private> b")
    assert found == [("private", 2, 22)]


def test_over_redaction_is_safe():
    """Something that only looks like a secret is redacted too (the safe side): the record
    stays valid JSON and everything around the value is untouched."""
    line = json.dumps({"type": "user", "message": {"content": "set token=notreallyasecret then go"}})
    out, counts = R.redact(line)
    assert counts == {"secret_assignment": 1}
    assert json.loads(out)["message"]["content"] == "set token=[REDACTED:secret_assignment] then go"
    # overlapping findings merge into one redaction
    out, counts = R.redact("token=" + GH)
    assert out == "token=[REDACTED:github_token]" and sum(counts.values()) == 1


def test_real_transcripts_stay_valid_jsonl_after_redaction():
    """Redacting every real transcript of the corpus keeps every line valid JSON, leaves the
    line count unchanged, and is idempotent."""
    for path in sorted(REAL.rglob("*.jsonl")):
        data = path.read_bytes()
        out, _ = R.redact_bytes(data)
        assert out.count(b"\n") == data.count(b"\n"), path
        for line in out.splitlines():
            json.loads(line)
        assert R.redact_bytes(out)[0] == out


def test_find_returns_character_offsets_and_placeholders_can_be_allowed():
    """`find` reports (kind, start, end) in characters of the given text (also after non-ASCII
    text), tells secret kinds from PII kinds, and can leave out obvious PII placeholders."""
    text = "héllo → alice.smith@corp.io and user@example.com and " + GH
    found = R.find(text)
    kinds = [k for k, _, _ in found]
    assert kinds == ["email", "email", "github_token"]
    for _, s, e in found:
        assert text[s:e] in ("alice.smith@corp.io", "user@example.com", GH)
    assert [k for k, _, _ in R.find(text, allow_placeholders=True)] == ["email", "github_token"]
    assert "github_token" in R.secret_kinds and "email" in R.pii_kinds
    assert "private" in R.secret_kinds and not (R.secret_kinds & R.pii_kinds)
    assert is_placeholder("email", "noreply@anthropic.com")
    assert is_placeholder("email", "git@github.com")
    assert is_placeholder("phone", "(415) 555-0123")
    assert not is_placeholder("email", "alice.smith@corp.io")
    assert not is_placeholder("github_token", GH)


def test_config_extra_rules_and_allow_list():
    """Extra rules from config are compiled in (with or without needles) and allow patterns
    keep what they match; invalid config patterns are a clear error."""
    cfg = RedactionConfig(
        extra_rules=[{"kind": "ticket", "pattern": r"TICKET-\d{4}"},
                     {"kind": "acme", "pattern": r"acme_[a-z]{8}", "needles": "acme_"}],
        allow=[r"@corp\.io$"])
    r = Redactor(cfg.extra_rules, cfg.allow)
    out, counts = r.redact("TICKET-1234 acme_abcdefgh alice@corp.io bob@other.org")
    assert out == "[REDACTED:ticket] [REDACTED:acme] alice@corp.io [REDACTED:email]"
    assert redactor_for(cfg) is redactor_for(cfg)
    assert redactor_for(RedactionConfig()) is default_redactor()
    with pytest.raises(ValueError, match="bad pattern"):
        Redactor([{"kind": "x", "pattern": "("}])
    with pytest.raises(ValueError, match="allow"):
        Redactor(allow=["("])


def test_luhn():
    """The Luhn check accepts valid numbers and rejects a one-digit change."""
    assert luhn_ok("4012888888881881") and not luhn_ok("4012888888881882")


def test_never_raises_on_odd_input():
    """Lone surrogates, bytes, NULs and empty input do not raise."""
    for text in ["", "\x00" * 10, "\ud800 abc", "\\", "\\u12", "<private>"]:
        out, _ = R.redact(text)
        assert isinstance(out, str)
        R.find(text)
    assert R.redact_bytes(b"\xff\xfe ghp_" + b"a" * 36)[1] == {"github_token": 1}


_FRAGMENTS = [
    "ghp_", "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6", "sk-", "proj-", "abc123", "@", "corp.io",
    "\\n", "\\", '"', "\\u00e9", "<private>", "</private>", "password", "token", "=", ": ",
    "4012", "8888", "1881", " ", "-", "555", "(", ")", "+44", "Bearer ", "Authorization: Basic ",
    "://", "user:pass@", "eyJ", ".", "AKIA", "QYLPMN5HHHFPZAM2", "[REDACTED:x]", "[REDACTED:",
    "-----BEGIN RSA PRIVATE KEY-----", "0", "1", "9", "é", "\n", "'", "xoxb-", "glpat-",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=12)), max_size=30))
def test_redaction_is_idempotent_and_never_raises(parts):
    """For arbitrary text (secret fragments, escapes, tags, markers, noise): redact never
    raises, and redacting its output changes nothing more."""
    text = "".join(parts)
    once, first = R.redact(text)
    assert "redaction_error" not in first  # no internal failure hidden by the safety net
    twice, counts = R.redact(once)
    assert twice == once, (text, once, twice)
    assert counts == {}
    assert all(k != "redaction_error" for k, _, _ in R.find(text))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_redaction_of_arbitrary_unicode_is_idempotent(text):
    """Idempotence and no exceptions on arbitrary Unicode text too."""
    once, counts = R.redact(text)
    assert "redaction_error" not in counts
    assert R.redact(once)[0] == once
