"""Does a new skill say again a rule the user already keeps (a lesson of `CLAUDE.md` or the auto
memory, `promote.memory`)? The duplicate guard asks before a `create` lands.

A paraphrase shares few words with its rule ("about to commit Python code: lint it with make
lint beforehand" for "Always run `make lint` before committing": word overlap 0.38), and a
rule can be restated in a skill's body under another description. So the test is one of
*containment*, piece by piece, not overlap of the whole:
- both sides are cut to content words (lowercase alphanumeric tokens minus the stopwords of
  `duplicate`), each reduced to a stem that makes inflections one word (`commit`, `commits`,
  `committed`, `committing`; `dependency`, `dependencies`; `merge`, `merging`);
- the skill is split into pieces: its description, and each sentence or list item of its
  body;
- the rule is said again when one piece shares at least `MIN_SHARED` stems with it and those
  are at least `CONTAINED` of the smaller of the two (the rule, or the piece).

Measured on hand-written pairs (tests/fixtures/memory_paraphrases.json, written apart from
this test): `bench/memory_guard.py` prints how many restatements it catches and how many
different rules it wrongly catches, against the word-overlap test it replaces.
"""

import re

from .duplicate import STOPWORDS, TOKEN

MIN_SHARED = 3
CONTAINED = 0.6

_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
_KEEP_DOUBLE = frozenset("lsz")


def stem(word: str) -> str:
    """A light suffix-stripping stem: plural, verb and `-ly` endings dropped, a doubled final
    consonant undone (`committ` -> `commit`), a final `e` dropped."""
    w = word
    if len(w) > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif len(w) > 4 and w.endswith("sses"):
        w = w[:-2]
    elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix in ("ing", "ed"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiou" + "".join(_KEEP_DOUBLE):
                w = w[:-1]
            break
    if len(w) > 5 and w.endswith("ly"):
        w = w[:-2]
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    return w


def content_stems(text: str) -> frozenset[str]:
    return frozenset(stem(w) for w in TOKEN.findall(text.lower()) if w not in STOPWORDS)


def pieces(description: str, body: str) -> list[str]:
    """The description, then the body's sentences and list items."""
    return [description, *(p for p in _SENTENCE.split(body or "") if p.strip())]


def restates(rule: str, description: str, body: str = "") -> bool:
    """Whether a skill (its description and body) says the rule again."""
    r = content_stems(rule)
    if len(r) < MIN_SHARED:
        return False
    for piece in pieces(description, body):
        p = content_stems(piece)
        shared = len(r & p)
        if shared >= MIN_SHARED and shared >= CONTAINED * min(len(r), len(p)):
            return True
    return False
