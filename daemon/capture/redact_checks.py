"""Validators the redaction rules name (`check = "…"`), and PII placeholders for the promoter.

A validator sees the text a rule would replace (latin-1 decoded bytes) and says whether it
really is what the rule is after: a Luhn-valid card, a plausible SSN, or (for rules that have
no literal prefix to go on) a run that looks generated rather than written — a key, not a
path, a hash or a word.
"""

import base64
import binascii
import re
from collections.abc import Callable


def _digits(s: str) -> str:
    return "".join(c for c in s if c.isdigit())


def luhn_ok(number: str) -> bool:
    """The Luhn checksum of a digit string."""
    total = 0
    for i, c in enumerate(reversed(number)):
        d = ord(c) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card_ok(s: str) -> bool:
    seps = {c for c in s if not c.isdigit()}
    if len(seps) > 1:
        return False
    d = _digits(s)
    n = len(d)
    if not 13 <= n <= 19 or len(set(d)) == 1:
        return False
    two, four = int(d[:2]), int(d[:4])
    issuer = (
        (d[0] == "4" and n in (13, 16, 19))
        or (51 <= two <= 55 and n == 16)
        or (2221 <= four <= 2720 and n == 16)
        or (two in (34, 37) and n == 15)
        or (two in (36, 38, 30) and n == 14)
        or ((d.startswith("6011") or two in (62, 65) or 644 <= int(d[:3]) <= 649) and n >= 16)
        or (3528 <= four <= 3589 and n >= 16)
    )
    return issuer and luhn_ok(d)


def _ssn_ok(s: str) -> bool:
    area, group, serial = s.split("-")
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


def _phone_ok(s: str) -> bool:
    d = _digits(s)
    if len(set(d)) == 1:
        return False
    if s.startswith("+"):
        return 8 <= len(d) <= 15
    return len(d) == 10


# TLDs that are really file extensions (`icon@2x.png`, `pkg@1.0.json`): not addresses.
_FILE_TLDS = frozenset(
    "png jpg jpeg gif svg webp ico bmp js mjs cjs ts tsx jsx py pyc rb json yaml yml toml lock "
    "css scss less html htm txt log tmp bak swp exs heex erl ex map wasm zip gz tgz".split()
)


def _email_ok(s: str) -> bool:
    return s.rsplit(".", 1)[-1].lower() not in _FILE_TLDS




# ---- placeholders (for the promoter: PII that is obviously not anybody's) --------------------

_PLACEHOLDER_EMAIL = re.compile(
    r"(?i)^(?:(?:no-?reply|do-?not-?reply|git|user|username|you|your[._-]?name|name|email|"
    r"someone|somebody|john\.?doe|jane\.?doe|foo|bar|test|example|admin)@"
    r"|.*@(?:[a-z0-9-]+\.)*(?:example\.(?:com|org|net)|example|test|invalid|localhost|local)$"
    r"|.*@users\.noreply\.github\.com$|.*@(?:domain|email|host|company)\.com$)"
)
_PLACEHOLDER_CARDS = frozenset(
    "4111111111111111 4242424242424242 4012888888881881 5555555555554444 5105105105105100 "
    "378282246310005 371449635398431 6011111111111117 4000056655665556 4000000000000002".split()
)


def is_placeholder(kind: str, text: str) -> bool:
    """True when a PII finding is an obvious placeholder (example.com, noreply, 555-01xx, test
    cards…). Secrets are never placeholders."""
    if kind == "email":
        return bool(_PLACEHOLDER_EMAIL.match(text))
    if kind == "phone":
        d = _digits(text)
        return d[-7:-4] == "555" or len(set(d[-7:])) == 1 or d.endswith("1234567")
    if kind == "card":
        return _digits(text) in _PLACEHOLDER_CARDS
    if kind == "ssn":
        return text in ("123-45-6789", "078-05-1120") or text.startswith("000-")
    return False


# ---- generated-looking runs ---------------------------------------------------------------

def _cls(c: str) -> int:
    return 0 if c.isdigit() else 1 if c.isupper() else 2 if c.islower() else 3


