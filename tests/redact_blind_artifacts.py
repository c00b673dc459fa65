"""Ordinary artifacts for the blind redaction set's false positives, written before the rules
were read: lockfiles and go.sum, certificates and public keys (PEM, PGP, SSH, base64 in a
kubeconfig), type annotations, `__all__` lists, ids of many shapes, hashes and digests,
placeholders and references to secrets (not secrets), and this repository's own source
(the redaction modules, which hold the rules' own prefixes, left out).

None of these holds a secret, so redaction should leave each one exactly as it is.
"""

import base64
import json
import random
import string
from pathlib import Path

from redact_blind_formats import B64, B64URL, HEX, LOWD, Gen

REPO = Path(__file__).resolve().parents[1]


def _go_sum(g: Gen) -> str:
    out = []
    for _ in range(8):
        mod = f"github.com/{g.pub(6, string.ascii_lowercase)}/{g.pub(8, string.ascii_lowercase)}"
        ver = f"v{g.rng.randint(0, 3)}.{g.rng.randint(0, 40)}.{g.rng.randint(0, 20)}"
        out.append(f"{mod} {ver} h1:{g.pub(43, B64)}=")
        out.append(f"{mod} {ver}/go.mod h1:{g.pub(43, B64)}=")
    return "\n".join(out) + "\n"


def _package_lock(g: Gen) -> str:
    deps = {}
    for _ in range(5):
        name = g.pub(7, string.ascii_lowercase)
        ver = f"{g.rng.randint(1, 9)}.{g.rng.randint(0, 20)}.{g.rng.randint(0, 9)}"
        deps[f"node_modules/{name}"] = {
            "version": ver, "resolved": f"https://registry.npmjs.org/{name}/-/{name}-{ver}.tgz",
            "integrity": f"sha512-{g.pub(86, B64)}==", "dev": g.rng.random() < 0.5}
    return json.dumps({"name": "web", "lockfileVersion": 3, "packages": deps}, indent=2)


def _yarn_lock(g: Gen) -> str:
    name = g.pub(6, string.ascii_lowercase)
    return (f'"{name}@^2.1.0":\n  version "2.1.4"\n  resolved "https://registry.yarnpkg.com/{name}/-/'
            f'{name}-2.1.4.tgz#{g.pub(40, HEX)}"\n  integrity sha512-{g.pub(86, B64)}==\n')


def _pnpm_lock(g: Gen) -> str:
    return (f"  /{g.pub(6, string.ascii_lowercase)}@1.2.3:\n    resolution: {{integrity: "
            f"sha512-{g.pub(86, B64)}==}}\n    engines: {{node: '>=14'}}\n")


def _cargo_lock(g: Gen) -> str:
    out = []
    for _ in range(4):
        out.append(f'[[package]]\nname = "{g.pub(7, string.ascii_lowercase)}"\n'
                   f'version = "0.{g.rng.randint(1, 30)}.2"\n'
                   f'source = "registry+https://github.com/rust-lang/crates.io-index"\n'
                   f'checksum = "{g.pub(64, HEX)}"\n')
    return "\n".join(out)


def _poetry_lock(g: Gen) -> str:
    n = g.pub(6, string.ascii_lowercase)
    return (f'[[package]]\nname = "{n}"\nversion = "1.4.0"\nfiles = [\n'
            f'    {{file = "{n}-1.4.0-py3-none-any.whl", hash = "sha256:{g.pub(64, HEX)}"}},\n'
            f'    {{file = "{n}-1.4.0.tar.gz", hash = "sha256:{g.pub(64, HEX)}"}},\n]\n')


def _requirements(g: Gen) -> str:
    return (f"{g.pub(6, string.ascii_lowercase)}==2.31.0 \\\n    --hash=sha256:{g.pub(64, HEX)} \\\n"
            f"    --hash=sha256:{g.pub(64, HEX)}\n")


def _pem_public(g: Gen, kind: str, lead: str, lines: int) -> str:
    body = [lead + g.pub(64 - len(lead), B64)] + [g.pub(64, B64) for _ in range(lines - 2)]
    body.append(g.pub(g.rng.randint(10, 60), B64) + "==")
    return f"-----BEGIN {kind}-----\n" + "\n".join(body) + f"\n-----END {kind}-----\n"


def _cert(g: Gen) -> str:
    return _pem_public(g, "CERTIFICATE", "MII", 18)


def _cert_chain_json(g: Gen) -> str:
    return json.dumps({"ca": _cert(g), "cert": _cert(g), "insecure": False})


def _kubeconfig(g: Gen) -> str:
    data = base64.b64encode(_cert(g).encode()).decode()
    return (f"clusters:\n- cluster:\n    certificate-authority-data: {data}\n"
            f"    server: https://10.0.0.{g.rng.randint(2, 250)}:6443\n  name: prod\n")


