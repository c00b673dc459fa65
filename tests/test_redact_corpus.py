"""The redaction rules on corpora written apart from them (tests/redact_corpus.py, and
tests/redact_blind_set.py, written before the rules were read): provider formats in every
context a transcript holds them in, and ordinary artifacts that hold none."""

from claude_autoharness.daemon.capture.redact import Redactor, find_secrets
from redact_blind_set import FORMATS as BLIND_FORMATS
from redact_blind_set import artifacts as blind_artifacts
from redact_blind_set import cases as blind_cases_of
from redact_blind_set import score as blind_score
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


def test_recall_and_false_positives_on_the_blind_set():
    """The set written before the rules were read (tests/redact_blind_set.py: over 120 provider
    formats in up to 18 contexts, as written and inside records; lockfiles, certificates, public
    keys, annotations, ids, this repository's source): at least 98 % of cases lose every piece
    of their secret and at most 1 % of artifacts change — on a seed other than the one the
    rules were improved against."""
    r = Redactor(home="")
    s = blind_score(lambda t: r.redact(t)[0], seed=7)
    assert len(BLIND_FORMATS) >= 120 and s.cases >= 4000 and s.artifacts >= 500
    assert s.recall >= 0.98, s.missed[:20]
    assert s.false_positive_share <= 0.01, s.changed


def test_what_is_written_is_refused_on_the_blind_set():
    """The test everything durable passes (`find_secrets`: skills, provenance, evidence, the wiki,
    the journal) refuses at least 98 % of the blind set's cases and at most 1 % of its
    ordinary artifacts."""
    cases = blind_cases_of(seed=7)
    refused = sum(1 for c in cases if find_secrets(c.text))
    arts = blind_artifacts(7)
    assert refused >= 0.98 * len(cases)
    assert sum(1 for _n, t in arts if find_secrets(t)) <= 0.01 * len(arts)
