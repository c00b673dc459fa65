"""A redaction corpus written from the providers' token formats, apart from the rules.

Two halves, both generated from a fixed seed (no real secret is in the repository):

* `secret_cases()`: each provider format (`FORMATS`: the prefix, length and alphabet the
  provider documents or issues) in every context a transcript holds a token in (`CONTEXTS`:
  a `.env` line, prose, a command's argument, JSON, YAML, code, a header, a cookie, a URL
  query, a git URL, wrapped over two lines, URL-encoded, `base64 -w0 .env`, `base64 .env`
  wrapped at 76). Formats without a fixed prefix (an AWS secret key, a Twilio auth token…)
  cannot be told from an id standing alone: they are planted only where a keyword names them.
  Each case is a text and the *fragments* that must not survive: the token's secret part as
  it appears in that context (percent-encoded, or the base64 that encodes it).
* `ordinary_artifacts()` (redact_artifacts.py): texts that hold no secret and must come out
  unchanged.

`leaked(fragments, out)` says whether any 10-character piece of a fragment is still in `out`
once line breaks (raw or JSON-escaped) are taken out of it.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
UP = string.ascii_uppercase
LOW = string.ascii_lowercase
DIG = string.digits
ALNUM = UP + LOW + DIG
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
HEX = "0123456789abcdef"
B32 = UP + "234567"


def rnd(rng: random.Random, alphabet: str, n: int) -> str:
    """`n` random characters of `alphabet`, with a digit and a letter of each case it has (as
    generated tokens nearly always do)."""
    while True:
        s = "".join(rng.choice(alphabet) for _ in range(n))
        need = [c for c in (DIG, UP, LOW) if set(c) & set(alphabet)]
        if n < 12 or all(set(s) & set(c) for c in need):
            return s


def b64(s: str | bytes) -> str:
    return base64.b64encode(s.encode() if isinstance(s, str) else s).decode()


@dataclass(frozen=True)
class Format:
    name: str
    env: str  # the variable it is usually kept in
    make: Callable[[random.Random], str]
    prefix: Callable[[str], int] = lambda tok: 0  # how many leading characters are public
    keyword_only: bool = False  # no fixed prefix: planted only where a keyword names it
    secret: Callable[[str], str] | None = None  # the secret part, when not all after the prefix


def _p(n: int) -> Callable[[str], int]:
    return lambda tok: n


def _upto(sep: str) -> Callable[[str], int]:
    return lambda tok: tok.index(sep) + len(sep)


def _fmt(name, env, make, prefix=0, **kw) -> Format:
    return Format(name, env, make, _p(prefix) if isinstance(prefix, int) else prefix, **kw)


def _uuid(r):
    return "-".join(rnd(r, HEX, n) for n in (8, 4, 4, 4, 12))


def _jwt(r, body=120):
    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"})).rstrip("=").replace("+", "-")
    return head + "." + rnd(r, URLSAFE, body) + "." + rnd(r, URLSAFE, 43)


FORMATS: list[Format] = [
    _fmt("aws_access_key_id", "AWS_ACCESS_KEY_ID", lambda r: "AKIA" + rnd(r, B32, 16), 4),
    _fmt("aws_session_key_id", "AWS_ACCESS_KEY_ID", lambda r: "ASIA" + rnd(r, B32, 16), 4),
    _fmt("github_pat_classic", "GITHUB_TOKEN", lambda r: "ghp_" + rnd(r, ALNUM, 36), 4),
    _fmt("github_oauth", "GH_TOKEN", lambda r: "gho_" + rnd(r, ALNUM, 36), 4),
    _fmt("github_app_install", "GITHUB_TOKEN", lambda r: "ghs_" + rnd(r, ALNUM, 36), 4),
    _fmt("github_refresh", "GITHUB_REFRESH", lambda r: "ghr_" + rnd(r, ALNUM, 76), 4),
    _fmt("github_fine_grained", "GH_PAT",
         lambda r: "github_pat_11" + rnd(r, UP + DIG, 20) + "_" + rnd(r, ALNUM, 59), 11),
    _fmt("gitlab_pat", "GITLAB_TOKEN", lambda r: "glpat-" + rnd(r, URLSAFE, 20), 6),
    _fmt("gitlab_runner", "RUNNER_TOKEN", lambda r: "glrt-" + rnd(r, URLSAFE, 20), 5),
    _fmt("slack_bot", "SLACK_BOT_TOKEN", lambda r: f"xoxb-{r.randint(10**10, 10**12)}-"
         f"{r.randint(10**11, 10**13)}-" + rnd(r, ALNUM, 24), 5),
    _fmt("slack_user", "SLACK_TOKEN", lambda r: f"xoxp-{r.randint(10**10, 10**12)}-"
         f"{r.randint(10**10, 10**12)}-{r.randint(10**11, 10**13)}-" + rnd(r, HEX, 32), 5),
    _fmt("slack_app", "SLACK_APP_TOKEN", lambda r: f"xapp-1-A{rnd(r, UP + DIG, 10)}-"
         f"{r.randint(10**12, 10**13)}-" + rnd(r, HEX, 64), 5),
    _fmt("slack_webhook", "SLACK_WEBHOOK_URL", lambda r: "https://hooks.slack.com/services/T"
         + rnd(r, UP + DIG, 10) + "/B" + rnd(r, UP + DIG, 10) + "/" + rnd(r, ALNUM, 24),
         len("https://hooks.slack.com/services/")),
    _fmt("stripe_secret", "STRIPE_SECRET_KEY", lambda r: "sk_live_" + rnd(r, ALNUM, 99), 8),
    _fmt("stripe_restricted", "STRIPE_KEY", lambda r: "rk_live_" + rnd(r, ALNUM, 24), 8),
    _fmt("stripe_webhook_secret", "STRIPE_WEBHOOK_SECRET", lambda r: "whsec_" + rnd(r, ALNUM, 32), 6),
    _fmt("anthropic_key", "ANTHROPIC_API_KEY",
         lambda r: "sk-ant-api03-" + rnd(r, URLSAFE, 93) + "AA", 13),
    _fmt("anthropic_admin", "ANTHROPIC_ADMIN_KEY",
         lambda r: "sk-ant-admin01-" + rnd(r, URLSAFE, 93) + "AA", 15),
    _fmt("openai_project", "OPENAI_API_KEY", lambda r: "sk-proj-" + rnd(r, URLSAFE, 74)
         + "T3BlbkFJ" + rnd(r, URLSAFE, 74), 8),
    _fmt("openai_legacy", "OPENAI_API_KEY",
         lambda r: "sk-" + rnd(r, ALNUM, 20) + "T3BlbkFJ" + rnd(r, ALNUM, 20), 3),
    _fmt("openai_service", "OPENAI_KEY", lambda r: "sk-svcacct-" + rnd(r, URLSAFE, 120), 11),
    _fmt("openrouter", "OPENROUTER_API_KEY", lambda r: "sk-or-v1-" + rnd(r, HEX, 64), 9),
    _fmt("google_api_key", "GOOGLE_API_KEY", lambda r: "AIza" + rnd(r, URLSAFE, 35), 4),
    _fmt("google_oauth_access", "GOOGLE_TOKEN", lambda r: "ya29.a0" + rnd(r, URLSAFE, 150), 5),
    _fmt("google_client_secret", "GOOGLE_CLIENT_SECRET",
         lambda r: "GOCSPX-" + rnd(r, URLSAFE, 28), 7),
    _fmt("npm_token", "NPM_TOKEN", lambda r: "npm_" + rnd(r, ALNUM, 36), 4),
    _fmt("huggingface", "HF_TOKEN", lambda r: "hf_" + rnd(r, ALNUM, 34), 3),
    _fmt("sendgrid", "SENDGRID_API_KEY",
         lambda r: "SG." + rnd(r, URLSAFE, 22) + "." + rnd(r, URLSAFE, 43), 3),
    _fmt("telegram_bot", "TELEGRAM_BOT_TOKEN",
         lambda r: str(r.randint(10**8, 10**10 - 1)) + ":AA" + rnd(r, URLSAFE, 33), _upto(":")),
    # the first part is the base64 of the bot's numeric id
    _fmt("discord_bot", "DISCORD_TOKEN", lambda r: b64(str(r.randint(10**17, 10**19 - 1))).rstrip("=")
         + "." + rnd(r, URLSAFE, 6) + "." + rnd(r, URLSAFE, 38)),
    _fmt("discord_webhook", "DISCORD_WEBHOOK", lambda r: "https://discord.com/api/webhooks/"
         + str(r.randint(10**17, 10**19 - 1)) + "/" + rnd(r, URLSAFE, 68),
         len("https://discord.com/api/webhooks/")),
    _fmt("teams_webhook", "TEAMS_WEBHOOK", lambda r: "https://acme.webhook.office.com/webhookb2/"
         + _uuid(r) + "@" + _uuid(r) + "/IncomingWebhook/" + rnd(r, HEX, 32) + "/" + _uuid(r),
         len("https://acme.webhook.office.com/webhookb2/")),
    _fmt("mailgun", "MAILGUN_API_KEY", lambda r: "key-" + rnd(r, HEX, 32), 4),
    _fmt("mailchimp", "MAILCHIMP_API_KEY", lambda r: rnd(r, HEX, 32) + "-us" + str(r.randint(2, 21))),
    _fmt("twilio_api_key", "TWILIO_API_KEY", lambda r: "SK" + rnd(r, HEX, 32), 2),
    _fmt("databricks", "DATABRICKS_TOKEN", lambda r: "dapi" + rnd(r, HEX, 32), 4),
    _fmt("supabase_pat", "SUPABASE_ACCESS_TOKEN", lambda r: "sbp_" + rnd(r, HEX, 40), 4),
    _fmt("tailscale_auth", "TS_AUTHKEY", lambda r: "tskey-auth-k" + rnd(r, ALNUM, 11) + "CNTRL-"
         + rnd(r, ALNUM, 33), 11),
    _fmt("tailscale_api", "TS_API_KEY", lambda r: "tskey-api-k" + rnd(r, ALNUM, 11) + "CNTRL-"
         + rnd(r, ALNUM, 33), 10),
    _fmt("shopify_access", "SHOPIFY_TOKEN", lambda r: "shpat_" + rnd(r, HEX, 32), 6),
    _fmt("shopify_shared", "SHOPIFY_SECRET", lambda r: "shpss_" + rnd(r, HEX, 32), 6),
    _fmt("digitalocean_pat", "DIGITALOCEAN_TOKEN", lambda r: "dop_v1_" + rnd(r, HEX, 64), 7),
    _fmt("digitalocean_oauth", "DO_TOKEN", lambda r: "doo_v1_" + rnd(r, HEX, 64), 7),
    _fmt("pypi", "PYPI_TOKEN", lambda r: "pypi-AgEIcHlwaS5vcmc" + rnd(r, URLSAFE, 150), 5),
    _fmt("rubygems", "GEM_HOST_API_KEY", lambda r: "rubygems_" + rnd(r, HEX, 48), 9),
    _fmt("docker_pat", "DOCKER_TOKEN", lambda r: "dckr_pat_" + rnd(r, URLSAFE, 27), 9),
    _fmt("vault_service", "VAULT_TOKEN", lambda r: "hvs." + rnd(r, URLSAFE, 90), 4),
    _fmt("vault_batch", "VAULT_TOKEN", lambda r: "hvb." + rnd(r, URLSAFE, 130), 4),
    _fmt("grafana_service_account", "GRAFANA_TOKEN",
         lambda r: "glsa_" + rnd(r, ALNUM, 32) + "_" + rnd(r, HEX, 8), 5),
    _fmt("grafana_cloud", "GRAFANA_CLOUD_TOKEN", lambda r: "glc_eyJvIjoi" + rnd(r, ALNUM, 120), 4),
    _fmt("newrelic_user", "NEW_RELIC_API_KEY", lambda r: "NRAK-" + rnd(r, UP + DIG, 27), 5),
    _fmt("newrelic_insert", "NEW_RELIC_INSERT_KEY", lambda r: "NRII-" + rnd(r, URLSAFE, 32), 5),
    _fmt("linear", "LINEAR_API_KEY", lambda r: "lin_api_" + rnd(r, ALNUM, 40), 8),
    _fmt("notion", "NOTION_TOKEN", lambda r: "ntn_" + rnd(r, DIG, 11) + rnd(r, ALNUM, 35), 4),
    _fmt("notion_legacy", "NOTION_KEY", lambda r: "secret_" + rnd(r, ALNUM, 43), 7),
    _fmt("figma", "FIGMA_TOKEN", lambda r: "figd_" + rnd(r, URLSAFE, 40), 5),
    _fmt("atlassian", "JIRA_API_TOKEN", lambda r: "ATATT3xFfGF0" + rnd(r, URLSAFE, 180) + "="
         + rnd(r, HEX, 8).upper(), 6),
    _fmt("planetscale_token", "PLANETSCALE_TOKEN", lambda r: "pscale_tkn_" + rnd(r, URLSAFE, 43), 11),
    _fmt("planetscale_password", "DATABASE_PASSWORD", lambda r: "pscale_pw_" + rnd(r, URLSAFE, 43), 10),
    _fmt("azure_ad_client_secret", "AZURE_CLIENT_SECRET",
         lambda r: rnd(r, URLSAFE, 3) + r.choice(DIG) + "Q~" + rnd(r, URLSAFE + "~.", 34)),
    _fmt("postman", "POSTMAN_API_KEY", lambda r: "PMAK-" + rnd(r, HEX, 24) + "-" + rnd(r, HEX, 34), 5),
    _fmt("doppler", "DOPPLER_TOKEN", lambda r: "dp.st.prd." + rnd(r, ALNUM, 40), 10),
    _fmt("pulumi", "PULUMI_ACCESS_TOKEN", lambda r: "pul-" + rnd(r, HEX, 40), 4),
    _fmt("sentry_user", "SENTRY_AUTH_TOKEN", lambda r: "sntryu_" + rnd(r, HEX, 64), 7),
    _fmt("sentry_org", "SENTRY_AUTH_TOKEN", lambda r: "sntrys_eyJpYXQiOjE3" + rnd(r, ALNUM, 150), 7),
    _fmt("groq", "GROQ_API_KEY", lambda r: "gsk_" + rnd(r, ALNUM, 52), 4),
    _fmt("replicate", "REPLICATE_API_TOKEN", lambda r: "r8_" + rnd(r, ALNUM, 37), 3),
    _fmt("perplexity", "PPLX_API_KEY", lambda r: "pplx-" + rnd(r, ALNUM, 48), 5),
    _fmt("xai", "XAI_API_KEY", lambda r: "xai-" + rnd(r, ALNUM, 80), 4),
    _fmt("buildkite", "BUILDKITE_API_TOKEN", lambda r: "bkua_" + rnd(r, HEX, 40), 5),
    _fmt("circleci_pat", "CIRCLECI_TOKEN",
         lambda r: "CCIPAT_" + rnd(r, ALNUM, 22) + "_" + rnd(r, HEX, 40), 7),
    _fmt("brevo", "BREVO_API_KEY", lambda r: "xkeysib-" + rnd(r, HEX, 64) + "-" + rnd(r, ALNUM, 16), 8),
    _fmt("contentful", "CONTENTFUL_TOKEN", lambda r: "CFPAT-" + rnd(r, URLSAFE, 43), 6),
    _fmt("sourcegraph", "SRC_ACCESS_TOKEN", lambda r: "sgp_" + rnd(r, HEX, 40), 4),
    _fmt("dynatrace", "DT_API_TOKEN", lambda r: "dt0c01." + rnd(r, UP + DIG, 24) + "."
         + rnd(r, UP + DIG, 64), 7),
    _fmt("terraform_cloud", "TF_TOKEN", lambda r: rnd(r, ALNUM, 14) + ".atlasv1." + rnd(r, ALNUM, 67)),
    _fmt("nuget", "NUGET_API_KEY", lambda r: "oy2" + rnd(r, LOW + DIG, 43), 3),
    _fmt("age_secret_key", "AGE_KEY", lambda r: "AGE-SECRET-KEY-1" + rnd(r, UP + DIG, 58), 16),
    _fmt("mapbox_secret", "MAPBOX_TOKEN", lambda r: "sk.eyJ1IjoiYWNtZSIsImEiOiJ" + rnd(r, ALNUM, 22)
         + "." + rnd(r, URLSAFE, 22), 3),
    _fmt("airtable_pat", "AIRTABLE_TOKEN", lambda r: "pat" + rnd(r, ALNUM, 14) + "." + rnd(r, HEX, 64), 3),
    _fmt("cloudflare_origin_ca", "CF_ORIGIN_CA_KEY",
         lambda r: "v1.0-" + rnd(r, HEX, 24) + "-" + rnd(r, HEX, 146), 5),
    _fmt("facebook_access", "FB_ACCESS_TOKEN", lambda r: "EAAG" + rnd(r, ALNUM, 160), 4),
    _fmt("square_access", "SQUARE_ACCESS_TOKEN", lambda r: "EAAA" + rnd(r, URLSAFE, 60), 4),
    _fmt("shippo", "SHIPPO_TOKEN", lambda r: "shippo_live_" + rnd(r, HEX, 40), 12),
    _fmt("jwt_service_role", "SUPABASE_SERVICE_ROLE_KEY", _jwt),
    _fmt("url_credentials", "DATABASE_URL", lambda r: "postgresql://app:" + rnd(r, ALNUM, 18)
         + "@db.internal:5432/orders", secret=lambda tok: tok.split(":")[2].split("@")[0]),
    # no fixed prefix: only where a keyword names them
    _fmt("aws_secret_key", "AWS_SECRET_ACCESS_KEY", lambda r: rnd(r, B64, 40), keyword_only=True),
    _fmt("twilio_auth_token", "TWILIO_AUTH_TOKEN", lambda r: rnd(r, HEX, 32), keyword_only=True),
    _fmt("heroku_api_key", "HEROKU_API_KEY", _uuid, keyword_only=True),
    _fmt("datadog_api_key", "DD_API_KEY", lambda r: rnd(r, HEX, 32), keyword_only=True),
    _fmt("cloudflare_api_token", "CLOUDFLARE_API_TOKEN", lambda r: rnd(r, URLSAFE, 40),
         keyword_only=True),
    _fmt("db_password", "DB_PASSWORD", lambda r: rnd(r, ALNUM, 14) + r.choice("!#%^*@") + "7",
         keyword_only=True),
]


# ---- contexts: (text, fragments) for a token ------------------------------------------------

def _wrap_at(s: str, at: int) -> str:
    return s[:at] + "\n" + s[at:]


def _b64_fragment(doc: str, tok: str) -> str:
    """The base64 characters that encode only bytes of `tok` inside `doc` (whole groups)."""
    start = doc.encode().index(tok.encode())
    end = start + len(tok.encode())
    g0, g1 = -(-start // 3), end // 3  # the 3-byte groups wholly inside the token
    return b64(doc.encode())[4 * g0: 4 * g1]


def _wrap76(s: str) -> str:
    return "\n".join(s[i:i + 76] for i in range(0, len(s), 76))


Context = Callable[[Format, str, str, random.Random], tuple[str, list[str]]]


def _env_doc(f: Format, tok: str) -> str:
    return f"APP_NAME=storefront\nLOG_LEVEL=info\n{f.env}={tok}\nPORT=8080\n"


CONTEXTS: dict[str, Context] = {
    "env": lambda f, tok, body, r: (f"{f.env}={tok}", [body]),
    "prose": lambda f, tok, body, r: (
        f"I rotated it this morning; the new one is {tok} so please update the deploy job.", [body]),
    "argument": lambda f, tok, body, r: (
        f"./scripts/deploy.sh --region eu-west-1 {tok} --dry-run", [body]),
    "json": lambda f, tok, body, r: (
        json.dumps({"name": "ci", "value": tok, "enabled": True}), [body]),
    "yaml": lambda f, tok, body, r: (f"integrations:\n  primary:\n    value: {tok}\n", [body]),
    "code": lambda f, tok, body, r: (f'client = Client("{tok}", timeout=30)', [body]),
    "header": lambda f, tok, body, r: (
        f'curl -s -H "X-Upstream: {tok}" https://api.example.org/v2/items', [body]),
    "cookie": lambda f, tok, body, r: (f"Cookie: theme=dark; sid={tok}; lang=en-GB", [body]),
    "query": lambda f, tok, body, r: (
        f"https://api.example.org/v1/export?format=csv&k={tok}&page=2", [body]),
    "git_url": lambda f, tok, body, r: (
        f"git remote add mirror https://{tok}@github.com/acme/storefront.git", [body]),
    "wrapped": lambda f, tok, body, r: (
        _wrap_at(f"The deploy failed. Current value: {tok}", 34 + len(tok) - len(body)
                 + r.randint(4, max(4, len(body) - 4))), [body]),
    "url_encoded": lambda f, tok, body, r: (
        "https://example.org/cb?state=ok&payload=" + quote(f"{f.env}={tok}", safe=""),
        [quote(body, safe="")]),
    "base64_env": lambda f, tok, body, r: (
        "$ base64 -w0 .env\n" + b64(_env_doc(f, tok)), [_b64_fragment(_env_doc(f, tok), tok)]),
    "base64_env_wrapped": lambda f, tok, body, r: (
        "$ base64 .env\n" + _wrap76(b64(_env_doc(f, tok))), [_b64_fragment(_env_doc(f, tok), tok)]),
}

# where a keyword names the value (formats without a prefix go only here)
KEYWORD_CONTEXTS: dict[str, Context] = {
    "env": CONTEXTS["env"],
    "export": lambda f, tok, body, r: (f"export {f.env}='{tok}'", [body]),
    "json_key": lambda f, tok, body, r: (json.dumps({f.env.lower(): tok, "region": "eu"}), [body]),
    "yaml_key": lambda f, tok, body, r: (f"settings:\n  {f.env.lower()}: {tok}\n", [body]),
    "url_encoded": CONTEXTS["url_encoded"],
    "base64_env": CONTEXTS["base64_env"],
    "base64_env_wrapped": CONTEXTS["base64_env_wrapped"],
}


@dataclass(frozen=True)
class Case:
    format: str
    context: str
    text: str
    fragments: tuple[str, ...]


def secret_cases(seed: int = 38) -> Iterator[Case]:
    """Every format in every context it can be told in; a fresh token for each case."""
    rng = random.Random(seed)
    for f in FORMATS:
        contexts = KEYWORD_CONTEXTS if f.keyword_only else CONTEXTS
        for name, ctx in contexts.items():
            tok = f.make(rng)
            body = f.secret(tok) if f.secret else tok[f.prefix(tok):]
            text, frags = ctx(f, tok, body, rng)
            yield Case(f.name, name, text, tuple(frags))


_BREAKS = re.compile(r"(?:\\+[nr]|[\r\n])[ \t]*")


def leaked(fragments, out: str, width: int = 10) -> bool:
    """Whether any `width`-character piece of a fragment survives in `out` (line breaks, raw
    or JSON-escaped, taken out of `out` first: a wrapped token's halves count joined)."""
    flat = _BREAKS.sub("", out)
    for frag in fragments:
        w = min(width, len(frag))
        if any(frag[i:i + w] in flat for i in range(0, len(frag) - w + 1)):
            return True
    return False


# ---- measuring a redactor on both halves -------------------------------------------------

FORMS = ("prompt", "cat", "command", "json2")  # how a case reaches a transcript (secret_plant)


def planted(seed: int = 38) -> Iterator[tuple[Case, str, str]]:
    """(case, where, text): each case as written (`raw`: a file, a skill, a command) and as
    a transcript holds it (`jsonl`: a record of a real session, in one of `FORMS` in turn)."""
    from secret_plant import plant

    for i, c in enumerate(secret_cases(seed)):
        yield c, "raw", c.text
        yield c, "jsonl", "\n".join(plant(c.text, FORMS[i % len(FORMS)])) + "\n"


@dataclass
class Score:
    cases: int = 0
    removed: int = 0
    missed: list = None  # (format, context, where)
    artifacts: int = 0
    changed: list = None  # names of artifacts the redactor changed

    @property
    def recall(self) -> float:
        return self.removed / self.cases if self.cases else 0.0

    @property
    def false_positive_share(self) -> float:
        return len(self.changed) / self.artifacts if self.artifacts else 0.0


def score(redact: Callable[[str], str], seed: int = 38) -> Score:
    """Recall (cases with no fragment left) and the share of ordinary artifacts changed, for a
    `redact(text) -> text`."""
    s = Score(missed=[], changed=[])
    for c, where, text in planted(seed):
        s.cases += 1
        if leaked(c.fragments, redact(text)):
            s.missed.append((c.format, c.context, where))
        else:
            s.removed += 1
    from redact_artifacts import ordinary_artifacts

    for name, text in ordinary_artifacts(seed):
        s.artifacts += 1
        if redact(text) != text:
            s.changed.append(name)
    return s


# ---- a blind set: contexts written after the rules, measured once before any change --------

BLIND_CONTEXTS: dict[str, Context] = {
    "markdown_table": lambda f, tok, body, r: (
        f"| service | key |\n|---|---|\n| billing | `{tok}` |", [body]),
    "xml_attribute": lambda f, tok, body, r: (f'<service name="billing" value="{tok}"/>', [body]),
    "sentence_end": lambda f, tok, body, r: (f"Rotate the old one, it was {tok}.", [body]),
    "parentheses": lambda f, tok, body, r: (f"(using {tok})", [body]),
    "escaped_slashes": lambda f, tok, body, r: (json.dumps({"v": tok}).replace("/", "\\/"),
                                                [body.replace("/", "\\/")]),
    "shell_continuation": lambda f, tok, body, r: (
        f"deploy --region eu \\\n  --value {tok[:len(tok) // 2]}\\\n{tok[len(tok) // 2:]}",
        [body]),
    "heredoc": lambda f, tok, body, r: (f"cat > .env <<EOF\n{f.env}={tok}\nEOF", [body]),
    "toml_string": lambda f, tok, body, r: (f'[service]\nvalue = "{tok}"\n', [body]),
    "double_url_encoded": lambda f, tok, body, r: (
        "https://example.org/r?next=" + quote(quote(f"{f.env}={tok}", safe=""), safe=""),
        [quote(quote(body, safe=""), safe="")]),
    "base64_json": lambda f, tok, body, r: (
        "payload: " + b64(json.dumps({"name": "ci", "value": tok})),
        [_b64_fragment(json.dumps({"name": "ci", "value": tok}), tok)]),
}


def blind_cases(seed: int = 99) -> Iterator[Case]:
    rng = random.Random(seed)
    for f in FORMATS:
        if f.keyword_only:
            continue
        for name, ctx in BLIND_CONTEXTS.items():
            tok = f.make(rng)
            body = f.secret(tok) if f.secret else tok[f.prefix(tok):]
            text, frags = ctx(f, tok, body, rng)
            yield Case(f.name, name, text, tuple(frags))
