"""Learned descriptions stay within the listing: the promoter refuses a long one or one that
does not open with when to use the skill, saying why; the limit is a setting; the curator is
asked to shorten a live one that is too long."""

from claude_autoharness.daemon.handlers.library import too_long
from claude_autoharness.daemon.promote.land import Promoter
from claude_autoharness.daemon.reflect.curate import CuratedSkill, build_curate_request, wants_model
from claude_autoharness.protocol.config import PromoterConfig
from promote_support import BODY, assert_rejected_without_writes, intent, land

LONG = ("Use when the deploy fails: " + "check the release notes and the logs of each step " * 6).strip()


def test_long_description_is_refused_with_the_reason(env):
    out = assert_rejected_without_writes(env, intent("create", "deploy-help", description=LONG),
                                         "description")
    [why] = [f.message for f in out.findings if f.code == "description"]
    assert f"is {len(LONG)} characters, over the 250" in why
    assert "promoter.max_description_chars" in why and "by name only" in why


def test_description_must_open_with_its_trigger(env):
    late = "Run the migrations on a copy. Use when the schema changes."
    out = assert_rejected_without_writes(env, intent("create", "migrate-copy", description=late),
                                         "description")
    assert any("open with when to use the skill" in f.message for f in out.findings)
    land(env, intent("create", "migrate-copy", description="Use when the schema changes: "
                                                         "run the migrations on a copy."))


def test_the_limit_is_a_setting(env):
    env["pr"] = Promoter(PromoterConfig(max_description_chars=1000))
    env["pr"].recover()
    land(env, intent("create", "deploy-help", description=LONG))


def test_curator_is_asked_to_shorten_a_long_description():
    """A live learned skill over the limit is marked to be shortened, and that alone is worth
    a curator call; one within it is not marked."""
    text = f"---\nname: deploy-help\ndescription: {LONG}\n---\n{BODY}"
    n = too_long(text, PromoterConfig())
    assert n == len(LONG)
    assert too_long("---\nname: a\ndescription: Use when x happens.\n---\nb\n", PromoterConfig()) == 0
    s = CuratedSkill(name="deploy-help", text=text, uses=0, turns=3, long_description=n)
    assert wants_model([s]) and not wants_model([CuratedSkill("a", "t", 0, 0)])
    prompt, _, _ = build_curate_request([s], layer="project", max_intents=3, max_bytes=10**6,
                                        redact=lambda t: t)
    assert f'description_chars="{n}" shorten="yes"' in prompt.user_text
    assert "Shorten long descriptions" in prompt.system_blocks[0]
