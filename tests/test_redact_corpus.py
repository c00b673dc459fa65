"""The redaction rules on a corpus written apart from them (tests/redact_corpus.py): provider
formats in every context a transcript holds them in, and ordinary artifacts that hold none."""

from claude_autoharness.daemon.capture.redact import Redactor
from redact_corpus import CONTEXTS, FORMATS, score


def test_recall_and_false_positives_on_a_corpus_written_apart_from_the_rules():
    """At least 98 % of planted cases lose every piece of their secret (as written and inside
    real records), and at most 1 % of ordinary artifacts change — on a seed of their own."""
    r = Redactor(home="")  # no home: the home as `~` is no false positive
    s = score(lambda t: r.redact(t)[0], seed=11)
    assert len(FORMATS) >= 90 and len(CONTEXTS) >= 14 and s.cases >= 2400
    assert s.recall >= 0.98, s.missed[:20]
    assert s.false_positive_share <= 0.01, s.changed
