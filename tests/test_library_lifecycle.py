"""The skill library's lifecycle: the pure decision function, the duplicate measure, the
`[library]` config, and the promoter applying decisions (archive with reason, restore on a
fresh probation, the duplicate guard before a create)."""

import json
import random

import pytest

from claude_autoharness.daemon.capture.redact import default_redactor
from claude_autoharness.daemon.promote import duplicate
from claude_autoharness.daemon.promote.land import Promoter
from claude_autoharness.daemon.promote.lifecycle import SkillCounts, decide, stage
from claude_autoharness.daemon.reflect.curate import CuratedSkill, build_curate_request
from claude_autoharness.protocol.config import ConfigError, LibraryConfig, PromoterConfig, load
from promote_support import WINDOW, hand_written, intent


def sk(name, uses, turns, *, layer="project", scope="/p", owned=True) -> SkillCounts:
    return SkillCounts(name=name, layer=layer, scope=None if layer == "user" else scope,
                       owned=owned, uses=uses, turns=turns)


def decided(skills, maturity=10, cap_p=20, cap_u=10):
    return [(d.name, d.reason) for d in decide(skills, maturity_turns=maturity,
                                               capacity_project=cap_p, capacity_user=cap_u)]


# -- the pure decision function -------------------------------------------------------------

def test_probation_protects_young_skills_even_unused():
    """A skill with fewer turns than maturity_turns is on probation: never archived, even with
    0 uses; at exactly maturity_turns it is judged."""
    assert stage(sk("young", 0, 9), 10) == "probation"
    assert decided([sk("young", 0, 9)]) == []
    assert decided([sk("young", 0, 10)]) == [("young", "dormant")]


def test_graduation_review_archives_only_the_unused():
    """After probation a skill with no use is dormant; one use is enough to graduate."""
    assert stage(sk("used", 1, 50), 10) == "graduated"
    assert decided([sk("used", 1, 50), sk("idle", 0, 50)]) == [("idle", "dormant")]


def test_capacity_archives_lowest_rate_and_breaks_ties_by_name():
    """Over capacity the lowest uses/turns goes first; equal rates (1/50 == 2/100) fall in name
    order; input order does not matter."""
    skills = [sk("a-high", 5, 100), sk("c-tie", 2, 100), sk("b-tie", 1, 50), sk("d-mid", 3, 100)]
    for _ in range(5):
        random.shuffle(skills)
        assert decided(skills, cap_p=3) == [("b-tie", "capacity")]
        assert decided(skills, cap_p=2) == [("b-tie", "capacity"), ("c-tie", "capacity")]
        assert decided(skills, cap_p=4) == []


def test_probation_skills_do_not_count_towards_capacity():
    """Capacity counts graduated skills only: two young skills beside one graduated one at
    capacity 1 archive nothing."""
    skills = [sk("old", 1, 100), sk("new-1", 0, 3), sk("new-2", 0, 3)]
    assert decided(skills, cap_p=1) == []


def test_hand_written_skills_are_never_touched_nor_counted():
    """A hand-written skill is neither dormant however unused, nor counted towards capacity."""
    skills = [sk("mine", 0, 1000, owned=False), sk("mine-2", 9, 10, owned=False),
              sk("ours", 1, 100)]
    assert stage(skills[0], 10) == "hand-written"
    assert decided(skills, cap_p=1) == []


def test_capacity_is_per_layer_and_per_project():
    """The user layer has its own capacity; each project is its own scope."""
    skills = [sk("u1", 1, 10, layer="user"), sk("u2", 2, 10, layer="user"),
              sk("p1", 1, 10, scope="/a"), sk("p2", 2, 10, scope="/a"),
              sk("q1", 1, 10, scope="/b")]
    assert decided(skills, cap_p=1, cap_u=2) == [("p1", "capacity")]
    assert decided(skills, cap_p=2, cap_u=1) == [("u1", "capacity")]


def test_dormant_skills_leave_before_capacity_is_counted():
    """A dormant skill is archived as dormant and not also counted against capacity."""
    skills = [sk("idle", 0, 20), sk("a", 1, 20), sk("b", 2, 20)]
    assert decided(skills, cap_p=2) == [("idle", "dormant")]


# -- the duplicate measure ------------------------------------------------------------------

