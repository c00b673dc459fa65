"""A blind redaction set: provider credentials in every context, written before the rules
were read, with fake values from a seeded generator (never a real secret).

Each format (redact_blind_formats.py) is placed in the contexts its shape allows: a `.env`
line, `export`, JSON, YAML, a command's argument, a curl header, a cookie, prose, Markdown,
a URL query, wrapped over two lines (a terminal wrap inside the secret), URL-encoded (a
form body or a redirect parameter), `base64 -w0 .env`, `base64 .env` (76 columns), a Read
tool's numbered lines, code, a log line, XML. Every case is scored as written and inside a
transcript record (a tool result or a Bash tool call, JSON-escaped).

A case is removed when no 10-character piece of any secret part is left in the output,
looked for as written, with whitespace and JSON `\\n` escapes taken out (a wrap rejoined),
and, for encoded contexts, in the encoded form (the percent-encoded part, the base64
characters that only the secret's bytes determine).

False positives are scored on redact_blind_artifacts.py: an artifact counts when redaction
changes it at all.
"""

import base64
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import quote

from redact_blind_artifacts import artifacts
from redact_blind_formats import FORMATS, Fmt, Gen, Secret

SEED = 0x5EC7E7
PIECE = 10


@dataclass(frozen=True)
class Case:
    fmt: str
    context: str
    where: str  # "as written" or "in a record"
    text: str
    fragments: tuple[str, ...]


def _frags(parts: list) -> list[str]:
    return [p for p in parts if isinstance(p, Secret)]


def _pick(g: Gen, options: list):
    return options[g.rng.randrange(len(options))]


def _header(f: Fmt, sec: str) -> str:
    if f.scheme in ("Bearer", "token", "Basic", "SSWS", "Bot", "Api-Token"):
        return f"Authorization: {f.scheme} {sec}"
    if f.scheme == "key=":
        return f"Authorization: key={sec}"
    return f"{f.scheme}: {sec}"


def _env_file(f: Fmt, sec: str, g: Gen) -> str:
    lines = ["NODE_ENV=production", "PORT=8080", "LOG_LEVEL=info", f"APP_NAME={g.pub(6, 'abcdefgh')}",
             "FEATURE_FLAGS=search,export"]
    g.rng.shuffle(lines)
    quoted = f'"{sec}"' if "\n" in sec or g.rng.random() < 0.3 else sec
    lines.insert(g.rng.randrange(len(lines)), f"{f.var}={quoted}")
    return "\n".join(lines) + "\n"