def _public_key(g: Gen) -> str:
    kind = g.rng.choice(["PUBLIC KEY", "RSA PUBLIC KEY"])
    return _pem_public(g, kind, "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA", 7)


def _pgp_public(g: Gen) -> str:
    body = ["mQINBF" + g.pub(58, B64)] + [g.pub(64, B64) for _ in range(20)]
    return ("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n" + "\n".join(body) +
            f"\n={g.pub(4, B64)}\n-----END PGP PUBLIC KEY BLOCK-----\n")


def _pgp_signature(g: Gen) -> str:
    return ("-----BEGIN PGP SIGNATURE-----\n\niQIzBAABCAAdFiEE" + g.pub(48, B64) + "\n" +
            "\n".join(g.pub(64, B64) for _ in range(8)) +
            f"\n={g.pub(4, B64)}\n-----END PGP SIGNATURE-----\n")


def _ssh_public(g: Gen) -> str:
    host = g.pub(6, string.ascii_lowercase)
    return g.rng.choice([
        f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{g.pub(43, B64)} {host}@laptop",
        f"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQ{g.pub(500, B64)}= {host}@build",
        "github.com ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBB"
        f"{g.pub(88, B64)}=",
        f"|1|{g.pub(27, B64)}=|{g.pub(27, B64)}= ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{g.pub(43, B64)}",
    ])


ANNOTATIONS = [
    "def connect(credentials: AccessTokenProvider | None = None) -> Session:",
    "    api_key: str | None = None\n    secret: SecretStr = Field(default=None)",
    "password_hash: Mapped[str] = mapped_column(String(128), nullable=False)",
    "def refresh(self, token: \"OAuthToken\", *, client_secret: str) -> \"OAuthToken\":",
    "auth_token: Optional[AuthTokenCredential] = None",
    "interface Config { apiKey: string; secretAccessKey?: string; token: TokenProvider }",
    "type Options = { password: string | undefined; sessionToken: SessionToken }",
    "    Token        string `json:\"token\"`\n    ClientSecret string `json:\"client_secret\"`",
    "pub struct Creds { pub api_key: Option<String>, pub secret_key: SecretString }",
    "private readonly tokenService: TokenService, private readonly secretsManager: SecretsManagerClient",
    "def get_secret(secret_id: str, version_stage: str = \"AWSCURRENT\") -> dict[str, Any]:",
    "access_token = credentials.token if credentials.valid else refresh_access_token(credentials)",
    "api_key = os.environ[\"OPENAI_API_KEY\"]",
    "password = getpass.getpass(\"Password: \")",
    "token = request.headers.get(\"Authorization\", \"\").removeprefix(\"Bearer \")",
    "SECRET_KEY = env(\"DJANGO_SECRET_KEY\")",
    "const apiKey = process.env.STRIPE_SECRET_KEY ?? throwMissing(\"STRIPE_SECRET_KEY\");",
    "client_secret=settings.oauth.client_secret,",
]

PLACEHOLDERS = [
    "GITHUB_TOKEN=${{ secrets.GITHUB_TOKEN }}",
    "      AWS_SECRET_ACCESS_KEY: ${{ secrets.AWS_SECRET_ACCESS_KEY }}",
    "OPENAI_API_KEY=your-api-key-here",
    "password: ${DB_PASSWORD}",
    "API_KEY=\"\"",
    "export ANTHROPIC_API_KEY=<your key>",
    "token = \"<TOKEN>\"",
    "DATABASE_URL=postgres://user:password@localhost:5432/dev",
    "DATABASE_URL=postgres://postgres@localhost/test",
    "SECRET_KEY=${SECRET_KEY:?set it in the environment}",
    "Authorization: Bearer $TOKEN",
    "curl -H \"Authorization: token $GITHUB_TOKEN\" https://api.github.com/user",
    "# set STRIPE_SECRET_KEY in .env (see .env.example)",
    "password_reset_token_ttl = 3600",
]