NEAR = [
    ("Use when the dev server does not start: check the project structure, then run it and "
     "read the first error.",
     "Use when the dev server fails to start: check project structure first, then run it and "
     "read the first error."),
    ("Run make check before committing any change in this repository.",
     "Before committing changes in this repository, always run make check."),
    ("Use when writing database migrations: run the schema diff first.",
     "Use when writing a database migration; run schema diff first."),
    ("Use when a test is flaky: rerun it alone with the seed printed, then fix the shared "
     "fixture.",
     "When a flaky test fails, rerun it alone with its seed printed and fix the shared fixture."),
    ("Use when releasing: bump the version in pyproject, tag it, and push the tag.",
     "Use when cutting a release: bump pyproject version, tag, push the tag."),
]
NOT_NEAR = [
    ("Use when the dev server does not start: read the first error.",
     "Use when deploying to production: run the release checklist."),
    ("Run make check before committing.",
     "Run make docs before publishing the documentation."),
    ("Use when writing database migrations: run the schema diff first.",
     "Use when writing unit tests for the database layer: use the fixture factory."),
    ("Use when the dev server does not start: check the project structure, then run it.",
     "Use when the dev server is slow: profile the request handlers and check the database "
     "queries."),
    ("Use when a test is flaky: rerun it alone with the seed printed.",
     "Use when a test needs network access: mark it and run it in the integration job."),
    ("Use when stuck.", "Use when stuck again."),  # too few words to judge by wording
]


@pytest.mark.parametrize("a,b", NEAR)
def test_rewordings_of_one_lesson_are_near(a, b):
    """Descriptions that say the same thing reach the threshold, either way round."""
    assert duplicate.similarity(a, b) >= duplicate.THRESHOLD
    assert duplicate.near("one-skill", a, "other-skill", b) == "description"
    assert duplicate.near("other-skill", b, "one-skill", a) == "description"


@pytest.mark.parametrize("a,b", NOT_NEAR)
def test_different_lessons_on_one_topic_are_not_near(a, b):
    """Descriptions that share a topic but teach different things stay under the threshold."""
    assert duplicate.similarity(a, b) < duplicate.THRESHOLD
    assert duplicate.near("one-skill", a, "other-skill", b) is None


@pytest.mark.parametrize("a,b,near", [
    ("run-tests", "run_tests", True), ("run-tests", "RunTests", True),
    ("run-tests", "run-test", False), ("deploy", "deploy-docs", False),
])
def test_names_are_compared_after_normalising(a, b, near):
    """Case and separators do not make a different name; different letters do."""
    assert (duplicate.near(a, "alpha beta gamma", b, "delta epsilon zeta") == "name") is near


# -- config ---------------------------------------------------------------------------------

def test_library_config_defaults_and_env_overrides(tmp_path):
    """[library] defaults to 50/20/10/25; each key has an AUTOHARNESS_LIBRARY_* override that
    beats the file; curate_every may be 0 (off) but not negative; the others must be > 0."""
    cfg = load(str(tmp_path / "none.toml"), env={})
    assert cfg.library == LibraryConfig(maturity_turns=50, capacity_project=20,
                                        capacity_user=10, curate_every=25)
    f = tmp_path / "c.toml"
    f.write_text("[library]\nmaturity_turns = 7\ncapacity_user = 3\n")
    cfg = load(str(f), env={"AUTOHARNESS_LIBRARY_CAPACITY_USER": "4",
                            "AUTOHARNESS_LIBRARY_CAPACITY_PROJECT": "5",
                            "AUTOHARNESS_LIBRARY_CURATE_EVERY": "0"})
    assert (cfg.library.maturity_turns, cfg.library.capacity_user,
            cfg.library.capacity_project, cfg.library.curate_every) == (7, 4, 5, 0)
    with pytest.raises(ConfigError, match="library.curate_every"):
        load(str(f), env={"AUTOHARNESS_LIBRARY_CURATE_EVERY": "-1"})
    with pytest.raises(ConfigError, match="library.maturity_turns"):
        load(str(f), env={"AUTOHARNESS_LIBRARY_MATURITY_TURNS": "0"})


# -- the promoter applies them --------------------------------------------------------------

