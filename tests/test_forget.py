"""`skills forget NAME`: an autoharness skill leaves the live library at any version (a fresh
v1 too, which `revert` cannot undo), restorably, and the lesson is not learned again while it
stays forgotten: the promoter refuses a create near it (same name, or a description saying the
same thing) until `skills restore` brings it back. Real promoter; the verb through the real
daemon and CLI."""

import json
import os

from claude_autoharness.daemon.persist.dirs import ensure_private_dir
from claude_autoharness.daemon.promote.land import Promoter
from claude_autoharness.protocol import paths
from claude_autoharness.protocol.config import PromoterConfig
from harness import Daemon, ctl, event, hook, wait_for
from promote_support import WINDOW, intent, seed

DESC = "Use when the integration tests fail on a fresh checkout: migrate the schema first."
BODY = "Run `make migrate` before `make integration-test`.\n"


def _codes(out) -> list[str]:
    return [f.code for f in out.findings]


def test_forget_takes_a_fresh_skill_out_and_restore_brings_it_back(home):
    project = home["tmp"] / "proj"
    project.mkdir()
    path = seed(project, "migrate-first", DESC, BODY)
    skill_dir = os.path.dirname(path)
    d = Daemon(home["home"])
    try:
        r = ctl("skills", "revert", "migrate-first", "--project", str(project))
        assert r.returncode == 1 and "no_version" in r.stdout  # revert cannot drop a v1
        r = ctl("skills", "forget", "migrate-first", "--project", str(project))
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.startswith("forgot migrate-first:")
        assert "skills restore migrate-first" in r.stdout
        assert not os.path.exists(skill_dir)
        listed = json.loads(ctl("skills", "list", "--project", str(project), "--json").stdout)
        [row] = [s for s in listed if s["name"] == "migrate-first"]
        assert row["status"] == "archived" and row["reason"] == "forgotten"
        history = json.loads(ctl("skills", "history", "migrate-first", "--project",
                                 str(project), "--json").stdout)
        assert history[-1]["action"] == "archive" and history[-1]["source"] == "operator"
        r = ctl("skills", "restore", "migrate-first", "--project", str(project))
        assert r.returncode == 0 and "landed" in r.stdout, r.stdout
        with open(path) as f:
            assert BODY in f.read()
        # nothing to forget: a name not in the library, and no NAME at all
        r = ctl("skills", "forget", "no-such-skill", "--project", str(project))
        assert r.returncode == 1 and "no skill no-such-skill" in r.stdout
        assert ctl("skills", "forget").returncode == 2
    finally:
        d.stop()


def test_a_forgotten_lesson_is_not_learned_again_until_it_is_restored(home):
    project = home["tmp"] / "proj"
    project.mkdir()
    seed(project, "migrate-first", DESC, BODY)
    pr = Promoter(PromoterConfig())
    assert pr.forget("migrate-first", str(project)).status == "landed"
    again = pr.promote(intent("create", "migrate-first", description=DESC, body=BODY),
                       WINDOW, str(project))
    assert again.status == "rejected" and "forgotten" in _codes(again)
    assert "skills restore migrate-first" in again.findings[0].message
    reworded = pr.promote(intent("create", "schema-before-tests", description=DESC + " Always.",
                                 body=BODY), WINDOW, str(project))
    assert reworded.status == "rejected" and "forgotten" in _codes(reworded)
    other = pr.promote(intent("create", "lint-before-commit"), WINDOW, str(project))
    assert other.status == "landed", other.findings  # other lessons are learned as before
    # the user layer forgot nothing: the same lesson may land there
    user = pr.promote(intent("create", "migrate-first", layer="user", description=DESC,
                             body=BODY), WINDOW, str(project))
    assert user.status == "landed", user.findings
    assert pr.restore("migrate-first", str(project), layer="project").status == "landed"
    after = pr.promote(intent("create", "schema-before-tests", description=DESC + " Always.",
                              body=BODY), WINDOW, str(project))
    assert "forgotten" not in _codes(after)  # restored: only the live skill's guard is left


def test_forget_any_version_in_either_layer_but_never_a_hand_written_skill(home):
    project = home["tmp"] / "proj"
    project.mkdir()
    ensure_private_dir(paths.state_dir())
    pr = Promoter(PromoterConfig())
    assert pr.promote(intent("create", "user-lesson", layer="user"), WINDOW, None).status == \
        "landed"
    assert pr.promote(intent("update", "user-lesson", layer="user"), WINDOW, None).status == \
        "landed"
    out = pr.forget("user-lesson", None, layer="user")
    assert out.status == "landed" and out.version == 3
    mine = home["claude"] / "skills" / "my-own"
    mine.mkdir(parents=True)
    (mine / "SKILL.md").write_text("---\nname: my-own\ndescription: Use when mine.\n---\nMine.\n")
    out = pr.forget("my-own", None)
    assert out.status == "rejected" and _codes(out) == ["not_owned"]
    assert (mine / "SKILL.md").is_file()


def test_who_learned_what_is_shown_here_and_in_another_home(home, monkeypatch):
    """`skills show` and the report say who learned a skill, when and from which session.
    The same project skill seen from another home (a teammate's clone: another state dir) is
    not hand-written there: that home takes it in as a learned skill of its own, with the
    same attribution and when it was taken in, and its verbs act on it."""
    project = home["tmp"] / "proj"
    project.mkdir()
    ensure_private_dir(paths.state_dir())
    it = intent("create", "migrate-first", description=DESC, body=BODY)
    it.session_id = "sess-alice"
    assert Promoter(PromoterConfig()).promote(it, WINDOW, str(project)).status == "landed"
    d = Daemon(home["home"])
    try:
        r = ctl("skills", "show", "migrate-first", "--project", str(project))
        assert "learned by the reflector from session sess-alice, 20" in r.stdout
        hook(event("Stop", "sess-bob", cwd=str(project)))  # a turn there: the report knows it
        wait_for(lambda: d.status()["library"]["turns"]["projects"] == 1, what="the turn")
        rep = json.loads(ctl("report", "--json").stdout)
        assert "    learned by the reflector from session sess-alice" in ctl("report").stdout
    finally:
        d.stop()
    [row] = [s for s in rep["skills"] if s["name"] == "migrate-first"]
    assert row["learned"]["source"] == "reflector" and row["learned"]["session"] == "sess-alice"
    teammate = home["tmp"] / "h2"
    teammate.mkdir(mode=0o700)
    monkeypatch.setenv("AUTOHARNESS_HOME", str(teammate))
    ensure_private_dir(paths.state_dir())
    [info] = [i for i in Promoter(PromoterConfig()).list_skills(str(project))
              if i.name == "migrate-first"]
    assert info.owner == "autoharness"
    assert info.learned is not None and not info.learned.here and info.learned.adopted_at
    assert info.learned.session == "sess-alice"
    d = Daemon(teammate)
    try:
        r = ctl("skills", "show", "migrate-first", "--project", str(project))
        assert "in another home (managed here since " in r.stdout
        r = ctl("skills", "forget", "migrate-first", "--project", str(project))
        assert r.returncode == 0 and r.stdout.startswith("forgot migrate-first:"), r.stdout
        assert not (project / ".claude" / "skills" / "migrate-first" / "SKILL.md").exists()
    finally:
        d.stop()
