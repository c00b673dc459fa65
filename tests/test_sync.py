"""The user layer across machines: two machines simulated by two homes (state dir and Claude
config dir each) and one local bare repository as the remote. Rounds run through the real
promoter and real git; the crash tests run a round in a child process killed with SIGKILL."""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from claude_autoharness.client import checks
from claude_autoharness.daemon.promote import lifecycle, skilltree
from claude_autoharness.daemon.promote.land import Promoter
from claude_autoharness.daemon.skillsync import gitrepo, rounds
from claude_autoharness.protocol.config import LibraryConfig, PromoterConfig, SyncConfig
from harness import CTL, Daemon, ctl, wait_for
from promote_support import GH_TOKEN, WINDOW, intent

BODY = "\n".join(f"Step {i}: do the thing number {i} carefully." for i in range(1, 9)) + "\n"


def _git(*args, cwd=None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


class Machine:
    """One simulated machine: its own state dir and Claude config dir."""

    def __init__(self, root: Path, name: str, monkeypatch, turns: int = 0,
                 library: LibraryConfig | None = None):
        self.name = name
        self.ah = root / name / "h"
        self.claude = root / name / "claude"
        self.ah.mkdir(parents=True, mode=0o700)
        (self.claude / "skills").mkdir(parents=True)
        (self.claude / "projects").mkdir()
        self.mp = monkeypatch
        self.turns = turns
        self.library = library or LibraryConfig()

    @contextmanager
    def on(self):
        self.mp.setenv("AUTOHARNESS_HOME", str(self.ah))
        self.mp.setenv("CLAUDE_CONFIG_DIR", str(self.claude))
        yield Promoter(PromoterConfig(), library=self.library,
                       turns=lambda layer, anchor: self.turns)

    @property
    def env(self) -> dict:
        return {"AUTOHARNESS_HOME": str(self.ah), "CLAUDE_CONFIG_DIR": str(self.claude)}

    def skill_dir(self, name: str) -> Path:
        return self.claude / "skills" / name

    def land(self, action: str, skill: str, **kw):
        with self.on() as pr:
            out = pr.promote(intent(action, skill, layer="user", **kw), WINDOW, None)
        assert out.status == "landed", out.findings
        return out

    def init(self, remote: str):
        with self.on():
            return rounds.init(remote)

    def sync(self, cfg: SyncConfig | None = None):
        with self.on() as pr:
            return rounds.run(pr, cfg or SyncConfig(), counts=True)

    def live(self) -> dict[str, str]:
        out = {}
        for d in sorted((self.claude / "skills").iterdir()):
            if (d / "SKILL.md").is_file():
                out[d.name] = (d / "SKILL.md").read_text()
        return out

    def infos(self):
        with self.on() as pr:
            return {i.name: i for i in pr.list_skills(None)}


@pytest.fixture
def world(short_tmp, monkeypatch):
    for var in ("AUTOHARNESS_SOCKET", "AUTOHARNESS_CONFIG", "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(var, raising=False)
    remote = short_tmp / "remote.git"
    _git("init", "-q", "--bare", "-b", "main", str(remote))
    a = Machine(short_tmp, "a", monkeypatch)
    b = Machine(short_tmp, "b", monkeypatch)
    a.init(str(remote))
    b.init(str(remote))
    return {"a": a, "b": b, "remote": remote, "tmp": short_tmp}


def remote_files(remote: Path) -> dict[str, bytes]:
    tip = subprocess.run(["git", "-C", str(remote), "rev-parse", "-q", "--verify", "main"],
                         capture_output=True, text=True).stdout.strip()
    return gitrepo.tree_files(str(remote), tip or None)


def remote_commits(remote: Path) -> list[str]:
    out = subprocess.run(["git", "-C", str(remote), "log", "--format=%s", "main"],
                         capture_output=True, text=True)
    return out.stdout.splitlines() if out.returncode == 0 else []


def test_landings_on_both_machines_meet(world):
    a, b = world["a"], world["b"]
    a.land("create", "alpha-skill", body=BODY)
    b.land("create", "beta-skill", body=BODY)
    assert a.sync().last_error is None
    info = b.sync()
    assert info.last_error is None and info.took == ["alpha-skill"] and info.pushed == ["beta-skill"]
    # who learned it, on which machine: shown on the machine that took it in
    learned = b.infos()["alpha-skill"].learned
    assert learned is not None and learned.here and learned.source == "sync"
    with a.on():
        assert learned.machine == rounds.load().machine
    a.sync()
    assert set(a.live()) == set(b.live()) == {"alpha-skill", "beta-skill"}
    assert a.live() == b.live()
    # the taken-in copy is a landing of this machine, owned here, naming where it came from
    with a.on():
        a_id = rounds.load().machine
    with b.on() as pr:
        d = str(b.skill_dir("alpha-skill"))
        assert pr.owned(d)
        last = skilltree.read_provenance(d)["landings"][-1]
        assert last["source"] == "sync" and last["machine"] == a_id != rounds.load().machine
        assert [e["source"] for e in pr.history("alpha-skill", layer="user")] == ["sync"]
    # an update travels the same way
    _update(a, "alpha-skill", BODY.replace("Step 2: do", "Step 2: now do"))
    a.sync()
    assert b.sync().took == ["alpha-skill"]
    assert "Step 2: now do" in b.live()["alpha-skill"]
    # a second round on each side changes nothing and commits nothing
    n = len(remote_commits(world["remote"]))
    before = (a.live(), b.live())
    a.sync(), b.sync()
    assert (a.live(), b.live()) == before
    assert len(remote_commits(world["remote"])) == n


def test_what_travels_is_the_skills_their_history_and_counts_only(world):
    a = world["a"]
    a.land("create", "alpha-skill", body=BODY)
    a.sync()
    files = remote_files(world["remote"])
    tops = {p.split("/")[0] for p in files}
    assert tops <= {"skills", "archived", "counts", "history"}
    prov = json.loads(files["skills/alpha-skill/.autoharness/provenance.json"])
    assert "target" not in prov  # no local path of the machine
    blob = b"".join(files.values())
    assert str(a.ah).encode() not in blob and str(a.claude).encode() not in blob
    # evidence quotes travel unless sync.evidence is off
    assert any("/.autoharness/evidence/" in p for p in files)
    b = world["b"]
    b.land("create", "beta-skill", body=BODY)
    b.sync(SyncConfig(evidence=False))
    files = remote_files(world["remote"])
    assert not any(p.startswith("skills/beta-skill/.autoharness/evidence/") for p in files)
    prov = json.loads(files["skills/beta-skill/.autoharness/provenance.json"])
    assert all(x["evidence"] is None for x in prov["landings"])


def test_counts_from_both_machines_sum_and_keep_a_skill_from_dormancy(world):
    a, b = world["a"], world["b"]
    a.land("create", "alpha-skill", body=BODY)
    with a.on() as pr:
        for _ in range(3):
            pr.record_use(str(a.skill_dir("alpha-skill")))
    a.sync()
    b.sync()
    with b.on() as pr:
        pr.record_use(str(b.skill_dir("alpha-skill")))
        pr.record_use(str(b.skill_dir("alpha-skill")))
    b.sync()
    a.sync()
    assert a.infos()["alpha-skill"].uses == 5
    assert b.infos()["alpha-skill"].uses == 5
    # machine b never used it again after a restart of its counts, and its probation is
    # over there: a's uses keep it from being archived as dormant on b
    c = Machine(world["tmp"], "c", world["a"].mp, turns=0,
                library=LibraryConfig(maturity_turns=2))
    c.init(str(world["remote"]))
    c.sync()
    c.turns = 10
    with c.on() as pr:
        assert pr.list_skills(None)[0].uses == 5
        assert pr.lifecycle_run(None).done == []
    c.sync()  # c's counts (0 uses) travel; the sum stays 5 everywhere
    a.sync()
    assert a.infos()["alpha-skill"].uses == 5
    # without the other machines' uses the same pass archives it as dormant
    with c.on() as pr:
        pr.statedir.put_synced_counts({})
        assert [d.reason for d in pr.lifecycle_run(None).done] == [lifecycle.DORMANT]


def _update(m: Machine, skill: str, body: str):
    m.land("update", skill, body=body)


def test_changes_to_different_lines_merge_cleanly_on_both_machines(world):
    a, b = world["a"], world["b"]
    a.land("create", "alpha-skill", body=BODY)
    a.sync(), b.sync()
    _update(a, "alpha-skill", BODY.replace("Step 1: do", "Step 1: first do"))
    _update(b, "alpha-skill", BODY.replace("Step 8: do", "Step 8: last do"))
    a.sync()
    info = b.sync()
    assert info.merged == ["alpha-skill"] and info.conflicts == []
    a.sync()
    text = a.live()["alpha-skill"]
    assert "Step 1: first do" in text and "Step 8: last do" in text
    assert a.live() == b.live()


def test_a_conflicting_update_keeps_both_versions(world):
    a, b = world["a"], world["b"]
    a.land("create", "alpha-skill", body=BODY)
    a.sync(), b.sync()
    _update(a, "alpha-skill", BODY.replace("Step 4: do", "Step 4: from machine a, do"))
    a_version = a.live()["alpha-skill"]
    time.sleep(0.01)  # b's change is the later one: it wins on both machines
    _update(b, "alpha-skill", BODY.replace("Step 4: do", "Step 4: from machine b, do"))
    b_version = b.live()["alpha-skill"]
    a.sync()
    info = b.sync()
    assert [c.skill for c in info.conflicts] == ["alpha-skill"]
    assert info.conflicts[0].kept == info.machine
    a.sync()
    assert a.live()["alpha-skill"] == b.live()["alpha-skill"] == b_version
    # the losing version is in history on both machines, restorable with revert
    for m in (a, b):
        with m.on() as pr:
            hist = pr.history("alpha-skill", layer="user")
            texts = [pr.statedir.get_blob(e["files"]["SKILL.md"]).decode() for e in hist
                     if e.get("files")]
            assert a_version in texts and b_version in texts
    with a.on() as pr:
        hist = [e for e in pr.history("alpha-skill", layer="user") if e.get("files")]
        v = next(e["version"] for e in hist
                 if pr.statedir.get_blob(e["files"]["SKILL.md"]).decode() == a_version)
        assert pr.revert("alpha-skill", to=v, layer="user").status == "landed"
    assert a.live()["alpha-skill"] == a_version
    # shown: status (the sync state), the doctor's view, skills show, SessionStart summary
    with b.on():
        shown = rounds.load()
    assert shown.conflicts and shown.conflicts[0].skill == "alpha-skill"


def test_a_conflict_resolves_the_same_way_on_both_machines_whichever_syncs_second(world):
    a, b = world["a"], world["b"]
    a.land("create", "alpha-skill", body=BODY)
    a.sync(), b.sync()
    _update(b, "alpha-skill", BODY.replace("Step 4: do", "Step 4: b says do"))
    time.sleep(0.01)  # a's change is later, but b syncs first
    _update(a, "alpha-skill", BODY.replace("Step 4: do", "Step 4: a says do"))
    a_version = a.live()["alpha-skill"]
    b.sync()
    info = a.sync()
    assert info.conflicts and info.conflicts[0].kept == info.machine
    b.sync()
    assert a.live()["alpha-skill"] == b.live()["alpha-skill"] == a_version


def test_an_archive_and_a_restore_travel(world):
    a, b = world["a"], world["b"]
    a.land("create", "alpha-skill", body=BODY)
    a.sync(), b.sync()
    with a.on() as pr:
        d = lifecycle.Decision(name="alpha-skill", layer="user", scope=None,
                               reason=lifecycle.DORMANT, uses=0, turns=60)
        assert pr.retire(d, None).status == "landed"
    a.sync()
    info = b.sync()
    assert info.took == ["alpha-skill"]
    assert "alpha-skill" not in b.live()
    assert b.infos()["alpha-skill"].status == "archived"
    assert b.infos()["alpha-skill"].reason == lifecycle.DORMANT
    with b.on() as pr:
        assert pr.restore("alpha-skill", layer="user").status == "landed"
    b.sync()
    a.sync()
    assert "alpha-skill" in a.live() and a.live() == b.live()


def test_the_remote_down_then_back(world):
    a, b = world["a"], world["b"]
    b.land("create", "beta-skill", body=BODY)
    b.sync()
    a.land("create", "alpha-skill", body=BODY)
    before = a.live()
    away = world["remote"].with_name("away.git")
    world["remote"].rename(away)
    info = a.sync()
    assert info.last_error and info.failures == 1 and info.last_good_at is None
    assert a.live() == before  # nothing taken in, nothing lost
    info = a.sync()
    assert info.failures == 2
    # status and doctor show the reason and the fix; the daemon backs off
    with a.on():
        check = checks.check_sync(None, rounds.load)
    assert not check.ok and info.last_error in check.detail and "git ls-remote" in check.fix
    cfg = SyncConfig(every_s=10)
    assert rounds.next_try(info, cfg) == info.last_round_at + 40
    assert not rounds.due(info, cfg, info.last_round_at + 39)
    assert rounds.due(info, cfg, info.last_round_at + 40)
    away.rename(world["remote"])
    info = a.sync()
    assert info.last_error is None and info.failures == 0 and info.took == ["beta-skill"]
    with a.on():
        assert checks.check_sync(None, rounds.load).ok


def test_a_push_refused_by_the_remote_leaves_the_library_as_it_was(world):
    a, b = world["a"], world["b"]
    b.land("create", "beta-skill", body=BODY)
    b.sync()
    hook = world["remote"] / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'refused: read-only for this key' >&2\nexit 1\n")
    hook.chmod(0o755)
    a.land("create", "alpha-skill", body=BODY)
    before = a.live()
    info = a.sync()
    assert info.last_error and "refused" in info.last_error
    assert a.live() == before  # beta-skill is not taken in before the push succeeds
    hook.unlink()
    assert a.sync().last_error is None
    assert set(a.live()) == {"alpha-skill", "beta-skill"}


def test_a_non_fast_forward_push_is_decided_again_on_the_new_tip(world, monkeypatch):
    a, b = world["a"], world["b"]
    a.land("create", "alpha-skill", body=BODY)
    b.land("create", "beta-skill", body=BODY)
    real_push = gitrepo.push
    raced = []

    def push_after_b(repo):  # b pushes between a's fetch and a's push, once
        if not raced:
            raced.append(1)
            b.sync()
            a_env = a.env
            for k, v in a_env.items():
                monkeypatch.setenv(k, v)
        return real_push(repo)

    monkeypatch.setattr(gitrepo, "push", push_after_b)
    info = a.sync()
    assert raced and info.last_error is None and info.took == ["beta-skill"]
    b.sync()
    assert set(a.live()) == set(b.live()) == {"alpha-skill", "beta-skill"}


def test_a_hand_written_skill_never_leaves_its_machine_and_is_never_touched(world):
    a, b = world["a"], world["b"]
    mine = a.skill_dir("own-notes")
    mine.mkdir()
    text = "---\nname: own-notes\ndescription: Use when I write my own notes.\n---\nmine\n"
    (mine / "SKILL.md").write_text(text)
    a.sync()
    assert not any("own-notes" in p for p in remote_files(world["remote"]))
    # another machine's autoharness skill of that name is refused here, the file untouched
    b.land("create", "own-notes", body=BODY)
    b.sync()
    info = a.sync()
    assert [(x.skill, x.findings[0].code) for x in info.refused] == [("own-notes", "not_owned")]
    assert (mine / "SKILL.md").read_text() == text
    assert not any(p.startswith("skills/own-notes/") and "machine" in p
                   for p in remote_files(world["remote"]) if p.startswith("counts/"))


def test_a_remote_landing_is_checked_by_this_machines_promoter(world):
    """A skill pushed by a third party holding a secret, or near a skill this machine has,
    is refused here: it is a landing of this machine like any other."""
    a = world["a"]
    a.land("create", "run-checks")
    evil = world["tmp"] / "evil"
    _git("clone", "-q", str(world["remote"]), str(evil))
    for name, body, desc in (("leaky-skill", f"Use the token {GH_TOKEN} to push.\n",
                              "Use when pushing to the mirror needs a token."),
                             ("run-the-checks", "Run `make check` before `git push`.\n",
                              "'Use when about to push: run the project''s checks first.'")):
        d = evil / "skills" / name
        (d / ".autoharness").mkdir(parents=True)
        (d / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {desc}\n---\n{body}")
        (d / ".autoharness" / "origin.json").write_text('{"machine": "evil", "at": 1}')
    quoted = evil / "skills" / "quoted-skill"
    (quoted / ".autoharness" / "evidence").mkdir(parents=True)
    (quoted / "SKILL.md").write_text("---\nname: quoted-skill\ndescription: Use when the "
                                     "deploy needs a fresh cache.\n---\nClear the cache.\n")
    (quoted / ".autoharness" / "evidence" / ("0" * 64 + ".txt")).write_text(
        f"export GITHUB_TOKEN={GH_TOKEN}")
    _git("-c", "user.name=x", "-c", "user.email=x@x", "add", "-A", cwd=evil)
    _git("-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "-m", "x", cwd=evil)
    _git("push", "-q", "origin", "HEAD:main", cwd=evil)
    info = a.sync()
    codes = {x.skill: {f.code for f in x.findings} for x in info.refused}
    assert "secret" in codes["leaky-skill"], codes
    assert "duplicate" in codes["run-the-checks"]
    assert "secret" in codes["quoted-skill"], codes  # a quote beside the skill is checked too
    assert set(a.live()) == {"run-checks"}


def test_two_rounds_never_run_at_once(world):
    a = world["a"]
    with a.on(), rounds.round_lock():
        with pytest.raises(rounds.Busy):
            a.sync()


CRASH = textwrap.dedent("""
    import os, signal, sys
    from claude_autoharness.daemon.promote.land import Promoter
    from claude_autoharness.daemon.skillsync import gitrepo, library, rounds
    from claude_autoharness.protocol.config import PromoterConfig, SyncConfig

    where = sys.argv[1]
    def die(*a, **k):
        os.kill(os.getpid(), signal.SIGKILL)
    if where == "before_push":
        gitrepo.push = die
    elif where == "after_push":
        real = gitrepo.push
        gitrepo.push = lambda repo: (real(repo), die())
    elif where == "mid_take":
        real_run = Promoter.run
        Promoter.run = lambda self, rec: (self.statedir.put_pending(rec), die())
    rounds.run(Promoter(PromoterConfig()), SyncConfig(), counts=True)
""")


@pytest.mark.parametrize("where", ["before_push", "after_push", "mid_take"])
def test_kill_9_mid_round_then_a_round_that_completes_once(world, where):
    a, b = world["a"], world["b"]
    a.land("create", "alpha-skill", body=BODY)
    b.land("create", "beta-skill", body=BODY)
    b.sync()
    n_before = len(remote_commits(world["remote"]))
    env = dict(os.environ, **a.env)
    p = subprocess.run([sys.executable, "-c", CRASH, where], env=env, capture_output=True,
                       timeout=120)
    assert p.returncode == -signal.SIGKILL, p.stderr.decode()
    # at start (the daemon's, or the offline CLI's) the promoter recovers what was in flight
    with a.on() as pr:
        pr.recover()
    info = a.sync()
    assert info.last_error is None
    assert set(a.live()) == {"alpha-skill", "beta-skill"}
    with a.on() as pr:
        assert all(pr.owned(str(a.skill_dir(n))) for n in a.live())
        assert os.listdir(os.path.join(pr.state, "pending")) == []
        assert [e["source"] for e in pr.history("beta-skill", layer="user")] == ["sync"]
    # a's landing reached the remote in exactly one commit
    commits = remote_commits(world["remote"])
    assert sum("alpha-skill" in c for c in commits[:len(commits) - n_before]) == 1, commits
    b.sync()
    assert a.live() == b.live()


def test_the_cli_sets_up_and_runs_rounds_offline_and_through_the_daemon(world):
    a, b = world["a"], world["b"]
    a.land("create", "alpha-skill", body=BODY)
    fresh = Machine(world["tmp"], "d", a.mp)
    out = ctl("sync", "init", str(world["remote"]), env=fresh.env)
    assert out.returncode == 0, out.stderr
    assert "sync set up" in out.stdout
    bad = ctl("sync", "init", str(world["tmp"] / "nowhere.git"), env=fresh.env)
    assert bad.returncode == 1 and "fix:" in bad.stderr
    # the remote that answered stays set up
    assert f"sync: {world['remote']}" in ctl("sync", "status", env=fresh.env).stdout
    assert ctl("sync", "init", str(world["remote"]), env=fresh.env).returncode == 0
    out = ctl("sync", env=a.env)  # no daemon: a round here, skills only
    assert out.returncode == 0, out.stderr
    assert "sent: alpha-skill" in out.stdout
    assert not any(p.startswith("counts/") for p in remote_files(world["remote"]))
    d = Daemon(b.ah, env=dict(b.env, AUTOHARNESS_AUTOSTART="0"))
    try:
        out = ctl("sync", "--json", env=b.env)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["took"] == ["alpha-skill"]
        assert any(p.startswith("counts/") for p in remote_files(world["remote"]))
        st = ctl("status", env=b.env)
        assert f"sync: {world['remote']}" in st.stdout
        st = json.loads(ctl("status", "--json", env=b.env).stdout)
        assert st["sync"]["configured"] and st["sync"]["last_error"] is None
        shown = ctl("sync", "status", env=b.env)
        assert "last good round" in shown.stdout
        assert ctl("sync", "bogus", env=b.env).returncode == 2
    finally:
        d.stop()
    assert (b.claude / "skills" / "alpha-skill" / "SKILL.md").is_file()


def test_the_daemon_runs_rounds_itself_when_every_s_is_set(world):
    a, b = world["a"], world["b"]
    a.land("create", "alpha-skill", body=BODY)
    a.sync()
    cfg = b.ah / "config.toml"
    cfg.write_text("[sync]\nevery_s = 0.2\n")
    d = Daemon(b.ah, env=dict(b.env, AUTOHARNESS_AUTOSTART="0", AUTOHARNESS_CONFIG=str(cfg)))
    try:
        wait_for(lambda: (b.claude / "skills" / "alpha-skill" / "SKILL.md").is_file(),
                 timeout=60, what="a round run by the daemon")
        # the daemon keeps answering hooks and status while rounds run
        assert d.status()["sync"]["every_s"] == 0.2
    finally:
        d.stop()


def test_a_conflict_is_shown_in_the_next_session_start_summary(world):
    a, b = world["a"], world["b"]
    a.land("create", "alpha-skill", body=BODY)
    a.sync(), b.sync()
    _update(a, "alpha-skill", BODY.replace("Step 4: do", "Step 4: a, do"))
    time.sleep(0.01)
    _update(b, "alpha-skill", BODY.replace("Step 4: do", "Step 4: b, do"))
    a.sync()
    b.sync()
    proj = world["tmp"] / "proj"
    proj.mkdir()
    d = Daemon(b.ah, env=dict(b.env, AUTOHARNESS_AUTOSTART="0"))
    try:
        from harness import event, hook

        out = hook(event("SessionStart", sid="s-1", cwd=str(proj), source="startup"),
                   env=b.env)
        ctx = json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
        assert "sync conflict on alpha-skill" in ctx
        shown = json.loads(ctl("skills", "show", "alpha-skill", "--json", env=b.env).stdout)
        assert shown["sync_conflicts"][0]["skill"] == "alpha-skill"
    finally:
        d.stop()
    shutil.rmtree(proj)


def test_ctl_help_names_the_sync_verb():
    out = subprocess.run([CTL, "sync", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "init REMOTE" in out.stdout


def _accept_verdict(m: Machine, skill: str, verdict: str, n: int):
    """An accepted verdict as the promoter records it: a feedback entry in the skill's history
    (grounding itself is tested with the evidence)."""
    with m.on() as pr:
        target = str(m.skill_dir(skill))
        version = pr.statedir.history(target)[-1]["version"]
        pr.statedir.append_history({"landing": f"fb-{m.name}-{n}", "action": "feedback",
                                    "version": version, "files": {}, "at": time.time(),
                                    "target": target, "layer": "user", "name": skill,
                                    "source": "reflector", "verdict": verdict,
                                    "quote": "q", "reason": f"{verdict}: test"})


def test_verdicts_from_both_machines_sum_for_the_lifecycle(world):
    a, b = world["a"], world["b"]
    a.land("create", "alpha-skill", body=BODY)
    _accept_verdict(a, "alpha-skill", "harmful", 1)
    a.sync()
    b.sync()
    _accept_verdict(b, "alpha-skill", "harmful", 1)
    b.sync()
    a.sync()
    for m in (a, b):
        fb = m.infos()["alpha-skill"].feedback
        assert (fb.harmful, fb.helped) == (2, 0)
    # one harmful verdict on each machine: together they take the skill out of the library
    with a.on() as pr:
        assert [d.reason for d in pr.lifecycle_run(None).done] == ["harmful"]


def test_a_lessons_check_travels_with_its_skill(world):
    """A user-layer lesson landed with a check on one machine arrives with its check on the
    other, where it only reminds until confirmed there."""
    import msgspec

    from check_support import WINDOW as CORRECTED
    from check_support import proposal
    from claude_autoharness.daemon.proposals import Intent, Proposal

    a, b = world["a"], world["b"]
    p = msgspec.convert(proposal(layer="user"), Proposal)
    with a.on() as pr:
        out = pr.promote(Intent(id="c-1", source="reflector", created_at=0.0, proposal=p),
                         CORRECTED, None)
        assert out.status == "landed", out.findings
    a.sync()
    assert b.sync().took == ["run-tests-with-uv"]
    assert (b.skill_dir("run-tests-with-uv") / "check.json").is_file()
    with b.on() as pr:
        [c] = pr.write_check_table()
    assert (c["skill"], c["rule"], c["action"], c["root"]) == \
        ("run-tests-with-uv", "Bash(pytest *)", "remind", None)
# ---- a fresh second machine: no ~/.claude yet -------------------------------------------


def test_a_fresh_machine_without_a_claude_dir_takes_the_skills_in(world):
    a, b = world["a"], world["b"]
    a.land("create", "alpha-skill", body=BODY)
    assert a.sync().last_error is None
    shutil.rmtree(b.claude)
    info = b.sync()
    assert info.refused == [] and info.last_error is None
    assert info.took == ["alpha-skill"]
    assert (b.claude / "skills" / "alpha-skill" / "SKILL.md").read_text() == \
        (a.claude / "skills" / "alpha-skill" / "SKILL.md").read_text()


def test_a_user_layer_it_cannot_make_fails_the_round_and_names_the_fix(world):
    a, b = world["a"], world["b"]
    a.land("create", "alpha-skill", body=BODY)
    assert a.sync().last_error is None
    skills = b.claude / "skills"
    skills.rmdir()
    skills.write_text("in the way\n")
    out = ctl("sync", env={**os.environ, **b.env})
    assert out.returncode == 1, out.stdout
    assert "FAILING" in out.stdout and str(skills) in out.stdout
    assert "last good round never" in out.stdout
    assert "git ls-remote" not in out.stdout  # the remote is fine: the fix is this machine's
    with b.on():
        info = rounds.load()
        check = checks.check_sync(None, rounds.load)
    assert info.last_good_at is None and info.failures == 1
    assert not check.ok and str(skills) in check.fix
    assert skills.read_text() == "in the way\n"
    # once the path is a directory, the next round takes everything in
    skills.unlink()
    info = b.sync()
    assert info.last_error is None and info.took == ["alpha-skill"]


def test_a_take_in_that_cannot_write_is_a_failed_round_not_a_refusal(world, monkeypatch):
    """A landing that fails on this machine's disk (its layer root moved under it mid-round)
    fails the round: it is not a refusal of the skill, and the round is not good."""
    from claude_autoharness.daemon.promote import recovery

    a, b = world["a"], world["b"]
    a.land("create", "alpha-skill", body=BODY)
    assert a.sync().last_error is None
    monkeypatch.setattr(recovery, "root_intact", lambda rec: False)
    info = b.sync()
    assert info.last_error and "alpha-skill" in info.last_error
    assert info.last_good_at is None and info.failures == 1
    assert str(b.claude / "skills") in info.last_fix
    monkeypatch.undo()
    info = b.sync()
    assert info.last_error is None and info.took == ["alpha-skill"]


def test_a_lesson_forgotten_on_one_machine_is_forgotten_on_the_other(world):
    a, b = world["a"], world["b"]
    a.land("create", "alpha-skill", body=BODY)
    a.sync()
    assert b.sync().took == ["alpha-skill"]
    with a.on() as pr:
        assert pr.forget("alpha-skill", None, layer="user").status == "landed"
    a.sync()
    b.sync()
    assert "alpha-skill" not in b.live()
    with b.on() as pr:
        [row] = [i for i in pr.list_skills(None) if i.name == "alpha-skill"]
        assert row.status == "archived" and row.reason == "forgotten"
        again = pr.promote(intent("create", "alpha-skill", layer="user", body=BODY), WINDOW, None)
    assert again.status == "rejected" and [f.code for f in again.findings] == ["forgotten"]
