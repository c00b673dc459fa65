"""Which live skills a prompt calls for, decided from words alone (pure: no model, no files).

A skill's *trigger* is the content words (stopwords dropped, crude stems: the duplicate
guard's word rules, a doubled last consonant undone) of its name and of the first clause of
its description: the part a trigger-first description opens with ("Use when running the
database migrations: ...").
A prompt *matches* a skill when it shares at least `MIN_SHARED` trigger words with it and at
least `SHARE` of a trigger of up to `CAPPED` words (a long trigger needs no more than
`SHARE x CAPPED` of them). Matches are ranked by shared words, then by name; at most
`MAX_SKILLS` are named, within `max_chars` characters in all. A skill already reminded of in
the session is not named again. Same prompt and skills in, same reminder out.
"""

import math
import re
from dataclasses import dataclass

from ..promote.duplicate import content_words

MIN_SHARED = 2
SHARE = 0.4
CAPPED = 6
MAX_SKILLS = 3
TRIGGER_CHARS = 160  # of a description, quoted in the reminder at most
_CLAUSE_END = re.compile(r"(?<=[.;:!?])\s|\n")


@dataclass(frozen=True)
class Trigger:
    key: str  # "<layer>/<name>": what the session remembers it was reminded of
    name: str
    layer: str
    words: frozenset[str]
    when: str  # the description's first clause, as quoted


def words_of(text: str) -> frozenset[str]:
    """Content words, a doubled last consonant undone ("debugging" and "debug" meet)."""
    return frozenset(w[:-1] if len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "aeiouls" else w
                     for w in content_words(text))


def first_clause(description: str) -> str:
    """The description up to its first clause end (".", ";", ":", a line break)."""
    m = _CLAUSE_END.search(description.strip())
    text = description.strip()[: m.start()] if m else description.strip()
    return text.rstrip(".;:!? ")


def trigger(name: str, layer: str, description: str) -> Trigger:
    when = first_clause(description)
    words = words_of(name.replace("-", " ")) | words_of(when)
    return Trigger(key=f"{layer}/{name}", name=name, layer=layer, words=words, when=when)


def needed(t: Trigger) -> int:
    """How many of its words a prompt must share with trigger `t`."""
    return max(MIN_SHARED, math.ceil(SHARE * min(len(t.words), CAPPED)))


def matches(prompt: str, triggers: list[Trigger], done: frozenset[str] = frozenset()) -> list[Trigger]:
    """The triggers `prompt` matches, best first, leaving out those in `done`."""
    words = words_of(prompt)
    scored = []
    for t in triggers:
        if t.key in done or not t.words:
            continue
        shared = len(t.words & words)
        if shared >= needed(t):
            scored.append((-shared, t.name, t.layer, t))
    return [s[-1] for s in sorted(scored)][:MAX_SKILLS]


def reminder(found: list[Trigger], max_chars: int) -> tuple[str, list[Trigger]]:
    """The additionalContext naming the skills `found` (and those that fitted in `max_chars`);
    ("", []) when none fits."""
    head = "autoharness: a skill this project learned applies to this prompt."
    out, used = [head], []
    for t in found:
        when = t.when if len(t.when) <= TRIGGER_CHARS else t.when[: TRIGGER_CHARS - 1] + "\u2026"
        line = (f"- `{t.name}` ({t.layer} skill; {when}): load it with the Skill tool "
                f"(skill: \"{t.name}\") before you start, and follow it.")
        if len("\n".join(out + [line])) > max_chars:
            continue
        out.append(line)
        used.append(t)
    return ("\n".join(out), used) if used else ("", [])
