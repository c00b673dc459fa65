"""The promoter against a hostile or changed-under-it tree: a skills dir re-pointed outside
the project before a restore, a project that no longer exists, malformed or planted
provenance files, and an archive interrupted by a crash whose target was replaced since."""

import hashlib
import json
import os
import shutil

import pytest

from claude_autoharness.daemon.promote import fileops, observe, recovery, skilltree
from claude_autoharness.daemon.promote.land import Promoter
from claude_autoharness.daemon.promote.plan import SKILL_MD
from claude_autoharness.protocol.config import PromoterConfig
from promote_support import (
    WINDOW,
    Crash,
    assert_rejected_without_writes,
    crash_on_skill_md_replace,
    hand_written,
    intent,
    land,
    tree_digest,
)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- 1. restore re-resolves the layer root -------------------------------------------------

def test_restore_refuses_a_project_claude_dir_now_symlinked_outside(env):
    """An archived project skill is restored only where the project's skills dir resolves
    *now*: with `proj/.claude` swapped for a symlink to a directory outside the project,
    restore is rejected (contained/symlink) and nothing is written anywhere — in particular
    not through the symlink."""
    pr, proj = env["pr"], str(env["proj"])
    land(env, intent("create", "away", body="Archived body.\n"))
    land(env, intent("archive", "away"))
    shutil.rmtree(env["proj"] / ".claude")
    elsewhere = env["outside"] / "dotclaude"
    (elsewhere / "skills").mkdir(parents=True)
    os.symlink(elsewhere, env["proj"] / ".claude")
    before = tree_digest(*env["trees"])
    out = pr.restore("away", proj)
    assert out.status == "rejected"
    assert {(f.family, f.code) for f in out.findings} == {("contained", "symlink")}
    assert tree_digest(*env["trees"]) == before
    assert os.listdir(elsewhere / "skills") == []
    # The archive is untouched: once the symlink is gone the restore works.
    os.unlink(env["proj"] / ".claude")
    assert pr.restore("away", proj).status == "landed"
    assert (env["skills"] / "away" / SKILL_MD).read_text().endswith("Archived body.\n")


def test_restore_refuses_when_the_user_skills_dir_moved(env, monkeypatch):
    """The user layer too: an archive is restored only if the user skills dir still resolves
    to the directory it was archived from."""
    pr = env["pr"]
    assert pr.promote(intent("create", "roam", layer="user"), WINDOW, None).status == "landed"
    assert pr.promote(intent("archive", "roam", layer="user"), WINDOW, None).status == "landed"
    other = env["outside"] / "claude2"
    (other / "skills").mkdir(parents=True)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(other))
    before = tree_digest(*env["trees"])
    out = Promoter(PromoterConfig()).restore("roam", layer="user")
    assert [(f.family, f.code) for f in out.findings] == [("contained", "symlink")]
    assert tree_digest(*env["trees"]) == before


# -- 2. a project root that no longer exists -----------------------------------------------

@pytest.mark.parametrize("kind", ["missing", "file"])
def test_landing_into_a_deleted_project_writes_nothing(env, kind):
    """An intent whose project root is gone (or is not a directory) is rejected as
    no_project_root (shape) and does not recreate `<gone>/.claude/skills/...`."""
    gone = env["proj"].parent / "gone"
    if kind == "file":
        gone.write_text("not a directory\n")
    before = tree_digest(*env["trees"])
    out = env["pr"].promote(intent("create", "ghost"), WINDOW, str(gone))
    assert out.status == "rejected"
    assert [(f.family, f.code) for f in out.findings] == [("shape", "no_project_root")]
    assert tree_digest(*env["trees"]) == before
    if kind == "file":
        assert gone.read_text() == "not a directory\n"
    else:
        assert not os.path.lexists(gone)


def test_restore_into_a_deleted_project_writes_nothing(env):
    """restore of an archive whose project was deleted since: no_project_root, no writes."""
    proj2 = env["proj"].parent / "proj2"
    (proj2 / ".claude" / "skills").mkdir(parents=True)
    pr = env["pr"]
    assert pr.promote(intent("create", "lost"), WINDOW, str(proj2)).status == "landed"
    assert pr.promote(intent("archive", "lost"), WINDOW, str(proj2)).status == "landed"
    shutil.rmtree(proj2)
    before = tree_digest(*env["trees"])
    out = pr.restore("lost", layer="project")
    assert [(f.family, f.code) for f in out.findings] == [("shape", "no_project_root")]
    assert tree_digest(*env["trees"]) == before
    assert not os.path.lexists(proj2)


