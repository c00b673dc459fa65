"""Skills for the listing tests: descriptions of a given length no other skill's is near,
and hand-written skills (no autoharness provenance)."""

import hashlib

from promote_support import BODY


def words(name: str, n: int) -> str:
    """`n` characters of a description no other skill's is near (the promoter refuses near
    duplicates), saying when to use it."""
    out = f"Use when {name} is asked for:"
    i = 0
    while len(out) < n:
        out += " " + hashlib.sha256(f"{name}{i}".encode()).hexdigest()[:7]
        i += 1
    return out[:n]


def hand_written(root, name: str, description: str) -> None:
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{BODY}")
