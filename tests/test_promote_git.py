"""Git mode on a real repository: project landings are commits on a review branch, built with
plumbing, and the user's working tree, index, HEAD and branch are never touched."""

import hashlib
import json
import os
import subprocess
import threading

import pytest

from claude_autoharness.daemon.promote import gitmode, observe
from claude_autoharness.daemon.promote.land import Promoter
from claude_autoharness.daemon.promote.statedir import StateDir
from claude_autoharness.protocol.config import PromoterConfig
from harness import CTL
from promote_support import WINDOW, intent, tree_digest

BRANCH = "autoharness/skills"


def git(repo, *args, input=None, env=None) -> str:
    e = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org",
             GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org", **(env or {}))
    r = subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True,
                       text=True, env=e)
    assert r.returncode == 0, (args, r.stderr)
    return r.stdout


@pytest.fixture
def repo(home, monkeypatch):
    """A repository with two commits on main, a git-mode promoter, nothing configured globally
    for git identity (HOME points at an empty dir)."""
    monkeypatch.setenv("HOME", str(home["tmp"]))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    proj = home["tmp"] / "proj"
    proj.mkdir()
    git(proj, "init", "-q", "-b", "main")
    (proj / "app.py").write_text("print('v1')\n")
    (proj / "notes.txt").write_text("one\n")
    git(proj, "add", ".")
    git(proj, "commit", "-qm", "first")
    (proj / "app.py").write_text("print('v2')\n")
    git(proj, "commit", "-qam", "second")
    pr = Promoter(PromoterConfig(mode="git"))
    pr.recover()
    return {"proj": proj, "pr": pr}


def user_state(proj) -> tuple:
    """Everything of the user's checkout a landing must leave alone."""
    index = (proj / ".git" / "index").read_bytes()
    return (git(proj, "status", "--porcelain=v2", "--branch", "--untracked-files=all"),
            git(proj, "rev-parse", "HEAD"), git(proj, "symbolic-ref", "-q", "HEAD")
            if (proj / ".git" / "HEAD").read_text().startswith("ref:") else "detached",
            hashlib.sha256(index).hexdigest(),
            tree_digest(*[proj / n for n in os.listdir(proj) if n != ".git"]))


def promote(env, it):
    out = env["pr"].promote(it, WINDOW, str(env["proj"]))
    assert out.status == "landed", out.findings
    return out


def branch_log(proj) -> list[str]:
    """The branch's commits beyond main ([] when the branch does not exist)."""
    if subprocess.run(["git", "-C", str(proj), "rev-parse", "-q", "--verify", BRANCH],
                      capture_output=True).returncode:
        return []
    return git(proj, "log", "--format=%H", f"main..{BRANCH}").split()


def show(proj, rev_path: str) -> str:
    return git(proj, "show", rev_path)


def test_landings_are_commits_and_the_checkout_is_untouched(repo):
    """With staged, unstaged and untracked changes, two landings become two commits on the
    review branch (created from main's tip) with the action, skill, reason, evidence and
    trailers in the message; `git status --porcelain=v2`, HEAD, the index file's hash and the
    working tree are exactly as before, and no skill file appears in the working tree."""
    proj = repo["proj"]
    (proj / "app.py").write_text("print('staged')\n")
    git(proj, "add", "app.py")
    (proj / "app.py").write_text("print('staged then edited')\n")
    (proj / "notes.txt").write_text("unstaged\n")
    (proj / "scratch.txt").write_text("untracked\n")
    before = user_state(proj)
    first = intent("create", "run-checks", body="Run `make check` first.\n")
    out = promote(repo, first)
    second = intent("update", "run-checks", body="Run `make check` and `make lint`.\n")
    promote(repo, second)
    assert user_state(proj) == before
    assert not (proj / ".claude").exists()
    commits = branch_log(proj)
    assert len(commits) == 2
    assert git(proj, "rev-parse", f"{commits[-1]}^") == git(proj, "rev-parse", "main")
    msg = git(proj, "log", "-1", "--format=%B", commits[0])
    assert msg.startswith("autoharness: update run-checks\n")
    assert second.proposal.reason in msg and "Evidence:" in msg
    trailers = git(proj, "log", "-1", "--format=%(trailers:only,unfold)", commits[0])
    assert f"Autoharness-Intent: {second.id}" in trailers
    assert "Autoharness-Session:" in trailers
    body = show(proj, f"{BRANCH}:.claude/skills/run-checks/SKILL.md")
    assert "make lint" in body
    prov = json.loads(show(proj, f"{BRANCH}:.claude/skills/run-checks/.autoharness/"
                                 "provenance.json"))
    # provenance names where the skill lives once merged, not the private mirror
    assert prov["target"] == os.path.realpath(proj / ".claude" / "skills" / "run-checks")
    assert [x["intent"] for x in prov["landings"]] == [first.id, second.id]
    hist = repo["pr"].history("run-checks", str(proj))
    assert [h["commit"] for h in hist] == commits[::-1]
    assert out.version == 1


