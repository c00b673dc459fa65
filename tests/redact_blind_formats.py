"""Provider credential formats for the blind redaction set, written from the providers' public
token formats before the rules were read (no rule, no other corpus was looked at).

A format makes one fake credential from a seeded generator: a list of parts, where a
`Secret` part is the random, secret body and a plain `str` part is public structure (a
documented prefix, a separator, a host, an id). Only `Secret` parts are checked for leaks,
so a redactor may keep a prefix such as `ghp_` and still count as removing the secret.

Shapes: `token` (a self-describing string: every context), `keyed` (no shape of its own,
known only by the name it is given: contexts that carry the name), `url` (a webhook or a
connection string with the secret inside), `block` (a PEM private key).
"""

import base64
import json
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"
UPD = string.ascii_uppercase + string.digits
LOWD = string.ascii_lowercase + string.digits
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"


class Secret(str):
    """A part of a credential that must not survive redaction."""


class Gen:
    """Fake values from one seeded `random.Random` (never a real credential)."""

    def __init__(self, rng):
        self.rng = rng

    def s(self, n: int, alphabet: str = ALNUM) -> Secret:
        return Secret("".join(self.rng.choice(alphabet) for _ in range(n)))

    def hex(self, n: int) -> Secret:
        return self.s(n, HEX)

    def pub(self, n: int, alphabet: str = ALNUM) -> str:
        return str(self.s(n, alphabet))

    def digits(self, n: int) -> str:
        return str(self.rng.randint(1, 9)) + self.pub(n - 1, string.digits)

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def b64json(self, obj: dict, urlsafe: bool = True) -> str:
        raw = json.dumps(obj, separators=(",", ":")).encode()
        enc = base64.urlsafe_b64encode(raw) if urlsafe else base64.b64encode(raw)
        return enc.decode().rstrip("=") if urlsafe else enc.decode()


@dataclass(frozen=True)
class Fmt:
    name: str
    shape: str  # token | keyed | url | block
    var: str  # the name a `.env` or a config gives it
    make: Callable[[Gen], list]
    scheme: str = "Bearer"  # how an HTTP header carries it


def _jwt(g: Gen) -> list:
    head = g.b64json({"alg": g.rng.choice(["HS256", "RS256"]), "typ": "JWT"})
    body = g.b64json({"sub": g.uuid(), "role": g.rng.choice(["service_role", "admin", "user"]),
                      "iat": g.rng.randint(1_600_000_000, 1_800_000_000), "nonce": str(g.s(16))})
    return [head, ".", body[:12], Secret(body[12:]), ".", g.s(43, B64URL)]


def _pem(kind: str, lead: str = "", lines: int = 12) -> Callable[[Gen], list]:
    def make(g: Gen) -> list:
        parts: list = [f"-----BEGIN {kind}-----\n", lead]
        for i in range(lines):
            parts += [g.s(64 if i < lines - 1 else 28, B64), "\n"]
        return parts + [f"-----END {kind}-----"]
    return make


def _basic(g: Gen) -> list:
    raw = f"deploy:{g.s(24)}".encode()
    return [Secret(base64.b64encode(raw).decode())]


def _ops(g: Gen) -> list:
    body = g.b64json({"signInAddress": "my.1password.com", "userAuth": {"method": "SRPg-4096"},
                      "email": f"{g.pub(10, LOWD)}@1passwordserviceaccounts.com",
                      "srpX": str(g.hex(64)), "muk": {"k": str(g.s(43, B64URL))}})
    return ["ops_", body[:20], Secret(body[20:])]


def _glc(g: Gen) -> list:
    body = g.b64json({"o": g.digits(6), "n": f"stack-{g.digits(6)}-hm-read",
                      "k": str(g.s(24)), "m": {"r": "prod-us-east-0"}}, urlsafe=False)
    return ["glc_", body[:16], Secret(body[16:])]


def _sentry_org(g: Gen) -> list:
    body = g.b64json({"iat": g.rng.randint(1_600_000_000, 1_800_000_000), "url": "https://sentry.io",
                      "region_url": "https://us.sentry.io", "org": g.pub(8, LOWD)})
    return ["sntrys_", body[:12], Secret(body[12:]), "_", g.s(43, B64URL)]


