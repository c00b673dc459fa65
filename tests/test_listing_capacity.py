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


def test_lifecycle_pass_sheds_the_least_used_over_the_listing_share(env):
    """Through the promoter: three graduated learned skills whose lines pass the listing
    share archive the least used for `capacity`; a larger share archives none."""
    from claude_autoharness.daemon.promote.land import Promoter
    from claude_autoharness.protocol.config import LibraryConfig, PromoterConfig
    from listing_support import words
    from promote_support import WINDOW, intent

    turns = {"n": 0}
    root = str(env["proj"])

    def promoter(share):
        return Promoter(PromoterConfig(), library=LibraryConfig(maturity_turns=5),
                        listing=ListingConfig(budget_share=share),
                        turns=lambda layer, r: turns["n"])

    pr = promoter(0.5)
    for name, uses in (("busy-skill", 3), ("quiet-skill", 1), ("mid-skill", 2)):
        assert pr.promote(intent("create", name, description=words(name, 200)), WINDOW,
                          root).status == "landed"
        for _ in range(uses):
            pr.record_use(str(env["skills"] / name))
    turns["n"] = 5
    budget = bundled.fixed_chars() + 1000  # Claude Code's own skills, and room for 500 of ours
    (env["claude"] / "settings.json").write_text(
        json.dumps({"env": {"SLASH_COMMAND_TOOL_CHAR_BUDGET": str(budget)}}))
    room = capacity.room(root, ListingConfig(budget_share=0.5))[0]
    lines = [capacity.skill_chars(str(env["skills"] / n), n, 1536)
             for n in ("busy-skill", "quiet-skill", "mid-skill")]
    assert sum(lines) > room >= sum(lines) - max(lines)  # one archive brings it within
    assert [d.name for d in promoter(1.0).lifecycle_run(root, dry_run=True).planned] == []
    [d] = pr.lifecycle_run(root).done
    assert (d.name, d.reason) == ("quiet-skill", CAPACITY)