def test_landing_during_a_rebase_changes_nothing_of_the_rebase(repo):
    """A rebase stopped on a conflict (detached HEAD, conflicted index): a landing still
    commits to the branch and leaves status, HEAD, index and tree byte-identical, and the
    rebase can be aborted as usual afterwards."""
    proj = repo["proj"]
    git(proj, "checkout", "-qb", "topic", "HEAD~1")
    (proj / "app.py").write_text("print('topic')\n")
    git(proj, "commit", "-qam", "topic change")
    r = subprocess.run(["git", "-C", str(proj), "rebase", "main"], capture_output=True,
                       env=dict(os.environ, GIT_COMMITTER_NAME="t",
                                GIT_COMMITTER_EMAIL="t@example.org"))
    assert r.returncode != 0 and (proj / ".git" / "rebase-merge").is_dir()
    before = user_state(proj)
    promote(repo, intent("create", "mid-rebase"))
    assert user_state(proj) == before
    assert (proj / ".git" / "rebase-merge").is_dir()
    assert len(branch_log(proj)) == 1
    git(proj, "rebase", "--abort")
    assert git(proj, "symbolic-ref", "HEAD").strip() == "refs/heads/topic"


def test_an_external_fast_forward_is_built_upon(repo):
    """Someone else moves the branch (a teammate's commit fetched and fast-forwarded): the
    next landing's parent is that commit and the teammate's file is still in the tree."""
    proj = repo["proj"]
    promote(repo, intent("create", "first-skill"))
    tip = git(proj, "rev-parse", BRANCH).strip()
    blob = git(proj, "hash-object", "-w", "--stdin", input="from a teammate\n").strip()
    idx = {"GIT_INDEX_FILE": str(proj / ".git" / "test-index")}
    git(proj, "read-tree", tip, env=idx)
    git(proj, "update-index", "--add", "--cacheinfo", f"100644,{blob},TEAM.md", env=idx)
    tree = git(proj, "write-tree", env=idx).strip()
    theirs = git(proj, "commit-tree", tree, "-p", tip, "-m", "teammate").strip()
    git(proj, "update-ref", f"refs/heads/{BRANCH}", theirs, tip)
    promote(repo, intent("create", "second-skill"))
    new = git(proj, "rev-parse", BRANCH).strip()
    assert git(proj, "rev-parse", f"{new}^").strip() == theirs
    files = git(proj, "ls-tree", "-r", "--name-only", new).split()
    assert "TEAM.md" in files
    assert ".claude/skills/first-skill/SKILL.md" in files
    assert ".claude/skills/second-skill/SKILL.md" in files


def test_a_tip_moved_during_the_landing_is_not_rewritten(repo, monkeypatch):
    """The branch moves between building the tree and update-ref (the compare-and-swap
    fails): the landing is rebuilt on the new tip, and the other commit stays."""
    proj = repo["proj"]
    promote(repo, intent("create", "base-skill"))
    real = gitmode._tree_with
    moved = []

    def racing(t, parent, path, skill_dir):
        tree = real(t, parent, path, skill_dir)
        if not moved:  # someone else lands first, exactly now
            other = git(proj, "commit-tree", git(proj, "rev-parse", f"{parent}^{{tree}}").strip(),
                        "-p", parent, "-m", "racing commit").strip()
            git(proj, "update-ref", f"refs/heads/{BRANCH}", other, parent)
            moved.append(other)
        return tree

    monkeypatch.setattr(gitmode, "_tree_with", racing)
    promote(repo, intent("create", "raced-skill"))
    log = git(proj, "log", "--format=%H %s", BRANCH).splitlines()
    assert log[0].endswith("autoharness: create raced-skill")
    assert log[1].split()[0] == moved[0]