class Clock:
    """Turn counts per layer, as the daemon would hand them to the promoter."""

    def __init__(self):
        self.user = 0
        self.projects: dict[str, int] = {}

    def __call__(self, layer, root):
        return self.user if layer == "user" else self.projects.get(root, 0)


@pytest.fixture
def lib(env):
    turns = Clock()
    pr = Promoter(PromoterConfig(), library=LibraryConfig(maturity_turns=5, capacity_project=1),
                  turns=turns)
    env.update(pr=pr, turns=turns, root=str(env["proj"]))
    return env


def listed(env, name):
    return [s for s in env["pr"].list_skills(env["root"]) if s.name == name]


def test_restore_starts_a_fresh_probation(lib):
    """A skill created at turn 2 is on probation until turn 7, then archived `dormant` with its
    counts in history and the listing; `restore` brings it back at turns 0, uses 0, probation."""
    pr, t, root = lib["pr"], lib["turns"], lib["root"]
    t.projects[root] = 2
    assert pr.promote(intent("create", "idle-skill"), WINDOW, root).status == "landed"
    [info] = listed(lib, "idle-skill")
    assert (info.stage, info.turns, info.uses) == ("probation", 0, 0)
    t.projects[root] = 6
    assert pr.lifecycle_run(root).done == []
    assert listed(lib, "idle-skill")[0].turns == 4
    t.projects[root] = 7
    [d] = pr.lifecycle_run(root).done
    assert (d.name, d.reason, d.uses, d.turns) == ("idle-skill", "dormant", 0, 5)
    [arch] = listed(lib, "idle-skill")
    assert (arch.status, arch.stage, arch.reason, arch.turns) == ("archived", "archived",
                                                                  "dormant", 5)
    hist = pr.history("idle-skill", project_root=root)
    assert hist[-1]["action"] == "archive" and hist[-1]["retired"] == "dormant"
    assert hist[-1]["source"] == "lifecycle" and hist[-1]["reason"].startswith("dormant:")

    t.projects[root] = 30
    assert pr.restore("idle-skill", project_root=root).status == "landed"
    [back] = listed(lib, "idle-skill")
    assert (back.status, back.stage, back.turns, back.uses) == ("live", "probation", 0, 0)
    pr.record_use(back.path)
    t.projects[root] = 34
    assert pr.lifecycle_run(root).done == []  # still on probation: 4 turns since the restore
    assert listed(lib, "idle-skill")[0].uses == 1


def test_capacity_pass_archives_lowest_rate_and_spares_hand_written(lib):
    """Two graduated skills at project capacity 1: the less used one is archived `capacity`;
    a hand-written skill with no uses stays; the user layer is judged on its own clock."""
    pr, t, root = lib["pr"], lib["turns"], lib["root"]
    for name in ("busy-skill", "quiet-skill"):
        assert pr.promote(intent("create", name), WINDOW, root).status == "landed"
    hand_written(lib, "by-hand")
    for _ in range(3):
        pr.record_use(str(lib["skills"] / "busy-skill"))
    pr.record_use(str(lib["skills"] / "quiet-skill" / "SKILL.md"))
    t.projects[root] = 5
    [d] = pr.lifecycle_run(root).done
    assert (d.name, d.reason, d.uses, d.turns) == ("quiet-skill", "capacity", 1, 5)
    names = {s.name: s for s in pr.list_skills(root)}
    assert names["busy-skill"].stage == "graduated" and names["busy-skill"].status == "live"
    assert names["by-hand"].stage == "hand-written" and names["by-hand"].status == "live"
    assert names["quiet-skill"].reason == "capacity"
    assert [m["name"] for m in pr.archived_since(root, 0)] == ["quiet-skill"]


def test_unstamped_skill_starts_probation_at_first_pass(lib):
    """A skill landed before turns were counted (no stamp) starts its probation when first
    judged, keeping its uses, instead of being judged on the layer's whole history."""
    pr, t, root = lib["pr"], lib["turns"], lib["root"]
    assert pr.promote(intent("create", "older"), WINDOW, root).status == "landed"
    stamps = lib["pr"].statedir.p("lifecycle.json")
    with open(stamps, "w") as f:
        json.dump({}, f)
    t.projects[root] = 100
    assert pr.lifecycle_run(root).done == []
    assert listed(lib, "older")[0].turns == 0
    t.projects[root] = 105
    assert [d.reason for d in pr.lifecycle_run(root).done] == ["dormant"]


