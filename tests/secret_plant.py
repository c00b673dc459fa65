"""Fake secrets planted into real transcript records, in the encodings a transcript holds them.

Two sets, kept apart on purpose:

* `ISSUE_KINDS`: the 22 kinds a probe planted (and 15 got through);
* `HELD_OUT`: 40+ further kinds written from how each provider or tool formats its secret,
  not from the redaction rules; the rules are not tuned to these instances. A kind is a
  *snippet* as it appears in a file, a command or a message, and the secret values in it.

Every value is random (fixed seed) with the real format's shape. `plant(snippet, form, rng)`
puts a snippet into copies of real records (tests/corpus/real) in one of `FORMS`:

* `prompt`: the user typed it (JSON-escaped once in the JSONL);
* `cat`: a tool result holding the file as printed (escaped once);
* `read`: a Read tool result, each line numbered `     N→` as Claude Code shows files;
* `json2`: the snippet inside a JSON document that is itself a tool result string (escaped
  twice: a newline is `\\\\n` in the JSONL, a quote `\\\\\\"`);
* `split`: a multi-line snippet read in two chunks (cut at a line), two records, the second
  without the first's head;
* `command`: a Bash tool call whose command is the snippet.

`leaked(secret, out)` says whether any recognisable piece of a secret survived in `out`.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REAL = Path(__file__).resolve().parent / "corpus" / "real"
ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
HEX = "0123456789abcdef"
DJANGO = string.ascii_lowercase + string.digits + "!@#%^&*(-_=+)"  # get_random_secret_key()
FORMS = ("prompt", "cat", "read", "json2", "split", "command")


def rnd(rng: random.Random, alphabet: str, n: int) -> str:
    """Random text of `n` characters, with at least one digit, upper and lower when the
    alphabet has them (as generated keys nearly always do)."""
    while True:
        s = "".join(rng.choice(alphabet) for _ in range(n))
        need = [c for c in (string.digits, string.ascii_uppercase, string.ascii_lowercase)
                if set(c) & set(alphabet)]
        if n < 12 or all(set(s) & set(c) for c in need):
            return s


def password(rng: random.Random, n: int = 14) -> str:
    return rnd(rng, ALNUM, n - 2) + rng.choice("!#%^*") + rng.choice(string.digits)


def pem(rng: random.Random, label: str = "PRIVATE KEY", lines: int = 25, width: int = 64) -> str:
    body = [rnd(rng, B64, width) for _ in range(lines)] + [rnd(rng, B64, 24) + "=="]
    return f"-----BEGIN {label}-----\n" + "\n".join(body) + f"\n-----END {label}-----\n"


def pem_body(key: str) -> list[str]:
    return [ln for ln in key.splitlines() if ln and not ln.startswith("-----")]


def b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


@dataclass(frozen=True)
class Planted:
    kind: str
    snippet: str  # the text as it appears in a file, a command or a message
    secrets: tuple[str, ...]  # each must be gone after redaction


Kind = Callable[[random.Random], Planted]


# ---- the 22 kinds of the probe -----------------------------------------------------------

def _gcp_sa(rng):
    key = pem(rng)
    kid = rnd(rng, HEX, 40)
    doc = {"type": "service_account", "project_id": "acme-prod-231", "private_key_id": kid,
           "private_key": key, "client_email": "deploy@acme-prod-231.iam.gserviceaccount.com",
           "client_id": "1" + rnd(rng, string.digits, 20), "token_uri":
           "https://oauth2.googleapis.com/token"}
    return Planted("gcp_service_account", json.dumps(doc, indent=2), (kid, *pem_body(key)))


def _pem_second_chunk(rng):
    key = pem(rng, "RSA PRIVATE KEY")
    lines = key.splitlines()
    tail = "\n".join(lines[13:]) + "\n"  # what a second read (offset 14) returns
    return Planted("pem_second_chunk", tail, tuple(pem_body(tail)))


def _kubeconfig(rng):
    key = pem(rng, "RSA PRIVATE KEY", lines=12)
    data = b64(key)
    cert = b64(pem(rng, "CERTIFICATE", lines=8))
    text = ("apiVersion: v1\nclusters:\n- cluster:\n    server: https://10.0.0.1:6443\n"
            "  name: prod\nusers:\n- name: admin\n  user:\n"
            f"    client-certificate-data: {cert}\n    client-key-data: {data}\n")
    return Planted("kubeconfig_client_key", text, (data,))


def _azure(rng):
    key = rnd(rng, B64, 86) + "=="
    text = ("AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=acmelogs;"
            f"AccountKey={key};EndpointSuffix=core.windows.net")
    return Planted("azure_account_key", text, (key,))


def _docker(rng):
    auth = b64("deploy:" + password(rng))
    doc = {"auths": {"registry.acme.io": {"auth": auth}, "https://index.docker.io/v1/": {}}}
    return Planted("docker_config_auth", json.dumps(doc, indent="\t"), (auth,))


def _npmrc_auth(rng):
    auth = b64("ci-bot:" + password(rng))
    text = f"registry=https://npm.acme.io/\n_auth={auth}\nalways-auth=true\n"
    return Planted("npmrc_auth", text, (auth,))


def _hf(rng):
    tok = "hf_" + rnd(rng, ALNUM, 34)
    return Planted("huggingface_token", f"huggingface-cli login --token {tok}", (tok,))


def _sendgrid(rng):
    tok = "SG." + rnd(rng, URLSAFE, 22) + "." + rnd(rng, URLSAFE, 43)
    return Planted("sendgrid_key", f"const sg = require('@sendgrid/mail');\nsg.setApiKey('{tok}');",
                   (tok,))


def _telegram(rng):
    tok = str(rng.randint(10**8, 10**10 - 1)) + ":AA" + rnd(rng, URLSAFE, 33)
    return Planted("telegram_bot_token",
                   f"curl https://api.telegram.org/bot{tok}/getUpdates", (tok,))


def _aws_bare(rng):
    sec = rnd(rng, B64, 40)
    return Planted("aws_secret_no_id", f"the secret key they gave us is {sec} (rotate it monthly)",
                   (sec,))


def _mysql(rng):
    pw = password(rng)
    return Planted("mysql_p_flag", f"mysql -h db.internal -u root -p{pw} shop < dump.sql", (pw,))


def _curl_u(rng):
    pw = password(rng)
    return Planted("curl_u_flag", f"curl -s -u admin:{pw} https://jenkins.acme.io/api/json",
                   (pw,))


def _sshpass(rng):
    pw = password(rng)
    return Planted("sshpass_p", f"sshpass -p '{pw}' ssh deploy@10.1.2.3 uptime", (pw,))


def _pgpass(rng):
    pw = password(rng)
    return Planted("pgpass_line", f"db.acme.io:5432:orders:app_user:{pw}\n*:*:*:postgres:{pw}x\n",
                   (pw,))


def _aws_key_id(rng):
    kid = "AKIA" + rnd(rng, string.ascii_uppercase + "234567", 16)
    return Planted("aws_access_key_id", f"[default]\naws_access_key_id = {kid}\nregion = eu-west-1",
                   (kid,))


def _github(rng):
    tok = "ghp_" + rnd(rng, ALNUM, 36)
    return Planted("github_token", f"git remote set-url origin https://{tok}@github.com/acme/api",
                   (tok,))


def _slack(rng):
    tok = f"xoxb-{rng.randint(10**10, 10**11)}-{rng.randint(10**12, 10**13)}-" + rnd(rng, ALNUM, 24)
    return Planted("slack_bot_token", f'SLACK_BOT_TOKEN="{tok}"', (tok,))


def _openai(rng):
    tok = "sk-proj-" + rnd(rng, URLSAFE, 48)
    return Planted("openai_key", f"export OPENAI_API_KEY={tok}", (tok,))


def _url_creds(rng):
    pw = password(rng)
    return Planted("url_credentials", f"DATABASE_URL=postgresql://orders:{pw}@10.0.3.7:5432/orders",
                   (pw,))


def _env_line(rng):
    pw, sec = password(rng), rnd(rng, HEX, 64)
    text = f"APP_ENV=production\nDB_PASS={pw}\nSESSION_SECRET={sec}\nPORT=8080\n"
    return Planted("env_file_lines", text, (pw, sec))


def _keyword_no_prefix(rng):
    pw, tok = password(rng), rnd(rng, ALNUM, 32)
    text = f"database:\n  host: db.local\n  password: {pw}\nintegrations:\n  token: {tok}\n"
    return Planted("keyword_value", text, (pw, tok))


def _private_key_id(rng):
    kid = rnd(rng, HEX, 40)
    return Planted("private_key_id", f'  "private_key_id": "{kid}",', (kid,))


ISSUE_KINDS: list[Kind] = [
    _gcp_sa, _pem_second_chunk, _kubeconfig, _azure, _docker, _npmrc_auth, _hf, _sendgrid,
    _telegram, _aws_bare, _mysql, _curl_u, _sshpass, _pgpass, _private_key_id, _aws_key_id,
    _github, _slack, _openai, _url_creds, _env_line, _keyword_no_prefix,
]


# ---- the held-out kinds ------------------------------------------------------------------
# Written from the providers' documented formats; the rules were not tuned to these.

def _k(name: str, make: Callable[[random.Random], tuple[str, tuple[str, ...]]]) -> Kind:
    def kind(rng):
        text, secrets = make(rng)
        return Planted(name, text, secrets)
    kind.__name__ = name
    return kind


def _one(template: str, value: Callable[[random.Random], str]):
    def make(rng):
        v = value(rng)
        return template.format(v=v), (v,)
    return make


HELD_OUT: list[Kind] = [
    _k("aws_credentials_file", lambda r: (lambda i, s: (
        f"[prod]\naws_access_key_id={i}\naws_secret_access_key={s}\n", (i, s)))(
        "ASIA" + rnd(r, string.ascii_uppercase + "234567", 16), rnd(r, B64, 40))),
    _k("aws_session_token", _one("export AWS_SESSION_TOKEN={v}",
                                 lambda r: "IQoJb3JpZ2luX2Vj" + rnd(r, B64, 300))),
    _k("github_fine_grained", _one("GH_TOKEN: {v}",
                                   lambda r: "github_pat_11" + rnd(r, ALNUM, 20) + "_"
                                   + rnd(r, ALNUM, 59))),
    _k("github_oauth_in_json", _one('{{"oauth_token": "{v}", "user": "mona"}}',
                                    lambda r: "gho_" + rnd(r, ALNUM, 36))),
    _k("gitlab_pat", _one("git clone https://oauth2:{v}@gitlab.com/acme/infra.git",
                          lambda r: "glpat-" + rnd(r, URLSAFE, 20))),
    _k("slack_webhook", _one("curl -X POST -d @msg.json {v}",
                             lambda r: "https://hooks.slack.com/services/T" + rnd(r, ALNUM, 8).upper()
                             + "/B" + rnd(r, ALNUM, 10).upper() + "/" + rnd(r, ALNUM, 24))),
    _k("stripe_live", _one("Stripe.api_key = \"{v}\"", lambda r: "sk_live_" + rnd(r, ALNUM, 99))),
    _k("stripe_restricted", _one("stripe listen --api-key {v}",
                                 lambda r: "rk_live_" + rnd(r, ALNUM, 24))),
    _k("anthropic_key", _one("client = Anthropic(api_key=\"{v}\")",
                             lambda r: "sk-ant-api03-" + rnd(r, URLSAFE, 93) + "AA")),
    _k("google_api_key", _one("https://maps.googleapis.com/maps/api/geocode/json?key={v}&address=x",
                              lambda r: "AIza" + rnd(r, URLSAFE, 35))),
    _k("google_oauth_access", _one("Authorization: Bearer {v}",
                                   lambda r: "ya29.a0" + rnd(r, URLSAFE, 150))),
    _k("openssh_private_key", lambda r: (lambda k: (k, tuple(pem_body(k))))(
        pem(r, "OPENSSH PRIVATE KEY", lines=20, width=70))),
    _k("ec_private_key_cat_n", lambda r: (lambda k: (
        "\n".join(f"{i + 1:6d}\t{ln}" for i, ln in enumerate(k.splitlines())),
        tuple(pem_body(k))))(pem(r, "EC PRIVATE KEY", lines=3))),
    _k("encrypted_pem", lambda r: (lambda k: (k, tuple(pem_body(k))))(
        pem(r, "ENCRYPTED PRIVATE KEY", lines=16))),
    _k("npm_token_npmrc", _one("//registry.npmjs.org/:_authToken={v}",
                               lambda r: "npm_" + rnd(r, ALNUM, 36))),
    _k("pypi_token", _one("[pypi]\n  username = __token__\n  password = {v}\n",
                          lambda r: "pypi-AgEIcHlwaS5vcmc" + rnd(r, URLSAFE, 140))),
    _k("twilio_auth_token", _one("TWILIO_AUTH_TOKEN={v}", lambda r: rnd(r, HEX, 32))),
    _k("mailgun_key", _one("MAILGUN_API_KEY=key-{v}", lambda r: rnd(r, HEX, 32))),
    _k("mailchimp_key", _one("mailchimp.setConfig({{ apiKey: '{v}', server: 'us14' }})",
                             lambda r: rnd(r, HEX, 32) + "-us14")),
    _k("discord_bot_token", _one("client.login('{v}')",
                                 lambda r: "MT" + rnd(r, ALNUM, 24) + "." + rnd(r, URLSAFE, 6)
                                 + "." + rnd(r, URLSAFE, 38))),
    _k("jwt_in_cookie", _one("Cookie: session={v}; theme=dark",
                             lambda r: "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + rnd(r, URLSAFE, 60)
                             + "." + rnd(r, URLSAFE, 43))),
    _k("azure_sas_url", _one("azcopy copy ./dist 'https://acme.blob.core.windows.net/web?sv=2022-11-02"
                             "&ss=b&srt=sco&sp=rwdlac&se=2026-12-31T00:00:00Z&sig={v}'",
                             lambda r: rnd(r, ALNUM, 43) + "%3D")),
    _k("azure_client_secret", _one("az login --service-principal -u 0b8f-app -p {v} --tenant acme",
                                   lambda r: rnd(r, URLSAFE, 6) + "~" + rnd(r, URLSAFE, 33))),
    _k("mongodb_srv_uri", _one("MONGO_URL=mongodb+srv://admin:{v}@cluster0.ab1cd.mongodb.net/app",
                               password)),
    _k("redis_url_no_user", _one("redis-cli -u redis://:{v}@cache.internal:6379/0 ping",
                                 password)),
    _k("amqp_url", _one("broker_url = 'amqp://celery:{v}@rabbit:5672//'", password)),
    _k("netrc", _one("machine api.heroku.com\n  login me@acme.io\n  password {v}\n",
                     lambda r: rnd(r, HEX, 8) + "-" + rnd(r, HEX, 4) + "-" + rnd(r, HEX, 4) + "-"
                     + rnd(r, HEX, 4) + "-" + rnd(r, HEX, 12))),
    _k("git_credentials", _one("https://mona:{v}@github.com\n", lambda r: "gho_" + rnd(r, ALNUM, 36))),
    _k("k8s_secret_base64", lambda r: (lambda p: (
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\ndata:\n"
        f"  password: {b64(p)}\n  username: {b64('admin')}\n", (b64(p),)))(password(r))),
    _k("kube_token_user", _one("users:\n- name: ci\n  user:\n    token: {v}\n",
                               lambda r: "eyJhbGciOiJSUzI1NiIsImtpZCI6Ij" + rnd(r, URLSAFE, 40)
                               + "." + rnd(r, URLSAFE, 200) + "." + rnd(r, URLSAFE, 86))),
    _k("docker_login_flag", _one("docker login -u ci --password {v} registry.acme.io", password)),
    _k("psql_pgpassword", _one("PGPASSWORD={v} psql -h db -U app -c 'select 1'", password)),
    _k("mysqldump_long_flag", _one("mysqldump --user=root --password='{v}' shop > s.sql", password)),
    _k("wget_http_password", _one("wget --http-user=ci --http-password={v} https://acme.io/a.tgz",
                                  password)),
    _k("redis_cli_a", _one("redis-cli -h cache -a {v} info", password)),
    _k("htpasswd_b", _one("htpasswd -b -c .htpasswd admin {v}", password)),
    _k("client_secret_json", _one('{{"web": {{"client_id": "123.apps.googleusercontent.com", '
                                  '"client_secret": "{v}"}}}}',
                                  lambda r: "GOCSPX-" + rnd(r, URLSAFE, 28))),
    _k("django_secret_key", _one("SECRET_KEY = 'django-insecure-{v}'",
                                 lambda r: rnd(r, DJANGO, 50))),
    _k("rails_secret_key_base", _one("secret_key_base: {v}", lambda r: rnd(r, HEX, 128))),
    _k("heroku_api_key", _one("HEROKU_API_KEY={v} heroku apps",
                              lambda r: rnd(r, HEX, 8) + "-" + rnd(r, HEX, 4) + "-" + rnd(r, HEX, 4)
                              + "-" + rnd(r, HEX, 4) + "-" + rnd(r, HEX, 12))),
    _k("digitalocean_token", _one("doctl auth init --access-token {v}",
                                  lambda r: "dop_v1_" + rnd(r, HEX, 64))),
    _k("shopify_token", _one("X-Shopify-Access-Token: {v}", lambda r: "shpat_" + rnd(r, HEX, 32))),
    _k("databricks_token", _one("databricks configure --token\nHost: https://adb-1.azuredatabricks.net"
                                "\nToken: {v}", lambda r: "dapi" + rnd(r, HEX, 32))),
    _k("vault_token", _one("export VAULT_TOKEN={v}", lambda r: "hvs." + rnd(r, URLSAFE, 90))),
    _k("terraform_token", _one('credentials "app.terraform.io" {{\n  token = "{v}"\n}}',
                               lambda r: rnd(r, ALNUM, 14) + ".atlasv1." + rnd(r, ALNUM, 67))),
    _k("sentry_dsn", _one("SENTRY_DSN=https://{v}@o44721.ingest.sentry.io/5512",
                          lambda r: rnd(r, HEX, 32))),
    _k("cloudflare_token", _one("CLOUDFLARE_API_TOKEN={v}", lambda r: rnd(r, URLSAFE, 40))),
    _k("age_secret_key", _one("# created: 2026-01-02\nAGE-SECRET-KEY-1{v}",
                              lambda r: rnd(r, string.ascii_uppercase + "234567", 58))),
    _k("basic_auth_header", _one("-H 'Authorization: Basic {v}'",
                                 lambda r: b64("ops:" + password(r)))),
    _k("x_api_key_header", _one("curl -H 'x-api-key: {v}' https://api.acme.io/v2/orders",
                                lambda r: rnd(r, ALNUM, 40))),
    _k("url_query_token", _one("GET https://api.acme.io/export?format=csv&access_token={v}",
                               lambda r: rnd(r, ALNUM, 40))),
    _k("linear_api_key", _one("LINEAR_API_KEY={v}", lambda r: "lin_api_" + rnd(r, ALNUM, 40))),
    _k("generic_api_key_yaml", _one("openweather:\n  api_key: {v}\n", lambda r: rnd(r, HEX, 32))),
    _k("passphrase_flag", _one("openssl rsa -in enc.key -passin pass:{v} -out dec.key", password)),
    _k("ssh_pass_env", _one("SSHPASS={v} sshpass -e ssh root@10.9.8.7", password)),
    _k("bearer_bare_header", _one('headers = {{"Authorization": "Bearer {v}"}}',
                                  lambda r: rnd(r, URLSAFE, 48))),
    _k("firebase_service_key", lambda r: (lambda k, i: (json.dumps(
        {"type": "service_account", "private_key_id": i, "private_key": k}), (i, *pem_body(k))))(
        pem(r, lines=10), rnd(r, HEX, 40))),
]


# A second held-out set, written after the first had been measured and before the rules were
# changed for what it missed; measured once, after those changes.
HELD_OUT_2: list[Kind] = [
    _k("okta_token", _one("OKTA_API_TOKEN={v}", lambda r: "00" + rnd(r, URLSAFE, 40))),
    _k("atlassian_token_in_curl_u",
       _one("curl -u me@acme.io:{v} https://acme.atlassian.net/rest/api/3/myself",
            lambda r: "ATATT3xFfGF0" + rnd(r, URLSAFE, 180) + "=" + rnd(r, HEX, 8).upper())),
    _k("postman_key", _one("postman collection run 123 --api-key {v}",
                           lambda r: "PMAK-" + rnd(r, HEX, 24) + "-" + rnd(r, HEX, 34))),
    _k("grafana_service_token", _one("GRAFANA_TOKEN: {v}",
                                     lambda r: "glsa_" + rnd(r, ALNUM, 32) + "_" + rnd(r, HEX, 8))),
    _k("pulumi_token", _one("export PULUMI_ACCESS_TOKEN={v}", lambda r: "pul-" + rnd(r, HEX, 40))),
    _k("doppler_token", _one("doppler run --token {v} -- npm start",
                             lambda r: "dp.st.prd." + rnd(r, ALNUM, 40))),
    _k("newrelic_key", _one("NEW_RELIC_API_KEY={v}",
                            lambda r: "NRAK-" + rnd(r, string.ascii_uppercase + string.digits, 27))),
    _k("fastly_header", _one("curl -H 'Fastly-Key: {v}' https://api.fastly.com/service",
                             lambda r: rnd(r, URLSAFE, 32))),
    _k("planetscale_token", _one("pscale auth login --service-token {v}",
                                 lambda r: "pscale_tkn_" + rnd(r, URLSAFE, 43))),
    _k("supabase_service_role", _one("SUPABASE_SERVICE_ROLE_KEY={v}",
                                     lambda r: "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + rnd(r, URLSAFE, 120)
                                     + "." + rnd(r, URLSAFE, 43))),
    _k("django_email_password", _one("EMAIL_HOST_PASSWORD = '{v}'", password)),
    _k("spring_properties", _one("spring.datasource.url=jdbc:mysql://db:3306/app\n"
                                 "spring.datasource.password={v}\n", password)),
    _k("maven_settings_xml", _one("<server>\n  <id>nexus</id>\n  <username>ci</username>\n"
                                  "  <password>{v}</password>\n</server>", password)),
    _k("ansible_inventory", _one("web1 ansible_host=10.0.0.5 ansible_user=root ansible_ssh_pass={v}",
                                 password)),
    _k("tfvars", _one('db_password = "{v}"\nregion = "eu-west-1"', password)),
    _k("php_define", _one("define('DB_PASSWORD', '{v}');", password)),
    _k("kubectl_from_literal", _one("kubectl create secret generic db --from-literal=password={v}",
                                    password)),
    _k("jdbc_query_password", _one("jdbc:postgresql://db:5432/app?user=app&password={v}&ssl=true",
                                   password)),
    _k("octokit_ruby", _one("Octokit::Client.new(access_token: '{v}')",
                            lambda r: "ghp_" + rnd(r, ALNUM, 36))),
    _k("gitlab_private_token_header", _one('curl -H "PRIVATE-TOKEN: {v}" https://gitlab.com/api/v4/user',
                                           lambda r: "glpat-" + rnd(r, URLSAFE, 20))),
    _k("dockerfile_env", _one("FROM node:20\nENV API_TOKEN={v}\nRUN npm ci", lambda r: rnd(r, ALNUM, 32))),
    _k("openssl_passout", _one("openssl req -new -key k.pem -passout pass:{v} -out r.csr", password)),
    _k("putty_private_key", lambda r: (lambda body: (
        "PuTTY-User-Key-File-3: ssh-rsa\nEncryption: none\nComment: deploy\nPublic-Lines: 2\n"
        + rnd(r, B64, 64) + "\n" + rnd(r, B64, 40) + "\nPrivate-Lines: 3\n" + "\n".join(body)
        + "\nPrivate-MAC: " + rnd(r, HEX, 64) + "\n", tuple(body)))(
        [rnd(r, B64, 64), rnd(r, B64, 64), rnd(r, B64, 20)])),
    _k("aws_cli_configure", _one("aws configure set aws_secret_access_key {v} --profile prod",
                                 lambda r: rnd(r, B64, 40))),
    _k("gcloud_access_token_json", _one('{{"access_token": "{v}", "expires_in": 3599}}',
                                        lambda r: "ya29.c." + rnd(r, URLSAFE, 200))),
]


# ---- planting into real records ----------------------------------------------------------

def _records() -> tuple[dict, dict, dict]:
    """A real user prompt, a real tool result and a real Bash tool call, as templates."""
    user = result = call = None
    for path in sorted(REAL.rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            msg = rec.get("message") if isinstance(rec, dict) else None
            if not isinstance(msg, dict):
                continue
            content = msg.get("content")
            if rec.get("type") == "user" and isinstance(content, str) and user is None:
                user = rec
            elif rec.get("type") == "user" and isinstance(content, list) and result is None:
                if any(isinstance(c, dict) and c.get("type") == "tool_result"
                       and isinstance(c.get("content"), str) for c in content):
                    result = rec
            elif rec.get("type") == "assistant" and isinstance(content, list) and call is None:
                if any(isinstance(c, dict) and c.get("type") == "tool_use" and c.get("name") == "Bash"
                       for c in content):
                    call = rec
            if user and result and call:
                return user, result, call
    raise RuntimeError("the real corpus lacks a prompt, a tool result or a Bash call")


_TEMPLATES: tuple[dict, dict, dict] | None = None


def templates() -> tuple[dict, dict, dict]:
    global _TEMPLATES
    if _TEMPLATES is None:
        _TEMPLATES = _records()
    return _TEMPLATES


def _with_result(text: str) -> dict:
    rec = copy.deepcopy(templates()[1])
    for c in rec["message"]["content"]:
        if isinstance(c, dict) and c.get("type") == "tool_result":
            c["content"] = text
            break
    rec.pop("toolUseResult", None)
    return rec


def plant(snippet: str, form: str) -> list[str]:
    """JSONL lines (as Claude Code writes them: compact, non-ASCII kept) holding `snippet`."""
    user, _result, call = templates()

    def dump(rec: dict) -> str:
        return json.dumps(rec, ensure_ascii=False, separators=(",", ":"))

    if form == "prompt":
        rec = copy.deepcopy(user)
        rec["message"]["content"] = "here is what I have, why does it fail?\n" + snippet
        return [dump(rec)]
    if form == "cat":
        return [dump(_with_result(snippet))]
    if form == "read":
        numbered = "\n".join(f"{i + 1:6d}→{ln}" for i, ln in enumerate(snippet.splitlines()))
        return [dump(_with_result(numbered))]
    if form == "json2":
        inner = json.dumps({"stdout": snippet, "stderr": "", "interrupted": False})
        return [dump(_with_result(inner))]
    if form == "split":
        lines = snippet.splitlines(keepends=True)
        if len(lines) > 1:
            k = len(lines) // 2
            first, second = "".join(lines[:k]), "".join(lines[k:])
        else:  # one line: cut it in the middle
            k = len(snippet) // 2
            first, second = snippet[:k], snippet[k:]
        return [dump(_with_result(first)), dump(_with_result(second))]
    if form == "command":
        rec = copy.deepcopy(call)
        for c in rec["message"]["content"]:
            if isinstance(c, dict) and c.get("type") == "tool_use":
                c["input"] = {"command": snippet, "description": "run it"}
                break
        return [dump(rec)]
    raise ValueError(form)


def pieces(secret: str) -> list[str]:
    """What must not survive of a secret: each run of 8+ token characters in it, or the whole
    secret when it has none (a short password with symbols)."""
    runs = re.findall(r"[A-Za-z0-9+/=_.~-]{8,}", secret)
    return runs or [secret]


def leaked(secret: str, out: str) -> bool:
    """Whether a recognisable piece of `secret` is still in `out`."""
    return any(p in out for p in pieces(secret))


def cases(kinds: list[Kind], seed: int = 7, forms: tuple[str, ...] = FORMS):
    """(kind name, form, JSONL text, secrets) for every kind in every form."""
    rng = random.Random(seed)
    for make in kinds:
        p = make(rng)
        for form in forms:
            if form == "split" and len(p.snippet.splitlines()) < 2:
                continue  # reads are cut at line boundaries: a one-line snippet stays whole
            yield p.kind, form, "\n".join(plant(p.snippet, form)) + "\n", p.secrets