def test_concurrent_landings_serialise(repo):
    """Two promoters (daemon and offline CLI alike) landing at once: both commits are on the
    branch, one on top of the other."""
    other = Promoter(PromoterConfig(mode="git"))
    errors = []

    def go(pr, name):
        try:
            out = pr.promote(intent("create", name), WINDOW, str(repo["proj"]))
            assert out.status == "landed", out.findings
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=go, args=(p, n))
               for p, n in ((repo["pr"], "alpha"), (other, "beta"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    files = git(repo["proj"], "ls-tree", "-r", "--name-only", BRANCH).split()
    assert {".claude/skills/alpha/SKILL.md", ".claude/skills/beta/SKILL.md"} <= set(files)
    assert len(branch_log(repo["proj"])) == 2


def test_a_change_to_the_same_skill_on_the_branch_is_not_overwritten(repo, monkeypatch):
    """If the branch moved *and* changed the skill being landed, the landing is refused and
    the other change stays as it is."""
    proj = repo["proj"]
    promote(repo, intent("create", "shared"))
    real = gitmode._tree_with

    def racing(t, parent, path, skill_dir):
        monkeypatch.setattr(gitmode, "_tree_with", real)
        blob = git(proj, "hash-object", "-w", "--stdin", input="edited by a reviewer\n").strip()
        idx = {"GIT_INDEX_FILE": str(proj / ".git" / "race-index")}
        git(proj, "read-tree", parent, env=idx)
        git(proj, "update-index", "--cacheinfo", f"100644,{blob},{path}/SKILL.md", env=idx)
        tree = git(proj, "write-tree", env=idx).strip()
        other = git(proj, "commit-tree", tree, "-p", parent, "-m", "reviewer edit").strip()
        git(proj, "update-ref", f"refs/heads/{BRANCH}", other, parent)
        return real(t, parent, path, skill_dir)

    monkeypatch.setattr(gitmode, "_tree_with", racing)
    out = repo["pr"].promote(intent("update", "shared", body="Mine.\n"), WINDOW, str(proj))
    assert out.status == "rejected"
    assert show(proj, f"{BRANCH}:.claude/skills/shared/SKILL.md") == "edited by a reviewer\n"


def test_revert_archive_and_restore_are_commits(repo):
    """Revert lands the earlier content as a new commit; archive removes the skill from the
    branch in a commit; restore brings it back in another; history is kept throughout."""
    proj = repo["proj"]
    promote(repo, intent("create", "cycle", body="Version one.\n"))
    promote(repo, intent("update", "cycle", body="Version two.\n"))
    pr = repo["pr"]
    assert pr.revert("cycle", project_root=str(proj)).status == "landed"
    assert "Version one." in show(proj, f"{BRANCH}:.claude/skills/cycle/SKILL.md")
    assert len(branch_log(proj)) == 3
    subject = git(proj, "log", "-1", "--format=%s", BRANCH).strip()
    assert subject == "autoharness: revert cycle"
    promote(repo, intent("archive", "cycle"))
    files = git(proj, "ls-tree", "-r", "--name-only", BRANCH).split()
    assert not any(f.startswith(".claude/skills/cycle/") for f in files)
    assert pr.restore("cycle", project_root=str(proj)).status == "landed"
    assert "Version one." in show(proj, f"{BRANCH}:.claude/skills/cycle/SKILL.md")
    assert len(branch_log(proj)) == 5
    assert [h["action"] for h in pr.history("cycle", str(proj))] == \
        ["create", "update", "revert", "archive", "restore"]


def test_a_skill_merged_from_the_branch_is_owned_a_copy_is_not(repo):
    """After the user merges the review branch, the skill in the working tree counts as
    autoharness's (its provenance names that path and its landings are on record); the same
    files copied to another skill dir do not."""
    proj = repo["proj"]
    promote(repo, intent("create", "merged-skill"))
    git(proj, "merge", "-q", "--no-edit", BRANCH)
    real = os.path.realpath(proj / ".claude" / "skills" / "merged-skill")
    assert observe.is_owned(real, repo["pr"].state)
    copy = proj / ".claude" / "skills" / "copied-skill"
    subprocess.run(["cp", "-r", real, str(copy)], check=True)
    assert not observe.is_owned(os.path.realpath(copy), repo["pr"].state)
    # and the mirror built from a branch recreated at main (which now holds it) is owned too
    git(proj, "branch", "-D", BRANCH)
    promote(repo, intent("update", "merged-skill", body="After the merge.\n"))
    assert git(proj, "rev-parse", f"{BRANCH}^").strip() == git(proj, "rev-parse", "main").strip()


def test_per_project_config_turns_git_mode_on(home, monkeypatch):
    """Globally `auto`, but the project's .claude/autoharness.toml says `mode = "git"` with its
    own branch: the landing is a commit there and no file lands in the working tree."""
    monkeypatch.setenv("HOME", str(home["tmp"]))
    proj = home["tmp"] / "p2"
    proj.mkdir()
    git(proj, "init", "-q", "-b", "main")
    (proj / "x").write_text("x\n")
    git(proj, "add", ".")
    git(proj, "commit", "-qm", "x")
    (proj / ".claude").mkdir()
    (proj / ".claude" / "autoharness.toml").write_text(
        '[promoter]\nmode = "git"\ngit_branch = "team/skills"\n')
    pr = Promoter(PromoterConfig())
    out = pr.promote(intent("create", "via-project"), WINDOW, str(proj))
    assert out.status == "landed", out.findings
    assert not (proj / ".claude" / "skills").exists()
    assert "SKILL.md" in git(proj, "ls-tree", "-r", "--name-only", "team/skills")


def test_publish_prints_commands_and_pushes_nothing(repo, tmp_path):
    """`skills publish` lists what the branch holds beyond main and prints the exact push and
    review commands; the remote has no new ref afterwards."""
    proj = repo["proj"]
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    git(proj, "remote", "add", "origin", str(remote))
    promote(repo, intent("create", "to-publish"))
    before = user_state(proj)
    r = subprocess.run([CTL, "skills", "publish", "--project", str(proj)],
                       capture_output=True, text=True,
                       env=dict(os.environ, AUTOHARNESS_PROMOTER_MODE="git"))
    assert r.returncode == 0, r.stderr
    assert "autoharness: create to-publish" in r.stdout
    assert f"git -C {proj} push origin {BRANCH}" in r.stdout
    assert f"gh pr create --base main --head {BRANCH}" in r.stdout
    assert git(remote, "for-each-ref") == ""
    assert user_state(proj) == before


def test_publish_says_what_is_missing(repo, monkeypatch):
    """Not in git mode: exit 1 naming the project's settings file; in git mode with no
    review branch yet: says so; with one but no remote: the commands, and the note to add
    a remote first. Nothing is pushed either way."""
    from claude_autoharness.client.publish import publish

    proj = repo["proj"]
    code, text = publish(str(proj))
    assert code == 1 and "not in git mode" in text
    assert os.path.join(str(proj), ".claude", "autoharness.toml") in text
    monkeypatch.setenv("AUTOHARNESS_PROMOTER_MODE", "git")
    assert publish(str(proj)) == (0, f"no review branch {BRANCH} yet: nothing has landed "
                                     "in git mode")
    promote(repo, intent("create", "no-remote"))
    code, text = publish(str(proj))
    assert code == 0
    assert f"{BRANCH}: 1 commit(s) beyond main" in text
    assert "no remote configured" in text and f"push <remote> {BRANCH}" in text


class Crash(BaseException):
    """Stands for kill -9: nothing after it runs, no handler catches it."""


@pytest.mark.parametrize("where", ["before_update_ref", "after_update_ref"])
def test_a_crash_mid_landing_is_finished_once_at_start(repo, monkeypatch, where):
    """The process dies between the mirror and the branch, or between the branch and the
    history: recover() at the next start finishes the landing with exactly one commit."""
    proj = repo["proj"]
    it = intent("create", "crashy")
    owner, attr = (gitmode, "_tree_with") if where == "before_update_ref" else \
        (StateDir, "append_history")
    real = getattr(owner, attr)

    def boom(*a, **k):
        raise Crash()
    monkeypatch.setattr(owner, attr, boom)
    with pytest.raises(Crash):
        repo["pr"].promote(it, WINDOW, str(proj))
    monkeypatch.setattr(owner, attr, real)
    assert len(branch_log(proj)) == (1 if where == "after_update_ref" else 0)
    fresh = Promoter(PromoterConfig(mode="git"))
    assert [r.result for r in fresh.recover()] == ["completed"]
    assert len(branch_log(proj)) == 1
    assert f"Autoharness-Intent: {it.id}" in git(proj, "log", "-1", "--format=%B", BRANCH)
    again = fresh.promote(it, WINDOW, str(proj))  # the queue re-delivers: reported, not redone
    assert again.status == "landed" and len(branch_log(proj)) == 1


def test_a_fifo_as_the_project_config_does_not_hang(home):
    """A FIFO planted as .claude/autoharness.toml is not a config: the project is in the
    global mode and the read returns at once instead of blocking on the pipe."""
    proj = home["tmp"] / "fifo-proj"
    (proj / ".claude").mkdir(parents=True)
    os.mkfifo(proj / ".claude" / "autoharness.toml")
    assert gitmode.project_settings(str(proj)) == {}
    assert gitmode.mode_for(str(proj), PromoterConfig()) == ("auto", BRANCH)