def test_recovery_does_not_recreate_a_project_deleted_after_a_crash(env):
    """A create interrupted by a crash whose project was deleted before the restart is not
    completed: recover() leaves no `<gone>/.claude/skills/...` behind and nothing pending."""
    proj2 = env["proj"].parent / "proj2"
    proj2.mkdir()
    crash_on_skill_md_replace(env, intent("create", "doomed"), proj2)
    shutil.rmtree(proj2)
    [rec] = Promoter(PromoterConfig()).recover()
    assert rec.result in ("abandoned", "rolled_back")
    assert not proj2.exists()
    assert os.listdir(os.path.join(env["pr"].state, "pending")) == []


# -- 3. malformed provenance never crashes and is never owned ------------------------------

def _provenance(d) -> str:
    return os.path.join(d, ".autoharness", "provenance.json")


def _hostile_provenance(target: str, md_sha: str) -> list[bytes]:
    landing = {"landing": "0-0", "version": 1, "action": "create", "at": 1.0,
               "skill_md": md_sha, "previous": None, "evidence": None}
    shapes = [
        {"target": target, "landings": "oops"},
        {"target": target, "landings": ["oops"]},
        {"target": target, "landings": None},
        {"target": target, "landings": {"0": landing}},
        {"target": target, "landings": [dict(landing, at="yesterday")]},
        {"target": target, "landings": [dict(landing, version="1")]},
        {"target": target, "landings": [dict(landing, skill_md=7)]},
        {"target": target, "landings": [{}]},
        {"target": target, "landings": []},
        {"target": 5, "landings": [landing]},
        [target, landing], "provenance", 42, None,
    ]
    return [json.dumps(s).encode() for s in shapes] + [
        b"{not json", b"\xff\xfe\x00garbage", b"", b"[" * 200_000,   # deep nesting
        b'{"target": "' + target.encode() + b'", "version": 1' + b"9" * 5000 + b"}",
        json.dumps({"target": target, "landings": [landing] * 60_000}).encode(),  # > 4 MiB
    ]


def test_malformed_provenance_is_not_owned_and_never_raises(env):
    """A provenance file of the wrong shape (landings not a list of landings, wrong types,
    garbage bytes, deep nesting, oversize) makes the skill not owned: promote rejects with
    not_owned and writes nothing, and list_skills/show/history report it as the user's
    instead of raising."""
    pr, proj = env["pr"], str(env["proj"])
    land(env, intent("create", "prov"))
    d = os.path.realpath(env["skills"] / "prov")
    with open(os.path.join(d, SKILL_MD), "rb") as f:
        md_sha = _sha(f.read())
    for i, data in enumerate(_hostile_provenance(d, md_sha)):
        with open(_provenance(d), "wb") as f:
            f.write(data)
        assert skilltree.read_provenance(d) is None, i
        assert not observe.is_owned(d), i
        for it in (intent("update", "prov", body="Taken.\n"), intent("archive", "prov"),
                   intent("patch", "prov", old="Run", new="Walk")):
            assert_rejected_without_writes(env, it, "not_owned")
        info = {s.name: s for s in pr.list_skills(proj)}["prov"]
        assert (info.owner, info.version, info.created) == ("user", None, None), i
        view = pr.show("prov", proj)
        assert view.landings == [] and view.info.owner == "user"
        assert [h["action"] for h in pr.history("prov", proj)] == ["create"]
        assert pr.revert("prov", to=1, project_root=proj).findings[0].code == "not_owned"