def _b64_frags(content: str, frags: list[str], enc: str) -> list[str]:
    """The base64 characters that only each fragment's bytes decide (whole 3-byte groups)."""
    raw = content.encode()
    out = []
    for fr in frags:
        for piece in fr.split("\n"):
            o = raw.find(piece.encode())
            if o < 0 or not piece:
                continue
            start, end = -(-o // 3), (o + len(piece.encode())) // 3
            if end > start:
                out.append(enc[start * 4: end * 4])
    return out


# A context: (format, the credential, its secret parts, generator) -> (text, fragments)
Ctx = Callable[[Fmt, str, list, Gen], tuple[str, list[str]]]


def c_env(f, sec, fr, g):
    return f"{f.var}={sec}", fr


def c_export(f, sec, fr, g):
    return f"export {f.var}=\"{sec}\"", fr


def c_json(f, sec, fr, g):
    return json.dumps({"service": "billing", f.var.lower(): sec, "region": "eu-west-1"}, indent=2), fr


def c_yaml(f, sec, fr, g):
    return f"deploy:\n  environment: production\n  {f.var.lower()}: {sec}\n  replicas: 3\n", fr


def c_cli(f, sec, fr, g):
    if f.shape == "keyed":
        flag = f.var.lower().replace("_", "-")
        return _pick(g, [f"mytool configure --{flag} {sec} --profile prod",
                         f"aws configure set {f.var.lower()} {sec}",
                         f"kubectl create secret generic app --from-literal={f.var}={sec}"]), fr
    if f.shape == "url":
        return _pick(g, [f"curl -X POST -H 'Content-Type: application/json' -d '{{\"text\":\"hi\"}}' {sec}",
                         f"psql \"{sec}\" -c 'select 1'",
                         f"app migrate --database-url={sec}"]), fr
    return _pick(g, [f"mytool login --token {sec} --org acme",
                     f"docker login -u deploy -p {sec} registry.example.com",
                     f"gh secret set DEPLOY_TOKEN --body {sec}",
                     f"python scripts/deploy.py --env prod {sec}",
                     f"echo {sec} | wrangler secret put API_TOKEN",
                     f"git clone https://x-access-token:{sec}@github.com/acme/app.git"]), fr


def c_curl(f, sec, fr, g):
    return f"curl -sS -H \"{_header(f, sec)}\" https://api.example.com/v1/account", fr


def c_cookie(f, sec, fr, g):
    name = f.var if f.shape == "keyed" else _pick(g, ["token", "auth", "access_token", "sid"])
    return _pick(g, [f"Cookie: _ga=GA1.2.{g.digits(9)}.{g.digits(10)}; {name}={sec}; theme=dark",
                     f"Set-Cookie: {name}={sec}; Path=/; Secure; HttpOnly; SameSite=Lax"]), fr


def c_prose(f, sec, fr, g):
    if f.shape == "keyed":
        return f"The {f.var} for staging is {sec} (rotate it after the demo).", fr
    return _pick(g, [f"I rotated it, the new one is {sec}, can you update the CI settings?",
                     f"Use '{sec}'.",
                     f"ok here: {sec}",
                     f"It failed with the key ({sec}) so I revoked it.",
                     f"Webhook for the alerts channel -> {sec} <- paste that into Grafana"]), fr


def c_markdown(f, sec, fr, g):
    return _pick(g, [f"```bash\nexport {f.var}={sec}\n```",
                     f"| env | value |\n|-----|-------|\n| prod | `{sec}` |",
                     f"Set `{f.var}` to `{sec}` in the settings."]), fr


def c_query(f, sec, fr, g):
    name = f.var.lower() if f.shape == "keyed" else _pick(g, ["token", "api_key", "access_token", "key"])
    return f"GET https://api.example.com/v2/search?q=test&{name}={quote(sec, safe='')}&limit=10", \
        fr + [quote(x, safe="") for x in fr]


def c_wrapped(f, sec, fr, g):
    big = max(fr, key=len)
    at = sec.find(big) + g.rng.randint(2, max(2, len(big) - 2))
    lead = f"{f.var}=" if f.shape == "keyed" else _pick(g, ["token: ", "Authorization: Bearer ", "key "])
    return f"{lead}{sec[:at]}\n{sec[at:]} (expires in 90 days)", fr


def c_urlenc(f, sec, fr, g):
    if g.rng.random() < 0.5:
        body = quote(json.dumps({f.var: sec, "retry": True}), safe="")
        text = f"curl -X POST https://hooks.example.com/ingest -d payload={body}"
    else:
        text = "Location: https://app.example.com/login?next=" + \
            quote(f"https://app.example.com/cb?{f.var.lower()}={sec}&state=ok", safe="")
    return text, fr + [quote(x, safe="") for x in fr] + [quote(quote(x, safe=""), safe="") for x in fr]


def c_b64(f, sec, fr, g):
    content = _env_file(f, sec, g)
    enc = base64.b64encode(content.encode()).decode()
    return f"echo {enc} | base64 -d > .env", fr + _b64_frags(content, fr, enc)


def c_b64_wrapped(f, sec, fr, g):
    content = _env_file(f, sec, g)
    enc = base64.b64encode(content.encode()).decode()
    text = "$ base64 .env\n" + "\n".join(enc[i: i + 76] for i in range(0, len(enc), 76))
    return text, fr + _b64_frags(content, fr, enc)


def c_read(f, sec, fr, g):
    lines = _env_file(f, sec, g).splitlines()
    return "\n".join(f"{i:>6}\u2192{ln}" for i, ln in enumerate(lines, 1)), fr


def c_code(f, sec, fr, g):
    if f.shape == "url":
        return f"engine = create_engine(\"{sec}\", pool_pre_ping=True)", fr
    return _pick(g, [f"client = Client(api_key=\"{sec}\", timeout=30)",
                     f"const token = '{sec}';",
                     "headers = {{\"{}\": \"{}\"}}".format(*_header(f, sec).split(": ", 1))]), fr


def c_log(f, sec, fr, g):
    if f.shape == "url":
        return f"2026-03-01T10:22:01.123Z ERROR connect failed url={sec} attempt=3", fr
    return ("2026-03-01T10:22:01.123Z DEBUG http request headers={'" +
            _header(f, sec).replace(": ", "': '", 1) + "', 'Accept': '*/*'}"), fr


def c_xml(f, sec, fr, g):
    return f"<add key=\"{f.var}\" value=\"{sec}\" />", fr


def c_pem_raw(f, sec, fr, g):
    return f"$ cat ~/.ssh/deploy\n{sec}\n", fr


def c_pem_json(f, sec, fr, g):
    return json.dumps({"type": "service_account", "project_id": "acme-prod",
                       "private_key_id": g.pub(40, "0123456789abcdef"), "private_key": sec + "\n",
                       "client_email": "ci@acme-prod.iam.gserviceaccount.com"}, indent=2), fr


def c_pem_yaml(f, sec, fr, g):
    body = "\n".join("    " + ln for ln in sec.splitlines())
    return f"tls:\n  key: |\n{body}\n  enabled: true\n", fr


def c_pem_env(f, sec, fr, g):
    return f"{f.var}=\"{sec}\"", fr


def c_pem_b64(f, sec, fr, g):
    content = sec + "\n"
    enc = base64.b64encode(content.encode()).decode()
    return f"users:\n- name: admin\n  user:\n    client-key-data: {enc}\n", fr + _b64_frags(content, fr, enc)


def c_pem_urlenc(f, sec, fr, g):
    return f"POST /api/keys body=name=deploy&key={quote(sec, safe='')}", \
        fr + [quote(x, safe="") for x in fr]


def c_pem_code(f, sec, fr, g):
    return f"KEY = \"\"\"{sec}\"\"\"\nsigner = load_pem_private_key(KEY.encode(), None)", fr


CONTEXTS: dict[str, dict[str, Ctx]] = {
    "token": {"env": c_env, "export": c_export, "json": c_json, "yaml": c_yaml, "cli": c_cli,
              "curl": c_curl, "cookie": c_cookie, "prose": c_prose, "markdown": c_markdown,
              "query": c_query, "wrapped": c_wrapped, "urlencoded": c_urlenc, "base64-w0": c_b64,
              "base64-76": c_b64_wrapped, "read": c_read, "code": c_code, "log": c_log, "xml": c_xml},
    "keyed": {"env": c_env, "export": c_export, "json": c_json, "yaml": c_yaml, "cli": c_cli,
              "cookie": c_cookie, "prose": c_prose, "markdown": c_markdown, "query": c_query,
              "wrapped": c_wrapped, "urlencoded": c_urlenc, "base64-w0": c_b64,
              "base64-76": c_b64_wrapped, "read": c_read, "xml": c_xml},
    "url": {"env": c_env, "export": c_export, "json": c_json, "yaml": c_yaml, "cli": c_cli,
            "prose": c_prose, "markdown": c_markdown, "wrapped": c_wrapped, "urlencoded": c_urlenc,
            "base64-w0": c_b64, "base64-76": c_b64_wrapped, "read": c_read, "code": c_code,
            "log": c_log, "xml": c_xml},
    "block": {"raw": c_pem_raw, "json": c_pem_json, "yaml": c_pem_yaml, "env": c_pem_env,
              "markdown": lambda f, s, fr, g: (f"```\n{s}\n```", fr), "base64": c_pem_b64,
              "urlencoded": c_pem_urlenc, "read": c_read, "code": c_pem_code},
}


def _record(text: str, g: Gen) -> str:
    """The text as a transcript line: a tool result, or the command of a Bash tool call."""
    sid, when = g.uuid(), f"2026-03-01T10:{g.rng.randint(10, 59)}:0{g.rng.randint(0, 9)}.000Z"
    if g.rng.random() < 0.5:
        msg = {"role": "user", "content": [{"type": "tool_result", "content": text,
                                            "tool_use_id": f"toolu_01{g.pub(22)}"}]}
        kind = "user"
    else:
        msg = {"role": "assistant", "model": "claude-sonnet-4-5",
               "content": [{"type": "tool_use", "id": f"toolu_01{g.pub(22)}", "name": "Bash",
                            "input": {"command": text, "description": "Run it"}}]}
        kind = "assistant"
    return json.dumps({"parentUuid": g.uuid(), "sessionId": sid, "type": kind, "message": msg,
                       "uuid": g.uuid(), "timestamp": when, "cwd": "/home/dev/src/app"})


def cases(seed: int = SEED) -> list[Case]:
    rng = random.Random(seed)
    g = Gen(rng)
    out = []
    for f in FORMATS:
        for name, ctx in CONTEXTS[f.shape].items():
            parts = f.make(g)
            sec, fr = "".join(parts), _frags(parts)
            text, frags = ctx(f, sec, fr, g)
            frags = tuple(x for x in frags if len(x) >= PIECE)
            out.append(Case(f.name, name, "as written", text, frags))
            out.append(Case(f.name, name, "in a record", _record(text, g), frags))
    return out


def _views(out: str) -> list[str]:
    joined = re.sub(r"\s+", "", out.replace("\\n", "\n"))
    return [out, joined]


def leaked(fragments: tuple[str, ...], out: str) -> bool:
    """True when some 10-character piece of a secret part is left in the output."""
    views = _views(out)
    for fr in fragments:
        for i in range(len(fr) - PIECE + 1):
            piece = fr[i: i + PIECE]
            if any(piece in v for v in views):
                return True
    return False


@dataclass
class Score:
    cases: int = 0
    removed: int = 0
    missed: list[tuple[str, str, str]] = field(default_factory=list)
    artifacts: int = 0
    changed: list[str] = field(default_factory=list)

    @property
    def recall(self) -> float:
        return self.removed / max(self.cases, 1)

    @property
    def false_positive_share(self) -> float:
        return len(self.changed) / max(self.artifacts, 1)


def score(redact: Callable[[str], str], seed: int = SEED) -> Score:
    s = Score()
    for c in cases(seed):
        s.cases += 1
        if leaked(c.fragments, redact(c.text)):
            s.missed.append((c.fmt, c.context, c.where))
        else:
            s.removed += 1
    for name, text in artifacts(seed):
        s.artifacts += 1
        if redact(text) != text:
            s.changed.append(name)
    return s