def _ids(g: Gen) -> str:
    kind = g.rng.randrange(12)
    if kind == 0:
        return "\n".join(g.uuid() for _ in range(5))
    if kind == 1:
        return json.dumps({"id": g.pub(21, B64URL), "parent": g.pub(21, B64URL), "rev": g.rng.randint(1, 99)})
    if kind == 2:
        return f"https://www.youtube.com/watch?v={g.pub(11, B64URL)}&list=PL{g.pub(32, B64URL)}"
    if kind == 3:
        return json.dumps({"cursor": g.pub(43, B64URL), "has_more": True})
    if kind == 4:
        return f"msg_01{g.pub(22)} toolu_01{g.pub(22)} req_011C{g.pub(20)}"
    if kind == 5:
        return f"cus_{g.pub(14)} pi_3{g.pub(23)} ch_3{g.pub(23)} evt_1{g.pub(23)}"
    if kind == 6:
        return (f"ObjectId(\"{g.pub(24, HEX)}\") ksuid={g.pub(27)} "
                f"ulid={g.pub(26, '0123456789ABCDEFGHJKMNPQRSTVWXYZ')}")
    if kind == 7:
        return (f"i-0{g.pub(16, HEX)} sg-0{g.pub(16, HEX)} ami-0{g.pub(16, HEX)} "
                f"arn:aws:iam::{g.digits(12)}:role/deploy")
    if kind == 8:
        return f"\"nextPageToken\": \"{g.pub(120, B64URL)}\""
    if kind == 9:
        return f"etag: \"{g.pub(32, HEX)}\"  x-request-id: {g.pub(32, HEX)}  trace={g.pub(16, HEX)}"
    if kind == 10:
        return f"https://drive.google.com/file/d/{g.pub(33, B64URL)}/view?usp=sharing"
    return (f"session {g.uuid()} channel C0{g.pub(8, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789')} "
            f"job {g.pub(32, LOWD)}")


def _hashes(g: Gen) -> str:
    kind = g.rng.randrange(7)
    if kind == 0:
        return "\n".join(f"{g.pub(40, HEX)} {g.rng.choice(['Fix', 'Add', 'Docs:'])} "
                         f"{g.pub(8, string.ascii_lowercase)}" for _ in range(6))
    if kind == 1:
        return (f"FROM python:3.12-slim@sha256:{g.pub(64, HEX)}\n"
                f"COPY --from=build@sha256:{g.pub(64, HEX)} /app /app")
    if kind == 2:
        return f"{g.pub(64, HEX)}  dist/app-1.2.0.tar.gz\n{g.pub(32, HEX)}  dist/app.zip"
    if kind == 3:
        return (f"<script src=\"https://cdn.example.com/lib.js\" integrity=\"sha384-{g.pub(64, B64)}\" "
                "crossorigin=\"anonymous\"></script>")
    if kind == 4:
        return (f"commit {g.pub(40, HEX)}\nMerge: {g.pub(7, HEX)} {g.pub(7, HEX)}\n"
                "Date:   Mon Mar 2 10:00:00 2026\n\n    Merge branch 'main'")
    if kind == 5:
        return f"{{\"image\": \"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA{g.pub(400, B64)}=\"}}"
    return f"sha1-{g.pub(27, B64)}= blake3:{g.pub(64, HEX)} md5={g.pub(32, HEX)}"


def _dunder_all(g: Gen) -> str:
    names = ["SecretStore", "TokenProvider", "get_api_key", "AccessToken", "load_credentials",
             "PasswordHasher", "redact_secrets", "OAuthClientSecret", "API_KEY_HEADER", "refresh_token"]
    g.rng.shuffle(names)
    return "__all__ = [\n" + "".join(f"    \"{n}\",\n" for n in names[:7]) + "]\n"


def _own_source() -> list[tuple[str, str]]:
    out = []
    for d in ("daemon", "client", "protocol"):
        for p in sorted((REPO / d).rglob("*.py")):
            if p.name.startswith("redact"):
                continue
            out.append((f"source:{p.relative_to(REPO)}", p.read_text(encoding="utf-8")))
    return out


GENERATED = {"go.sum": (_go_sum, 30), "package-lock": (_package_lock, 20),
             "yarn.lock": (_yarn_lock, 10), "pnpm-lock": (_pnpm_lock, 10),
             "Cargo.lock": (_cargo_lock, 15), "poetry.lock": (_poetry_lock, 10),
             "requirements": (_requirements, 10), "certificate": (_cert, 20),
             "cert-chain-json": (_cert_chain_json, 5), "kubeconfig-ca": (_kubeconfig, 5),
             "public-key": (_public_key, 10), "pgp-public": (_pgp_public, 10),
             "pgp-signature": (_pgp_signature, 5), "ssh-public": (_ssh_public, 20),
             "ids": (_ids, 60), "hashes": (_hashes, 35), "__all__": (_dunder_all, 10)}


def artifacts(seed: int) -> list[tuple[str, str]]:
    g = Gen(random.Random(seed + 1))
    out = [(f"{name}#{i}", make(g)) for name, (make, n) in GENERATED.items() for i in range(n)]
    out += [(f"annotation#{i}", t) for i, t in enumerate(ANNOTATIONS)]
    out += [(f"placeholder#{i}", t) for i, t in enumerate(PLACEHOLDERS)]
    return out + _own_source()