def test_hostile_files_in_the_skill_tree_never_make_the_views_raise(env):
    """list_skills/show/history survive what a repository can put in its skills dir:
    symlinked provenance, provenance that is a directory or a FIFO, a skill dir that is a
    symlink or a plain file, SKILL.md that is a FIFO, a huge SKILL.md, a directory name that
    is not UTF-8, and garbage uses/archive state. None of it is owned: a provenance that is
    a link, a directory or a FIFO is not read (the skill is the user's); a well-formed one
    (the non-UTF-8 dir's) only claims another home landed it (`elsewhere`, not managed
    here), and this home's landing records still say it is not owned."""
    pr, proj, skills = env["pr"], str(env["proj"]), env["skills"]
    hand_written(env, "linked-prov")
    (skills / "linked-prov" / ".autoharness").mkdir()
    os.symlink("/etc/hostname", skills / "linked-prov" / ".autoharness" / "provenance.json")
    hand_written(env, "dir-prov")
    (skills / "dir-prov" / ".autoharness" / "provenance.json").mkdir(parents=True)
    hand_written(env, "fifo-prov")
    (skills / "fifo-prov" / ".autoharness").mkdir()
    os.mkfifo(skills / "fifo-prov" / ".autoharness" / "provenance.json")
    (env["outside"] / "SKILL.md").write_text("---\nname: linked\n---\n\nOutside.\n")
    os.symlink(env["outside"], skills / "linked")
    (skills / "plain-file").write_text("not a skill\n")
    (skills / "fifo-md").mkdir()
    os.mkfifo(skills / "fifo-md" / SKILL_MD)
    hand_written(env, "huge", body="x" * (8 * 1024 * 1024) + "\n")
    # A directory name that is not UTF-8, with a provenance naming exactly that path.
    raw = os.path.join(os.fsencode(os.path.realpath(skills)), b"bad-\xff")
    os.makedirs(os.path.join(raw, b".autoharness"))
    with open(os.path.join(raw, b"SKILL.md"), "w") as f:
        f.write("---\nname: bad\ndescription: Use when testing.\n---\n\nBody.\n")
    landing = {"landing": "0-0", "version": 1, "action": "create", "at": 1.0, "skill_md": None}
    with open(os.path.join(raw, b".autoharness", b"provenance.json"), "w") as f:
        json.dump({"target": os.fsdecode(raw), "landings": [landing]}, f)
    with open(os.path.join(pr.state, "uses.json"), "w") as f:
        f.write('["not", "a", "map"]')
    os.makedirs(os.path.join(pr.state, "archive", "junk", "0-0"))
    with open(os.path.join(pr.state, "archive", "junk", "0-0", "meta.json"), "w") as f:
        f.write('{"name": 5}')
    with open(os.path.join(pr.state, "archive", "stray-file"), "w") as f:
        f.write("x")
    infos = {s.name: s for s in pr.list_skills(proj)}
    assert {n: s.owner for n, s in infos.items()} == {
        "linked-prov": "user", "dir-prov": "user", "fifo-prov": "user", "linked": "user",
        "huge": "user", "bad-\udcff": "elsewhere"}
    assert infos["bad-\udcff"].stage == "not managed here"
    assert not observe.is_owned(os.fsdecode(raw))
    for name in ("linked-prov", "dir-prov", "fifo-prov", "linked", "huge", "fifo-md",
                 "plain-file", "junk", "../x", "bad-\udcff"):
        view = pr.show(name, proj)
        assert view is None or view.landings == []
        assert pr.history(name, proj) == []
    assert pr.record_use(str(skills / "huge")) is not None


# -- 4. ownership comes from autoharness's own landing records -----------------------------

def _ship_provenance(env, name: str, prov_landings: list[dict] | None = None) -> str:
    """A repository-shipped skill with a well-formed provenance file naming its exact path
    and the hash of its SKILL.md — everything the skill dir alone can claim."""
    text = hand_written(env, name)
    d = os.path.realpath(env["skills"] / name)
    landings = prov_landings or [{
        "landing": "1700000000000-deadbeef", "version": 1, "action": "create", "at": 1.7e9,
        "by": "autoharness", "source": "reflector", "intent": "i-shipped", "reason": "r",
        "evidence": None, "previous": None, "skill_md": _sha(text.encode())}]
    os.makedirs(os.path.join(d, ".autoharness"))
    with open(_provenance(d), "w") as f:
        json.dump({"target": d, "landings": landings}, f)
    return d


@pytest.mark.parametrize("action,kw", [
    ("update", {}),
    ("patch", {"old": "Hand-written.", "new": "Taken over."}),
    ("archive", {}),
    ("add_file", {"path": "references/x.md", "content": "x\n"}),
    ("create", {}),
])
def test_repository_shipped_provenance_does_not_make_a_skill_owned(env, action, kw):
    """A repository can ship `.claude/skills/x/.autoharness/provenance.json` with the
    predictable target and a matching SKILL.md hash; autoharness never landed it, so its
    state dir has no landing record: the skill is not owned, and every change is rejected
    not_owned with zero writes. Such a file cannot be told from a teammate's committed
    provenance, so listing the library takes it in as learned in another home (attributed to
    that home, managed here from then on), writing nothing in the tree; this home has no
    version before the one it took in to revert to."""
    d = _ship_provenance(env, "shipped")
    assert skilltree.read_provenance(d) is not None
    assert not observe.is_owned(d)
    assert_rejected_without_writes(env, intent(action, "shipped", **kw), "not_owned")
    before = tree_digest(*env["trees"])
    info = {s.name: s for s in env["pr"].list_skills(str(env["proj"]))}["shipped"]
    assert tree_digest(*env["trees"]) == before
    assert info.owner == "autoharness" and info.learned is not None
    assert not info.learned.here and info.learned.adopted_at is not None
    out = env["pr"].revert("shipped", project_root=str(env["proj"]))
    assert out.status == "rejected" and out.findings[0].code == "no_version"


