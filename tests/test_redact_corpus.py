"""The redaction rules on a corpus written apart from them (tests/redact_corpus.py): provider
formats in every context a transcript holds them in, and ordinary artifacts that hold none."""

from claude_autoharness.daemon.capture.redact import Redactor
from redact_corpus import CONTEXTS, FORMATS, blind_cases, leaked, score


def test_recall_and_false_positives_on_a_corpus_written_apart_from_the_rules():
    """At least 98 % of planted cases lose every piece of their secret (as written and inside
    real records), and at most 1 % of ordinary artifacts change — on a seed of their own."""
    r = Redactor(home="")  # no home: the home as `~` is no false positive
    s = score(lambda t: r.redact(t)[0], seed=11)
    assert len(FORMATS) >= 90 and len(CONTEXTS) >= 14 and s.cases >= 2400
    assert s.recall >= 0.98, s.missed[:20]
    assert s.false_positive_share <= 0.01, s.changed


def test_recall_on_contexts_written_after_the_rules():
    """Ten contexts written after the rules (a markdown table, an XML attribute, the end of a
    sentence, a shell continuation inside the token, a heredoc, a TOML string, URL-encoded twice,
    base64 of JSON…) for every prefixed format: at least 98 % lose every piece of their secret.
    (Measured once blind at 85.3 %: shell continuations and double URL-encoding were then added.)"""
    r = Redactor(home="")
    cases = list(blind_cases())
    kept = [c for c in cases if not leaked(c.fragments, r.redact(c.text)[0])]
    assert len(cases) >= 800 and len(kept) >= 0.98 * len(cases)
