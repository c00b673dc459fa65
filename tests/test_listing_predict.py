"""The listing prediction's arithmetic (daemon/listing/predict.py), on plain values: the
budget, the description cut, the usage ranking and who is listed by name only."""

from claude_autoharness.daemon.listing.predict import (
    ELLIPSIS,
    Entry,
    budget,
    cut,
    predict,
    usage_score,
)
from claude_autoharness.daemon.listing.width import width


def e(name, n, **kw):
    return Entry(name, "d" * n, **kw)


def full(listing):
    return [ln.entry.name for ln in listing.lines if ln.full]


def test_budget_from_context_fraction_and_variable():
    """8,000 at 200k tokens; the fraction scales it; the variable replaces it unless it is 0
    or not a number."""
    assert budget(env_budget=None, context_tokens=200_000, fraction=None) == 8000
    assert budget(env_budget=None, context_tokens=1_000_000, fraction=None) == 40000
    assert budget(env_budget=None, context_tokens=200_000, fraction=0.02) == 16000
    assert budget(env_budget="12000", context_tokens=200_000, fraction=0.02) == 12000
    assert budget(env_budget="0", context_tokens=200_000, fraction=None) == 8000
    assert budget(env_budget="lots", context_tokens=200_000, fraction=None) == 8000


def test_cut_keeps_max_chars_with_an_ellipsis():
    assert cut("a" * 10, 10) == "a" * 10
    assert cut("a" * 11, 10) == "a" * 9 + ELLIPSIS


def test_under_budget_all_full():
    """Lines plus breaks within the budget: everything whole."""
    entries = [e("a", 10), e("b", 10)]
    total = width("- a: " + "d" * 10) * 2 + 1
    lst = predict(entries, budget_chars=total)
    assert lst.total <= lst.budget and full(lst) == ["a", "b"] and lst.shown == total


def test_over_budget_ranks_by_score_then_order_and_skips_what_does_not_fit():
    """Over budget: the fixed entry stays whole, the highest score gets its description first,
    ties keep the listing's order, and an entry too long for what is left is skipped while a
    later shorter one still fits."""
    entries = [e("big", 300), e("small1", 10), e("small2", 10), e("used", 50),
               e("bundled", 100, fixed=True)]
    names = sum(width(f"- {x.name}") for x in entries[:4]) + width("- bundled: " + "d" * 100)
    room = 55 + 2 + 12 + 2  # "used" (50 + ": "), then one of the small ones (10 + ": ")
    lst = predict(entries, budget_chars=names + 4 + room, scores={"used": 1.0})
    assert lst.total > lst.budget
    assert full(lst) == ["small1", "used", "bundled"]
    assert [ln.entry.name for ln in lst.name_only()] == ["big", "small2"]


def test_name_only_override_holds_under_budget_too():
    lst = predict([e("a", 10, name_only=True), e("b", 10)], budget_chars=10_000)
    assert full(lst) == ["b"] and lst.lines[0].desc_chars == 0


def test_usage_score_decays_by_half_a_week_to_a_floor():
    day = 86_400_000
    assert usage_score(4, 0, 0) == 4
    assert abs(usage_score(4, 0, 7 * day) - 2) < 1e-9
    assert abs(usage_score(4, 0, 365 * day) - 0.4) < 1e-9
    assert usage_score(4, 1e300, 0) == float("inf")  # a clock far off: no crash


def test_width_counts_terminal_columns():
    assert width("abc") == 3 and width("a\nb") == 2 and width("日本") == 4 and width("é") == 1