def test_replanted_provenance_of_an_archived_skill_is_not_owned(env):
    """After autoharness archived a skill, a skill put back at the same path by someone
    else — even with the genuine provenance file copied from the archive — is not owned:
    the last landing record for that path is the archive."""
    pr, proj = env["pr"], str(env["proj"])
    land(env, intent("create", "was-ours"))
    src = os.path.realpath(env["skills"] / "was-ours")
    copy = env["outside"] / "copy"
    shutil.copytree(src, copy)
    a = land(env, intent("archive", "was-ours"))
    shutil.copytree(copy, src)
    assert not observe.is_owned(src)
    assert_rejected_without_writes(env, intent("update", "was-ours"), "not_owned")
    assert pr.restore("was-ours", proj).findings[0].code == "exists"
    assert os.path.isdir(a.skill_path)


def test_forged_landing_history_match_needs_the_landing_id(env):
    """A forged provenance that copies the SKILL.md hash of a real landing at the same path
    but not its landing id is not enough: ownership needs a (landing, hash) pair that
    autoharness recorded."""
    land(env, intent("create", "real"))
    d = os.path.realpath(env["skills"] / "real")
    with open(_provenance(d)) as f:
        prov = json.load(f)
    prov["landings"][0]["landing"] = "1700000000000-forged00"
    with open(_provenance(d), "w") as f:
        json.dump(prov, f)
    assert not observe.is_owned(d)
    assert_rejected_without_writes(env, intent("update", "real"), "not_owned")


# -- 5. archive recovery only removes what still looks like ours ---------------------------

@pytest.mark.parametrize("crash_at", ["before_copy", "after_copy"])
def test_archive_recovery_leaves_a_replaced_skill_alone(env, crash_at, monkeypatch):
    """An archive interrupted by a crash (before the archive copy was made, or after it but
    before the skill was removed), whose skill dir was then replaced by a hand-written skill
    of the same name: recover() abandons the archive instead of deleting the user's skill."""
    land(env, intent("create", "arch", body="Ours.\n"))
    real_unlink_at, real_write_private = fileops.unlink_at, recovery.write_private

    def unlink_at(base, parts):
        if crash_at == "after_copy" and parts[-1] == SKILL_MD:
            raise Crash
        return real_unlink_at(base, parts)

    def write_private(path, data):
        if crash_at == "before_copy" and path.endswith("meta.json"):
            raise Crash
        return real_write_private(path, data)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fileops, "unlink_at", unlink_at)
        mp.setattr(recovery, "write_private", write_private)
        with pytest.raises(Crash):
            Promoter(PromoterConfig()).promote(intent("archive", "arch"), WINDOW,
                                               str(env["proj"]))
    shutil.rmtree(env["skills"] / "arch")
    text = hand_written(env, "arch", body="The user's own skill.\n")
    [rec] = Promoter(PromoterConfig()).recover()
    assert rec.result == "abandoned"
    assert (env["skills"] / "arch" / SKILL_MD).read_text() == text
    assert os.listdir(os.path.join(env["pr"].state, "pending")) == []
    assert [h["action"] for h in env["pr"].history("arch", str(env["proj"]))] == ["create"]


def _crash_archive_after_copy(env, name):
    """Archive `name` in a process that dies once the copy is made, before SKILL.md goes."""
    real = fileops.unlink_at

    def unlink_at(base, parts):
        if parts[-1] == SKILL_MD:
            raise Crash
        return real(base, parts)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fileops, "unlink_at", unlink_at)
        with pytest.raises(Crash):
            Promoter(PromoterConfig()).promote(intent("archive", name), WINDOW, str(env["proj"]))


def test_archive_recovery_keeps_a_file_added_after_the_copy(env):
    """After the archive copy was made, a file the user added to the skill before the
    restart is not in the copy: recover() abandons rather than delete it."""
    land(env, intent("create", "arch2"))
    _crash_archive_after_copy(env, "arch2")
    (env["skills"] / "arch2" / "references").mkdir()
    (env["skills"] / "arch2" / "references" / "mine.md").write_text("keep me\n")
    [rec] = Promoter(PromoterConfig()).recover()
    assert rec.result == "abandoned"
    assert (env["skills"] / "arch2" / "references" / "mine.md").read_text() == "keep me\n"


def test_archive_recovery_still_completes_an_untouched_archive(env):
    """The check does not get in the way: an archive crashed at either point with the skill
    untouched is completed by recover()."""
    land(env, intent("create", "arch3"))
    _crash_archive_after_copy(env, "arch3")
    [rec] = Promoter(PromoterConfig()).recover()
    assert rec.result == "completed"
    assert not (env["skills"] / "arch3").exists()
    assert [h["action"] for h in env["pr"].history("arch3", str(env["proj"]))] == \
        ["create", "archive"]
