"""Is a new skill a near-duplicate of a live one? The guard the promoter runs before a `create`.

Two skills are *near* when either
- their names are equal after normalising (case folded, everything but letters and digits
  dropped: `run-tests`, `run_tests` and `RunTests` are one name), or
- their descriptions say the same thing: the Jaccard index of their *content-word sets* is at
  least `THRESHOLD`. Content words are the lowercase alphanumeric tokens minus stopwords (the
  words every description shares: "use", "when", "the", ...), each cut to a crude stem
  (`-ing`, `-ed`, `-es`, `-s` dropped) so "commits"/"committing" meet. A description with fewer
  than `MIN_WORDS` content words says too little to be judged by wording.

Jaccard (shared / all distinct) is symmetric and does not call a short description a duplicate
of a long one merely because all its words appear there. 0.5 is tuned on the table of near and
not-near pairs in the tests: rewordings of one lesson score 0.6-1.0, different lessons that
share a topic ("database", "server") score under 0.3.
"""

import re

THRESHOLD = 0.5
MIN_WORDS = 3

TOKEN = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset("""
a an and any are as at be before after by can do does for from has have how i if in into is it
its of on or so than that the their then there these this those to use used uses using via was
we were what when where which while who will with you your always never first skill skills
should must need needs any all each every also only just not no more most other some such
""".split())
_SUFFIXES = ("ing", "ed", "es", "s")


def normalize_name(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> frozenset[str]:
    return frozenset(_stem(w) for w in TOKEN.findall(text.lower()) if w not in STOPWORDS)


def similarity(a: str, b: str) -> float:
    """Jaccard index of the two descriptions' content-word sets (0.0 when either is too short)."""
    wa, wb = content_words(a), content_words(b)
    if len(wa) < MIN_WORDS or len(wb) < MIN_WORDS:
        return 0.0
    return len(wa & wb) / len(wa | wb)


def near(name_a: str, desc_a: str, name_b: str, desc_b: str) -> str | None:
    """Why skill a is near skill b (`name` or `description`), or None when it is not."""
    if normalize_name(name_a) and normalize_name(name_a) == normalize_name(name_b):
        return "name"
    if similarity(desc_a, desc_b) >= THRESHOLD:
        return "description"
    return None