def test_duplicate_guard_rejects_a_near_create_naming_the_near_skill(lib):
    """A create whose name normalises to a live skill's, or whose description says what a live
    skill's says, is rejected `duplicate` naming that skill; a distinct one lands; the user
    layer is a different layer."""
    pr, root = lib["pr"], lib["root"]
    assert pr.promote(intent("create", "run-checks"), WINDOW, root).status == "landed"
    out = pr.promote(intent("create", "runchecks"), WINDOW, root)
    assert out.status == "rejected" and [f.code for f in out.findings] == ["duplicate"]
    assert "run-checks" in out.findings[0].message
    reworded = "Use when you are about to push: run the checks of the project first."
    out = pr.promote(intent("create", "pre-push", description=reworded), WINDOW, root)
    assert [f.code for f in out.findings] == ["duplicate"]
    assert "run-checks" in out.findings[0].message and "patch or update" in out.findings[0].message
    other = "Use when a migration fails: roll back, then rerun it with verbose logging."
    assert pr.promote(intent("create", "migration-fix", description=other), WINDOW,
                      root).status == "landed"
    assert pr.promote(intent("create", "pre-push", layer="user", description=reworded),
                      WINDOW, None).status == "landed"
    assert not (lib["skills"] / "runchecks").exists()


# -- the curator's request ------------------------------------------------------------------

def test_curator_request_is_redacted_capped_and_its_window_is_the_skills_only():
    """Skills go in name order, each redacted, until the byte cap; the rest are left out and
    the request says how many; the evidence window is the sent skill texts and nothing else
    (no tags, no counts), so a quote must come from a skill."""
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    skills = [CuratedSkill(name="b-skill", text=f"B body, token {token}\n", uses=2, turns=9),
              CuratedSkill(name="a-skill", text="A body.\n", uses=0, turns=3),
              CuratedSkill(name="c-skill", text="C" * 500, uses=1, turns=1)]
    redactor = default_redactor()
    prompt, window, left_out = build_curate_request(
        skills, layer="project", max_intents=10, max_bytes=200,
        redact=lambda t: redactor.redact(t)[0])
    assert left_out == 1 and "1 more did not fit" in prompt.user_text
    assert token not in prompt.user_text and "[REDACTED" in prompt.user_text
    assert prompt.user_text.index("a-skill") < prompt.user_text.index("b-skill")
    assert 'uses="2" turns="9"' in prompt.user_text and "C" * 500 not in prompt.user_text
    assert window.startswith("A body.") and "B body" in window and "uses=" not in window
    assert "curator" in prompt.system_text.lower() and prompt.schema["required"] == ["proposals", "feedback"]


def test_review_mode_returns_a_harmful_archive_to_hold_instead_of_landing_it(lib):
    """In review mode the pass lands no harmful archive: it hands it back in `held`, with the
    skill's dir and its grounded harmful quotes, for the caller to hold for the user (the
    promoter calls nothing above it); `note_held` then records the decision in history."""
    pr = Promoter(PromoterConfig(mode="review"), turns=lib["turns"])
    root = lib["root"]
    assert lib["pr"].promote(intent("create", "bad-advice"), WINDOW, root).status == "landed"
    target = str(lib["skills"] / "bad-advice")
    for n in (1, 2):
        pr.statedir.append_history({
            "landing": f"fb-{n}", "action": "feedback", "version": 1, "files": {}, "at": 1.0,
            "target": target, "layer": "project", "name": "bad-advice", "source": "reflector",
            "verdict": "harmful", "quote": f"that advice broke the build ({n})"})
    run = pr.lifecycle_run(root)
    assert run.done == [] and [s.status for s in listed(lib, "bad-advice")] == ["live"]
    [held] = run.held
    assert (held.decision.name, held.decision.reason, held.path) == ("bad-advice", "harmful",
                                                                     target)
    assert held.quotes == ["that advice broke the build (1)", "that advice broke the build (2)"]
    pr.note_held(held)
    [mark] = [e for e in pr.history_at(target) if e["action"] == "held"]
    assert mark["reason"] == "harmful: 2 harmful and 0 helped verdicts; held for review"
