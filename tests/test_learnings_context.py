"""The marker rule and the shared SessionStart budget."""

from importlib import resources

import pytest

from claude_autoharness.daemon.learnings import markers as mk
from claude_autoharness.daemon.learnings.context import BUDGET, rule_text, session_start_context
from claude_autoharness.daemon.learnings.report import session_start_report


def long_report():
    many = [mk.Marker(id=f"{i:016x}", topic=f"topic-{i}", kind=k, body="b", transcript=f"/t{i}")
            for i, k in enumerate(mk.KINDS * 3)]
    return "\n".join([session_start_report(many)] + [f"  extra report line {i} " + "r" * 60
                                                     for i in range(20)])


def long_summary():
    return "\n".join(f"📚 skills: landed {i} change(s) to skill-{i} " + "p" * 50 for i in range(40))


def lines_of(*texts):
    return {line for t in texts for line in t.split("\n")}


def test_rule_is_short_and_complete():
    """The rule fits in 600 characters and teaches the format, the six kinds, doc-impact
    (docs-sync), the why, one marker per lesson and no markers for routine work."""
    rule = rule_text()
    assert 0 < len(rule) <= 600
    for word in ("<!-- learning", "topic:", "kind:", "doc-impact:", "body:", "-->", "why",
                 "one marker per lesson", "never routine work", "kebab-case", "Docs-sync",
                 *mk.KINDS, *mk.DOC_IMPACTS):
        assert word in rule, word


def test_rule_does_not_promise_the_marker_is_hidden():
    """The terminal shows markers verbatim: the rule must not tell the model they are hidden,
    and asks for them short."""
    rule = rule_text().lower()
    assert "hidden" not in rule and "invisible" not in rule
    assert "short" in rule


def test_rule_text_is_the_packaged_file():
    """`rule_text()` (what is injected and what `learnings rule` prints) is the package data."""
    shipped = resources.files("claude_autoharness.daemon.learnings").joinpath("rule.md").read_text()
    assert rule_text() == shipped.strip()


def test_rule_quoted_back_is_not_a_marker():
    """An answer that echoes the rule's template yields no marker: its placeholders are noise."""
    assert mk.markers_in_text(rule_text()) == []


def test_everything_fits_when_short():
    """Short parts all go in, in priority order, whatever order they were passed in."""
    out = session_start_context([("rule", rule_text()), ("promoter", "P1\nP2"),
                                 ("report", "R1\nR2")])
    assert out == f"R1\nR2\n\nP1\nP2\n\n{rule_text()}"


def test_budget_holds_with_long_report_and_summary():
    """A long report and a long promoter summary: the total stays within 2,000 characters,
    no line is cut, the report comes first and the rule is what gives way."""
    report, summary = long_report(), long_summary()
    out = session_start_context([("rule", rule_text()), ("report", report),
                                 ("promoter", summary)])
    assert len(out) <= BUDGET == 2_000
    assert out.startswith(report.split("\n")[0])
    assert set(out.split("\n")) - {""} <= lines_of(report, summary)  # whole lines only
    assert rule_text() not in out


def test_report_keeps_its_whole_text_and_summary_is_cut_at_a_line():
    """When the report fits, it is kept whole; the promoter summary is cut at a line boundary."""
    report = long_report()[:600].rsplit("\n", 1)[0]
    summary = long_summary()
    out = session_start_context([("promoter", summary), ("report", report)])
    assert out.startswith(report + "\n\n")
    kept = out[len(report) + 2:]
    assert summary.startswith(kept) and summary[len(kept)] == "\n"
    assert len(out) <= BUDGET


def test_rule_goes_in_whole_or_not_at_all():
    """The rule is never partly injected: with too little room it is left out entirely, with
    enough it is there verbatim."""
    rule = rule_text()
    filler = "\n".join("x" * 99 for _ in range(14))  # 1,399 characters
    assert rule in session_start_context([("report", filler), ("rule", rule)])
    tight = session_start_context([("report", filler + "\n" + "y" * 99), ("rule", rule)])
    assert rule.split("\n")[0] not in tight


@pytest.mark.parametrize("budget", [0, 1, 50, 333, 2_000])
def test_never_cut_mid_line_at_any_budget(budget):
    """Whatever the budget, every line of the output is a whole line of an input part, and an
    over-long single line is dropped rather than cut."""
    parts = [("report", long_report()), ("promoter", "z" * 3_000 + "\nshort line"),
             ("rule", rule_text())]
    out = session_start_context(parts, budget)
    assert len(out) <= budget
    assert set(out.split("\n")) - {""} <= lines_of(*(t for _, t in parts))
    assert "z" * 3_000 not in out


def test_empty_parts_inject_nothing():
    """No report, no summary, no rule → empty context."""
    assert session_start_context([("report", ""), ("promoter", "  \n"), ("rule", "")]) == ""