def _db(scheme: str, host: str, tail: str) -> Callable[[Gen], list]:
    def make(g: Gen) -> list:
        return [f"{scheme}://{g.rng.choice(['app', 'admin', 'svc_api', 'root'])}:",
                g.s(g.rng.randint(16, 28), ALNUM + "-_.~"), f"@{host}{tail}"]
    return make


FORMATS: list[Fmt] = [
    Fmt("github-classic-pat", "token", "GITHUB_TOKEN", lambda g: ["ghp_", g.s(36)], "token"),
    Fmt("github-fine-grained-pat", "token", "GH_TOKEN",
        lambda g: ["github_pat_", g.s(22), "_", g.s(59)]),
    Fmt("github-oauth", "token", "GITHUB_OAUTH_TOKEN", lambda g: ["gho_", g.s(36)], "token"),
    Fmt("github-app-installation", "token", "GITHUB_APP_TOKEN", lambda g: ["ghs_", g.s(36)]),
    Fmt("github-refresh", "token", "GITHUB_REFRESH_TOKEN", lambda g: ["ghr_", g.s(36)]),
    Fmt("gitlab-pat", "token", "GITLAB_TOKEN", lambda g: ["glpat-", g.s(20, B64URL)]),
    Fmt("gitlab-runner", "token", "RUNNER_TOKEN", lambda g: ["glrt-", g.s(20, B64URL)]),
    Fmt("gitlab-trigger", "token", "CI_TRIGGER_TOKEN", lambda g: ["glptt-", g.hex(40)]),
    Fmt("aws-access-key-id", "token", "AWS_ACCESS_KEY_ID",
        lambda g: [g.rng.choice(["AKIA", "ASIA"]), g.s(16, string.ascii_uppercase + "234567")]),
    Fmt("aws-secret-access-key", "keyed", "AWS_SECRET_ACCESS_KEY", lambda g: [g.s(40, B64)]),
    Fmt("google-api-key", "token", "GOOGLE_API_KEY", lambda g: ["AIza", g.s(35, B64URL)]),
    Fmt("google-oauth-client-secret", "token", "GOOGLE_CLIENT_SECRET",
        lambda g: ["GOCSPX-", g.s(28, B64URL)]),
    Fmt("google-oauth-access-token", "token", "GOOGLE_ACCESS_TOKEN",
        lambda g: ["ya29.", g.s(150, B64URL)]),
    Fmt("google-refresh-token", "token", "GOOGLE_REFRESH_TOKEN",
        lambda g: ["1//0", g.s(99, B64URL)]),
    Fmt("slack-bot", "token", "SLACK_BOT_TOKEN",
        lambda g: ["xoxb-", g.digits(11), "-", g.digits(13), "-", g.s(24)]),
    Fmt("slack-user", "token", "SLACK_USER_TOKEN",
        lambda g: ["xoxp-", g.digits(11), "-", g.digits(11), "-", g.digits(13), "-", g.hex(32)]),
    Fmt("slack-app-level", "token", "SLACK_APP_TOKEN",
        lambda g: ["xapp-1-A", g.pub(10, UPD), "-", g.digits(13), "-", g.hex(64)]),
    Fmt("slack-webhook", "url", "SLACK_WEBHOOK_URL",
        lambda g: ["https://hooks.slack.com/services/T", g.pub(8, UPD), "/B", g.pub(10, UPD),
                   "/", g.s(24)]),
    Fmt("stripe-secret", "token", "STRIPE_SECRET_KEY", lambda g: ["sk_live_51", g.s(97)]),
    Fmt("stripe-restricted", "token", "STRIPE_RESTRICTED_KEY", lambda g: ["rk_live_51", g.s(97)]),
    Fmt("stripe-webhook-secret", "token", "STRIPE_WEBHOOK_SECRET", lambda g: ["whsec_", g.s(32)]),
    Fmt("twilio-api-key", "token", "TWILIO_API_KEY", lambda g: ["SK", g.hex(32)]),
    Fmt("twilio-auth-token", "keyed", "TWILIO_AUTH_TOKEN", lambda g: [g.hex(32)]),
    Fmt("sendgrid", "token", "SENDGRID_API_KEY",
        lambda g: ["SG.", g.s(22, B64URL), ".", g.s(43, B64URL)]),
    Fmt("mailgun", "token", "MAILGUN_API_KEY", lambda g: ["key-", g.hex(32)]),
    Fmt("mailchimp", "token", "MAILCHIMP_API_KEY",
        lambda g: [g.hex(32), f"-us{g.rng.randint(1, 21)}"]),
    Fmt("openai-project", "token", "OPENAI_API_KEY",
        lambda g: ["sk-proj-", g.s(74, B64URL), "T3BlbkFJ", g.s(74, B64URL)]),
    Fmt("openai-legacy", "token", "OPENAI_KEY", lambda g: ["sk-", g.s(20), "T3BlbkFJ", g.s(20)]),
    Fmt("anthropic", "token", "ANTHROPIC_API_KEY",
        lambda g: ["sk-ant-api03-", g.s(93, B64URL), "AA"], "x-api-key"),
    Fmt("anthropic-admin", "token", "ANTHROPIC_ADMIN_KEY",
        lambda g: ["sk-ant-admin01-", g.s(93, B64URL), "AA"], "x-api-key"),
    Fmt("huggingface", "token", "HF_TOKEN", lambda g: ["hf_", g.s(34, string.ascii_letters)]),
    Fmt("npm", "token", "NPM_TOKEN", lambda g: ["npm_", g.s(36)]),
    Fmt("pypi", "token", "PYPI_TOKEN", lambda g: ["pypi-AgEIcHlwaS5vcmc", g.s(120, B64URL)]),
    Fmt("rubygems", "token", "GEM_HOST_API_KEY", lambda g: ["rubygems_", g.hex(48)]),
    Fmt("docker-hub", "token", "DOCKERHUB_TOKEN", lambda g: ["dckr_pat_", g.s(27, B64URL)]),
    Fmt("vault-service", "token", "VAULT_TOKEN", lambda g: ["hvs.", g.s(90, B64URL)]),
    Fmt("vault-batch", "token", "VAULT_BATCH_TOKEN", lambda g: ["hvb.", g.s(100, B64URL)]),
    Fmt("terraform-cloud", "token", "TFE_TOKEN",
        lambda g: [g.s(14), ".atlasv1.", g.s(67, B64URL)]),
    Fmt("grafana-service-account", "token", "GRAFANA_TOKEN",
        lambda g: ["glsa_", g.s(32), "_", g.hex(8)]),
    Fmt("grafana-cloud", "token", "GRAFANA_CLOUD_TOKEN", _glc),
    Fmt("newrelic-user-key", "token", "NEW_RELIC_API_KEY", lambda g: ["NRAK-", g.s(27, UPD)]),
    Fmt("linear", "token", "LINEAR_API_KEY", lambda g: ["lin_api_", g.s(40)]),
    Fmt("notion", "token", "NOTION_TOKEN", lambda g: ["ntn_", g.digits(11), g.s(35)]),
    Fmt("notion-legacy", "token", "NOTION_API_KEY", lambda g: ["secret_", g.s(43)]),
    Fmt("figma", "token", "FIGMA_TOKEN", lambda g: ["figd_", g.s(40, B64URL)]),
    Fmt("atlassian", "token", "JIRA_API_TOKEN",
        lambda g: ["ATATT3xFfGF0", g.s(170, B64URL), "=", g.s(8, "0123456789ABCDEF")]),
    Fmt("bitbucket-app-password", "token", "BITBUCKET_APP_PASSWORD",
        lambda g: ["ATBB", g.s(28), g.s(8, "0123456789ABCDEF")]),
    Fmt("planetscale-token", "token", "PLANETSCALE_TOKEN", lambda g: ["pscale_tkn_", g.s(43, B64URL)]),
    Fmt("planetscale-password", "token", "DATABASE_PASSWORD", lambda g: ["pscale_pw_", g.s(43, B64URL)]),
    Fmt("databricks", "token", "DATABRICKS_TOKEN", lambda g: ["dapi", g.hex(32)]),
    Fmt("supabase", "token", "SUPABASE_ACCESS_TOKEN", lambda g: ["sbp_", g.hex(40)]),
    Fmt("tailscale-auth", "token", "TS_AUTHKEY",
        lambda g: ["tskey-auth-k", g.s(10), "CNTRL-", g.s(32)]),
    Fmt("tailscale-api", "token", "TS_API_KEY", lambda g: ["tskey-api-k", g.s(10), "CNTRL-", g.s(32)]),
    Fmt("shopify-admin", "token", "SHOPIFY_ACCESS_TOKEN", lambda g: ["shpat_", g.hex(32)]),
    Fmt("shopify-shared-secret", "token", "SHOPIFY_API_SECRET", lambda g: ["shpss_", g.hex(32)]),
    Fmt("digitalocean", "token", "DIGITALOCEAN_TOKEN", lambda g: ["dop_v1_", g.hex(64)]),
    Fmt("digitalocean-oauth", "token", "DO_OAUTH_TOKEN", lambda g: ["doo_v1_", g.hex(64)]),
    Fmt("discord-bot", "token", "DISCORD_BOT_TOKEN",
        lambda g: [g.rng.choice("MN") + g.pub(3), g.s(20), ".", g.s(6, B64URL), ".",
                   g.s(38, B64URL)], "Bot"),
    Fmt("discord-webhook", "url", "DISCORD_WEBHOOK_URL",
        lambda g: ["https://discord.com/api/webhooks/", g.digits(18), "/", g.s(68, B64URL)]),
    Fmt("azure-ad-client-secret", "token", "AZURE_CLIENT_SECRET",
        lambda g: [g.s(3), "8Q~", g.s(34, ALNUM + "_~.-")]),
    Fmt("azure-storage-connection", "url", "AZURE_STORAGE_CONNECTION_STRING",
        lambda g: [f"DefaultEndpointsProtocol=https;AccountName={g.pub(12, LOWD)};AccountKey=",
                   g.s(86, B64), "==;EndpointSuffix=core.windows.net"]),
    Fmt("azure-sas-url", "url", "AZURE_BLOB_SAS_URL",
        lambda g: [f"https://{g.pub(10, LOWD)}.blob.core.windows.net/backups/db.tar?sv=2022-11-02"
                   "&ss=b&srt=o&sp=rl&se=2026-12-31T00:00:00Z&spr=https&sig=",
                   g.s(40, ALNUM), "%3D"]),
    Fmt("azure-devops-pat", "keyed", "AZURE_DEVOPS_EXT_PAT",
        lambda g: [g.s(52, string.ascii_lowercase + "234567")], "Basic"),
    Fmt("postman", "token", "POSTMAN_API_KEY", lambda g: ["PMAK-", g.hex(24), "-", g.hex(34)]),
    Fmt("sentry-user", "token", "SENTRY_AUTH_TOKEN", lambda g: ["sntryu_", g.hex(64)]),
    Fmt("sentry-org", "token", "SENTRY_ORG_TOKEN", _sentry_org),
    Fmt("doppler", "token", "DOPPLER_TOKEN",
        lambda g: [g.rng.choice(["dp.pt.", "dp.st.", "dp.ct."]), g.s(43)]),
    Fmt("pulumi", "token", "PULUMI_ACCESS_TOKEN", lambda g: ["pul-", g.hex(40)]),
    Fmt("flyio", "token", "FLY_API_TOKEN", lambda g: ["fo1_", g.s(43, B64URL)]),
    Fmt("netlify", "token", "NETLIFY_AUTH_TOKEN", lambda g: ["nfp_", g.s(36)]),
    Fmt("okta", "keyed", "OKTA_API_TOKEN", lambda g: ["00", g.s(40, B64URL)], "SSWS"),
    Fmt("twitter-bearer", "token", "TWITTER_BEARER_TOKEN",
        lambda g: ["AAAAAAAAAAAAAAAAAAAAA", g.s(30), "%3D", g.s(50)]),
    Fmt("facebook-access-token", "token", "FB_ACCESS_TOKEN", lambda g: ["EAAG", g.s(150)]),
    Fmt("square-access", "token", "SQUARE_ACCESS_TOKEN", lambda g: ["sq0atp-", g.s(22, B64URL)]),
    Fmt("square-oauth-secret", "token", "SQUARE_APP_SECRET", lambda g: ["sq0csp-", g.s(43, B64URL)]),
    Fmt("braintree", "token", "BRAINTREE_ACCESS_TOKEN",
        lambda g: ["access_token$production$", g.s(16, LOWD), "$", g.hex(32)]),
    Fmt("shippo", "token", "SHIPPO_API_KEY", lambda g: ["shippo_live_", g.hex(40)]),
    Fmt("flutterwave", "token", "FLW_SECRET_KEY", lambda g: ["FLWSECK-", g.hex(32), "-X"]),
    Fmt("dynatrace", "token", "DT_API_TOKEN",
        lambda g: ["dt0c01.", g.s(24, UPD), ".", g.s(64, UPD)], "Api-Token"),
    Fmt("age-secret-key", "token", "SOPS_AGE_KEY", lambda g: ["AGE-SECRET-KEY-1", g.s(58, BECH32)]),
    Fmt("jwt", "token", "SUPABASE_SERVICE_ROLE_KEY", _jwt),
    Fmt("telegram-bot", "token", "TELEGRAM_BOT_TOKEN",
        lambda g: [g.digits(10), ":AA", g.s(33, B64URL)]),
    Fmt("teams-webhook", "url", "TEAMS_WEBHOOK_URL",
        lambda g: [f"https://contoso.webhook.office.com/webhookb2/{g.uuid()}@{g.uuid()}"
                   "/IncomingWebhook/", g.hex(32), f"/{g.uuid()}"]),
    Fmt("mapbox-secret", "token", "MAPBOX_SECRET_TOKEN",
        lambda g: ["sk.eyJ1IjoiI", g.s(50, B64URL), ".", g.s(22, B64URL)]),
    Fmt("airtable", "token", "AIRTABLE_TOKEN", lambda g: ["pat", g.s(14), ".", g.hex(64)]),
    Fmt("contentful", "token", "CONTENTFUL_MANAGEMENT_TOKEN", lambda g: ["CFPAT-", g.s(43, B64URL)]),
    Fmt("buildkite", "token", "BUILDKITE_API_TOKEN", lambda g: ["bkua_", g.hex(40)]),
    Fmt("circleci", "token", "CIRCLECI_TOKEN", lambda g: ["CCIPAT_", g.s(22), "_", g.hex(40)],
        "Circle-Token"),
    Fmt("clojars", "token", "CLOJARS_PASSWORD", lambda g: ["CLOJARS_", g.hex(60)]),
    Fmt("prefect", "token", "PREFECT_API_KEY", lambda g: ["pnu_", g.s(36)]),
    Fmt("sourcegraph", "token", "SRC_ACCESS_TOKEN", lambda g: ["sgp_", g.hex(16), "_", g.hex(40)]),
    Fmt("dropbox", "token", "DROPBOX_ACCESS_TOKEN", lambda g: ["sl.B", g.s(135, B64URL)]),
    Fmt("typeform", "token", "TYPEFORM_TOKEN",
        lambda g: ["tfp_", g.s(44, B64URL), "_", g.s(14, B64URL)]),
    Fmt("alibaba", "token", "ALIBABA_CLOUD_ACCESS_KEY_ID", lambda g: ["LTAI", g.s(20)]),
    Fmt("artifactory", "token", "ARTIFACTORY_API_KEY", lambda g: ["AKCp", g.s(69)], "X-JFrog-Art-Api"),
    Fmt("1password-service-account", "token", "OP_SERVICE_ACCOUNT_TOKEN", _ops),
    Fmt("groq", "token", "GROQ_API_KEY", lambda g: ["gsk_", g.s(52)]),
    Fmt("replicate", "token", "REPLICATE_API_TOKEN", lambda g: ["r8_", g.s(37)]),
    Fmt("perplexity", "token", "PERPLEXITY_API_KEY", lambda g: ["pplx-", g.s(48)]),
    Fmt("xai", "token", "XAI_API_KEY", lambda g: ["xai-", g.s(80)]),
    Fmt("langsmith", "token", "LANGSMITH_API_KEY", lambda g: ["lsv2_pt_", g.hex(32), "_", g.hex(10)]),
    Fmt("firebase-fcm-server-key", "token", "FCM_SERVER_KEY",
        lambda g: ["AAAA", g.pub(7, B64URL), ":APA91b", g.s(134, B64URL)], "key="),
    Fmt("pinecone", "token", "PINECONE_API_KEY", lambda g: ["pcsk_", g.s(5), "_", g.s(64)]),
    Fmt("resend", "token", "RESEND_API_KEY", lambda g: ["re_", g.s(8), "_", g.s(24)]),
    Fmt("elevenlabs", "token", "ELEVENLABS_API_KEY", lambda g: ["sk_", g.hex(48)], "xi-api-key"),
    Fmt("neon", "token", "NEON_API_KEY", lambda g: ["napi_", g.s(64, LOWD)]),
    Fmt("brevo", "token", "BREVO_API_KEY", lambda g: ["xkeysib-", g.hex(64), "-", g.s(16)], "api-key"),
    Fmt("hubspot-private-app", "token", "HUBSPOT_ACCESS_TOKEN",
        lambda g: ["pat-na1-", Secret(g.uuid())]),
    Fmt("adafruit-io", "token", "ADAFRUIT_IO_KEY", lambda g: ["aio_", g.s(28)], "X-AIO-Key"),
    Fmt("cloudflare-api-token", "keyed", "CLOUDFLARE_API_TOKEN", lambda g: [g.s(40, B64URL)]),
    Fmt("datadog-api-key", "keyed", "DD_API_KEY", lambda g: [g.hex(32)], "DD-API-KEY"),
    Fmt("datadog-app-key", "keyed", "DD_APP_KEY", lambda g: [g.hex(40)], "DD-APPLICATION-KEY"),
    Fmt("algolia-admin", "keyed", "ALGOLIA_ADMIN_API_KEY", lambda g: [g.hex(32)],
        "X-Algolia-API-Key"),
    Fmt("oauth-client-secret", "keyed", "OAUTH_CLIENT_SECRET", lambda g: [g.s(40, B64URL)]),
    Fmt("password", "keyed", "DB_PASSWORD", lambda g: [g.s(18, ALNUM + "!@^*")]),
    Fmt("http-basic", "keyed", "HTTP_BASIC_AUTH", _basic, "Basic"),
    Fmt("session-cookie", "keyed", "sessionid", lambda g: [g.s(32, LOWD)]),
    Fmt("postgres-url", "url", "DATABASE_URL",
        _db("postgres", "db.internal.example.com:5432", "/app?sslmode=require")),
    Fmt("postgresql-url", "url", "POSTGRES_URL",
        _db("postgresql", "ep-cool-lake-123456.us-east-2.aws.neon.tech", "/neondb")),
    Fmt("mysql-url", "url", "MYSQL_URL", _db("mysql", "mysql.example.net:3306", "/shop")),
    Fmt("mongodb-srv-url", "url", "MONGODB_URI",
        _db("mongodb+srv", "cluster0.ab1cd.mongodb.net", "/?retryWrites=true&w=majority")),
    Fmt("redis-url", "url", "REDIS_URL", _db("redis", "redis-12345.c1.cloud.redislabs.com:12345", "/0")),
    Fmt("amqp-url", "url", "CELERY_BROKER_URL", _db("amqps", "rabbit.example.org", "/prod")),
    Fmt("git-credential-url", "url", "REPO_URL", _db("https", "git.example.com", "/team/app.git")),
    Fmt("rsa-private-key", "block", "RSA_KEY", _pem("RSA PRIVATE KEY", "", 12)),
    Fmt("openssh-private-key", "block", "SSH_KEY",
        _pem("OPENSSH PRIVATE KEY", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAA\n", 6)),
    Fmt("ec-private-key", "block", "EC_KEY", _pem("EC PRIVATE KEY", "", 4)),
    Fmt("pkcs8-private-key", "block", "PRIVATE_KEY", _pem("PRIVATE KEY", "", 14)),
    Fmt("pgp-private-key", "block", "GPG_PRIVATE_KEY",
        _pem("PGP PRIVATE KEY BLOCK", "\n", 10)),
]
