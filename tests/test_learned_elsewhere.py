"""A project skill autoharness learned in one home is a learned skill in a teammate's too.

Alice's home lands a skill in a git project and commits it; Bob clones the repository to
another path and has his own home (another state dir). Bob's autoharness takes the skill in:
it is listed as autoharness's, with Alice's attribution (source, session, when) and when Bob's
home took it in; Bob's lifecycle judges it (dormant after his probation), his `skills forget`
takes it out restorably, and the report counts it as learned. A committed skill whose text was
changed after it landed stays someone else's: shown, never changed. Real promoter and git;
the verbs through the real daemon and CLI.
"""

import json
import os
import subprocess

from claude_autoharness.daemon.persist.dirs import ensure_private_dir
from claude_autoharness.daemon.promote.land import Promoter
from claude_autoharness.protocol import paths
from claude_autoharness.protocol.config import LibraryConfig, PromoterConfig
from harness import Daemon, ctl, event, hook, wait_for
from promote_support import WINDOW, intent

DESC = "Use when the integration tests fail on a fresh checkout: migrate the schema first."
BODY = "Run `make migrate` before `make integration-test`.\n"
SKILL = os.path.join(".claude", "skills", "migrate-first", "SKILL.md")


def git(*args: str, cwd) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout


def two_homes(home, monkeypatch, *, edit: bool = False):
    """Alice's project with her learned skill committed; Bob's clone and home (set as the
    current one). `edit`: the skill's text is changed in the repository after it landed."""
    alice = home["tmp"] / "alice"
    alice.mkdir()
    git("init", "-q", "-b", "main", cwd=alice)
    ensure_private_dir(paths.state_dir())
    it = intent("create", "migrate-first", description=DESC, body=BODY)
    it.session_id = "sess-alice"
    assert Promoter(PromoterConfig()).promote(it, WINDOW, str(alice)).status == "landed"
    if edit:
        with open(alice / SKILL, "a") as f:
            f.write("Then run the seed script.\n")
    git("add", "-A", cwd=alice)
    git("commit", "-q", "-m", "skills", cwd=alice)
    bob = home["tmp"] / "bob"
    git("clone", "-q", str(alice), str(bob), cwd=home["tmp"])
    bob_home = home["tmp"] / "h-bob"
    bob_home.mkdir(mode=0o700)
    monkeypatch.setenv("AUTOHARNESS_HOME", str(bob_home))
    ensure_private_dir(paths.state_dir())
    return bob, bob_home


def _info(pr, project):
    [info] = [i for i in pr.list_skills(str(project)) if i.name == "migrate-first"]
    return info


def test_a_teammates_learned_skill_is_learned_here_with_its_attribution(home, monkeypatch):
    bob, bob_home = two_homes(home, monkeypatch)
    info = _info(Promoter(PromoterConfig()), bob)
    assert info.owner == "autoharness" and info.status == "live"
    assert info.learned.session == "sess-alice" and info.learned.source == "reflector"
    assert not info.learned.here and info.learned.adopted_at is not None
    assert git("status", "--porcelain", cwd=bob) == ""  # taken in: the files are untouched
    d = Daemon(bob_home)
    try:
        r = ctl("skills", "show", "migrate-first", "--project", str(bob))
        assert "learned by the reflector from session sess-alice" in r.stdout
        assert "in another home (managed here since 20" in r.stdout
        assert "not managed here" not in r.stdout
        hook(event("Stop", "sess-bob", cwd=str(bob)))  # a turn there: the report knows it
        wait_for(lambda: d.status()["library"]["turns"]["projects"] == 1, what="the turn")
        rep = json.loads(ctl("report", "--json").stdout)
        r = ctl("skills", "forget", "migrate-first", "--project", str(bob))
        assert r.returncode == 0 and r.stdout.startswith("forgot migrate-first:"), r.stdout
        assert not (bob / SKILL).exists()
        r = ctl("skills", "restore", "migrate-first", "--project", str(bob))
        assert r.returncode == 0 and "landed" in r.stdout, r.stdout
        assert BODY in (bob / SKILL).read_text()
        r = ctl("skills", "revert", "migrate-first", "--project", str(bob))
        assert "not_owned" not in r.stdout  # his to revert (to a version his home has)
    finally:
        d.stop()
    [row] = [s for s in rep["skills"] if s["name"] == "migrate-first"]
    assert row["owner"] == "autoharness" and row["learned"]["session"] == "sess-alice"


def test_a_teammates_learned_skill_is_judged_by_this_homes_lifecycle(home, monkeypatch):
    """Taken in, it starts a probation in Bob's home; unused through it, Bob's lifecycle
    archives it as dormant (in Alice's home it would be judged by her turns, not his)."""
    bob, _ = two_homes(home, monkeypatch)
    turns = {"n": 100}  # Bob's home has counted turns in this project before
    pr = Promoter(PromoterConfig(), library=LibraryConfig(maturity_turns=5),
                  turns=lambda layer, root: turns["n"])
    assert pr.lifecycle_run(str(bob)).done == []  # on probation from when it was taken in
    assert _info(pr, bob).turns == 0
    turns["n"] += 6
    [d] = pr.lifecycle_run(str(bob)).done
    assert (d.name, d.reason) == ("migrate-first", "dormant")
    assert not (bob / SKILL).exists()
    assert _info(pr, bob).status == "archived"


def test_a_learned_skill_changed_since_it_landed_is_not_taken_in(home, monkeypatch):
    """A committed skill whose text is no longer the landed one is shown with its
    attribution but stays someone else's: this home neither judges nor changes it."""
    bob, bob_home = two_homes(home, monkeypatch, edit=True)
    pr = Promoter(PromoterConfig(), library=LibraryConfig(maturity_turns=0),
                  turns=lambda layer, root: 1000)
    info = _info(pr, bob)
    assert (info.owner, info.stage) == ("elsewhere", "not managed here")
    assert info.learned.session == "sess-alice" and info.learned.adopted_at is None
    assert pr.lifecycle_run(str(bob)).done == []
    d = Daemon(bob_home)
    try:
        r = ctl("skills", "show", "migrate-first", "--project", str(bob))
        assert "(in another home: not managed here)" in r.stdout
        r = ctl("skills", "forget", "migrate-first", "--project", str(bob))
        assert r.returncode == 1 and "changed since: it is not managed here" in r.stdout
    finally:
        d.stop()
    assert (bob / SKILL).is_file()
