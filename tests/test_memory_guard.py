"""The duplicate guard against the user's own memory, measured on hand-written pairs written
apart from it (tests/fixtures/memory_paraphrases.json): the rate of restatements it catches and
the rate of different rules it wrongly catches, both printed, against the word-overlap test it
replaced, on the same pairs."""

import json
from pathlib import Path

from claude_autoharness.daemon.promote import duplicate, restate

PAIRS = json.loads((Path(__file__).parent / "fixtures/memory_paraphrases.json").read_text())[
    "pairs"]


def _rates(fn) -> tuple[float, float]:
    same = [p for p in PAIRS if p["same"]]
    other = [p for p in PAIRS if not p["same"]]
    return (sum(map(fn, same)) / len(same), sum(map(fn, other)) / len(other))


def test_the_guard_catches_restatements_and_spares_different_rules():
    """At least 90 % of the restatements caught (the overlap test caught under half), at most
    5 % of the different rules wrongly caught."""
    caught, wrong = _rates(lambda p: restate.restates(p["rule"], p["description"], p["body"]))
    old_caught, old_wrong = _rates(lambda p: duplicate.near("a-new-skill", p["description"], "",
                                                            p["rule"]) is not None)
    print(f"\nrestate: caught {caught:.0%}, wrongly caught {wrong:.0%}; "
          f"word overlap: caught {old_caught:.0%}, wrongly caught {old_wrong:.0%}")
    assert len(PAIRS) >= 40
    assert caught >= 0.9 and wrong <= 0.05
    assert old_caught < 0.5  # the pairs are paraphrases, not rewordings the old test saw


def test_inflections_are_one_stem():
    assert {restate.stem(w) for w in ("commit", "commits", "committed", "committing")} == {
        "commit"}
    assert restate.stem("dependencies") == restate.stem("dependency")
    assert restate.stem("merging") == restate.stem("merge")
    assert restate.stem("installing") == restate.stem("install")
    assert restate.stem("directly") == restate.stem("direct")