def _generated(s: str) -> bool:
    """Upper, lower and digits all present, and the character class changing often (a random
    base64/base62 string changes class at ~60 % of positions; `CamelCase`, words or
    `EXAMPLEKEY` at far fewer). Hex (one case) is not enough: hashes and digests are hex."""
    alnum = s.replace("/", "").replace("+", "")
    classes = [_cls(c) for c in alnum]
    if not {0, 1, 2} <= set(classes):
        return False
    changes = sum(1 for a, b in zip(classes, classes[1:], strict=False) if a != b)
    return changes >= 0.4 * (len(alnum) - 1) and len(set(s)) >= min(20, len(s) // 2)


def looks_random(s: str) -> bool:
    """A run standing alone that was generated, not written. Not a path (a run that starts
    with `/` or has three or more: a random key has one in 64 characters), and not an SSH
    public key blob (`AAAA…`: base64 of a length prefix's zero bytes)."""
    if len(s) < 16 or s.startswith(("/", "AAAA")) or s.count("/") >= 3:
        return False
    return _generated(s)


def _b64decode(s: str) -> bytes:
    s = re.sub(r"[^A-Za-z0-9+/]", "", s)
    s = s[: len(s) // 4 * 4]
    try:
        return base64.b64decode(s[:4096])
    except (binascii.Error, ValueError):
        return b""


def b64_private_key(s: str) -> bool:
    """Base64 of a private key: a PEM block (`LS0tLS1CRUdJTi…` = `-----BEGIN`) whose label
    says PRIVATE, or DER whose first field is a version-0/1 INTEGER (PKCS#1, PKCS#8, SEC1
    keys) rather than a certificate's nested SEQUENCE."""
    raw = _b64decode(s)
    if raw.startswith(b"-----BEGIN"):
        return b"PRIVATE KEY" in raw[:80]
    if len(raw) < 64 or raw[0] != 0x30:
        return False
    i = 2 + (raw[1] & 0x7F if raw[1] & 0x80 else 0)  # past SEQUENCE tag and length
    return raw[i : i + 2] == b"\x02\x01" and raw[i + 2] in (0, 1)


def _public_block(head: bytes) -> bool:
    """Whether decoded base64 starts as something public: an X.509 certificate or a public
    key (DER: SEQUENCE { SEQUENCE { [0] version | OID … } }), or an OpenPGP public key or
    subkey packet (tags 6 and 14, old or new format)."""
    if len(head) < 8:
        return False
    tag = head[0]
    if tag in (0x98, 0x99, 0x9A, 0xB8, 0xB9, 0xBA):  # old format: 1, 2 or 4 length octets
        return head[1 + (1, 2, 4)[tag & 3]] in (3, 4, 5)  # then the key's version
    if tag in (0xC6, 0xCE):  # new format
        n = head[1]
        return head[2 if n < 192 else 3 if n < 224 else 6] in (3, 4, 5)
    if head[0] != 0x30:
        return False
    i = 2 + (head[1] & 0x7F if head[1] & 0x80 else 0)  # past the outer SEQUENCE's header
    if head[i:i + 1] != b"\x30" or i + 1 >= len(head):
        return False
    j = i + 2 + (head[i + 1] & 0x7F if head[i + 1] & 0x80 else 0)  # past the inner one's
    return head[j:j + 2] in (b"\xa0\x03", b"\x06\x09", b"\x06\x07", b"\x06\x03", b"\x06\x08")


def pem_lines(s: str) -> bool:
    """Base64 lines of a key body: the first line is generated-looking (not hex, not words)
    and does not decode to the head of a certificate or a public key."""
    first = re.split(r"[^A-Za-z0-9+/]", s, maxsplit=1)[0]
    return len(first) >= 16 and _generated(first[:64]) and not _public_block(_b64decode(first[:64]))


_PLACEHOLDER_VALUE = re.compile(
    r"(?i)^(?:(?:your|my|the)[-_ ].*|.*(?:x{6,}|\*{4,}|\.\.\.|\xe2\x80\xa6|<[^>]*>|changeme|change[-_]me|"
    r"replace[-_]?me|placeholder|dummy|redacted|not[-_]a[-_]real|fake[-_](?:key|token|secret)|"
    r"abcdefghijklmnopqrstuvwxyz).*"
    r"|(?:pass(?:word)?|secret|token|test|admin|root|pw|pwd|foo|bar|none|null)[0-9]{0,3})$")


def not_placeholder(s: str) -> bool:
    """(`s` is latin-1 decoded UTF-8, as every check's text: `…` reads `\xe2\x80\xa6`.)
    Not a value written to be replaced: `your-token-here`, `sk_test_xxxxxxxx`, `<key>`,
    `changeme`, `password`, `...` (a real secret is none of these)."""
    value = (s.rsplit(":", 1)[-1] if "://" not in s else s).rstrip(",;)")  # `user:pass`: the pass
    return not _PLACEHOLDER_VALUE.match(value) and len(set(value)) > 1


_UUID = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
_KEY_HEX = re.compile(r"[0-9a-f]{32,}|[0-9A-F]{32,}")
_BASE36 = re.compile(r"[a-z0-9]{20,}")


def named_value(s: str) -> bool:
    """A value next to a credential's name (not assigned to it) that is one: generated-looking,
    or hex or lowercase base32/base36 of key length (`DD_API_KEY` 32 hex, an Azure DevOps PAT);
    not a UUID (ids go by such names), a path, an SSH blob or a placeholder."""
    v = s.rstrip("=")
    if len(v) < 16 or _UUID.fullmatch(v) or v.startswith(("/", ".", "~", "AAAA")) \
            or v.count("/") >= 2 or not not_placeholder(v):
        return False
    if looks_random(v) or _KEY_HEX.fullmatch(v):
        return True
    digits = sum(c.isdigit() for c in v)
    return bool(_BASE36.fullmatch(v)) and len(v) <= 10 * digits <= 8 * len(v) \
        and len(set(v)) >= min(16, len(v) // 2)


CHECKS: dict[str, Callable[[str], bool]] = {
    "luhn_card": _card_ok,
    "ssn": _ssn_ok,
    "phone": _phone_ok,
    "email": _email_ok,
    "random": looks_random,
    "b64_private_key": b64_private_key,
    "pem_lines": pem_lines,
    "not_placeholder": not_placeholder,
    "named_value": named_value,
}
