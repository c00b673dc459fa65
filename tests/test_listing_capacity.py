"""A layer's capacity in listing characters: the lifecycle archives graduated learned skills,
lowest usage rate first, until a scope's learned skills fit its share of Claude Code's skill
listing; the share is a setting and the user layer is counted first."""

import json

from claude_autoharness.daemon.listing import bundled, capacity
from claude_autoharness.daemon.promote.lifecycle import CAPACITY, SkillCounts, decide
from claude_autoharness.protocol.config import ListingConfig

KW = dict(maturity_turns=10, capacity_project=100, capacity_user=100)


def skill(name, uses, chars, turns=20, layer="project", scope="/p"):
    return SkillCounts(name=name, layer=layer, scope=scope, owned=True, uses=uses, turns=turns,
                       chars=chars)


def test_over_the_character_cap_the_least_used_go_first():
    skills = [skill("a", 10, 300), skill("b", 1, 300), skill("c", 5, 300),
              skill("young", 0, 300, turns=2)]  # on probation: counted, never archived for it
    out = decide(skills, chars_caps={("project", "/p"): 700}, **KW)
    assert [(d.name, d.reason) for d in out] == [("b", CAPACITY), ("c", CAPACITY)]
    assert decide(skills, chars_caps={("project", "/p"): 1200}, **KW) == []
    assert decide(skills, **KW) == []  # no cap: counted in skills only


def test_caps_share_what_the_budget_leaves_user_layer_first(home, short_tmp):
    """At 200k tokens the budget is 8,000; Claude Code's own skills take their measured share;
    the user layer gets `budget_share` of the rest and a project what the user layer leaves.
    Claude Code's settings move the budget."""
    cfg = ListingConfig(budget_share=0.5)
    room = int(0.5 * (8000 - bundled.fixed_chars()))
    got = capacity.caps(str(short_tmp), cfg, {("user", "u"): 100, ("project", "p"): 50})
    assert got == {("user", None): room, ("project", str(short_tmp)): room - 100}
    (home["claude"] / "settings.json").write_text(json.dumps({"skillListingBudgetFraction": 0.02}))
    assert capacity.room(None, cfg) == (int(0.5 * (16000 - bundled.fixed_chars())), 16000)
