"""Landing: what a landed skill looks like, provenance and history, review mode, archive and
restore, revert, the operator views, and an I/O failure that must roll back."""

import hashlib
import json
import os

import pytest

from claude_autoharness.daemon.persist.dirs import check_private_dir
from claude_autoharness.daemon.promote import fileops, skillfile
from claude_autoharness.daemon.promote.land import Promoter
from claude_autoharness.protocol import paths
from claude_autoharness.protocol.config import PromoterConfig
from promote_support import DESC, WINDOW, hand_written, intent, land, tree_digest


def read_skill(env, name: str, layer: str = "project") -> tuple[dict, str]:
    root = env["skills"] if layer == "project" else env["user_skills"]
    return skillfile.parse((root / name / "SKILL.md").read_text())


def test_create_lands_a_skill_claude_code_accepts(env):
    """A created skill's frontmatter parses, its name equals its directory, and the body is
    what was proposed."""
    out = land(env, intent("create", "run-checks", body="Run `make check` first.\n"))
    assert out.version == 1 and out.skill_path == str(env["skills"] / "run-checks" / "SKILL.md")
    fields, body = read_skill(env, "run-checks")
    assert fields == {"name": "run-checks", "description": DESC}
    assert body == "Run `make check` first.\n"


def test_landing_records_provenance_redacted_evidence_and_history(env):
    """The provenance file (keyed on the target path) names who, when, intent, source, reason,
    the evidence pointer and the previous version; evidence is stored redacted under its hash;
    the history store has every version."""
    window = WINDOW + json.dumps({"content": "mail jane.smith@acme-corp.io about it"}) + "\n"
    first = intent("create", "prov", evidence="mail jane.smith@acme-corp.io about it")
    assert env["pr"].promote(first, window, str(env["proj"])).status == "landed"
    second = intent("update", "prov", body="Second version.\n")
    land(env, second)
    d = env["skills"] / "prov"
    prov = json.loads((d / ".autoharness" / "provenance.json").read_text())
    assert prov["target"] == str(d)
    a, b = prov["landings"]
    assert (a["intent"], a["source"], a["by"], a["version"], a["previous"]) == \
        (first.id, "reflector", "autoharness", 1, None)
    assert b["previous"] == a["skill_md"] and b["version"] == 2
    assert b["reason"] == second.proposal.reason and b["at"] >= a["at"]
    ev = (d / a["evidence"]).read_bytes()
    assert "acme-corp" not in ev.decode() and "[REDACTED:" in ev.decode()
    assert a["evidence"].endswith(hashlib.sha256(ev).hexdigest() + ".txt")
    hist = env["pr"].history("prov", str(env["proj"]))
    assert [h["action"] for h in hist] == ["create", "update"]
    assert hist[1]["files"]["SKILL.md"] == hashlib.sha256((d / "SKILL.md").read_bytes()).hexdigest()


def test_patch_and_update_apply_to_the_live_skill(env):
    """A patch matches the body as it is on disk now (a user's edit included); an update
    replaces description and body but keeps other frontmatter keys."""
    land(env, intent("create", "live"))
    md = env["skills"] / "live" / "SKILL.md"
    md.write_text(md.read_text().replace("---\n\n", "allowed-tools: Read\n---\n\n") +
                  "Edited by hand: use `-j4`.\n")
    land(env, intent("patch", "live", old="use `-j4`", new="use `-j8`"))
    fields, body = read_skill(env, "live")
    assert body.endswith("Edited by hand: use `-j8`.\n")
    land(env, intent("update", "live", description="Use when pushing.", body="New.\n"))
    fields, body = read_skill(env, "live")
    assert fields == {"name": "live", "description": "Use when pushing.", "allowed-tools": "Read"}
    assert body == "New.\n"


def test_add_and_remove_supporting_files(env):
    """add_file writes under references/ etc. without touching SKILL.md; remove_file deletes."""
    land(env, intent("create", "files"))
    md = (env["skills"] / "files" / "SKILL.md").read_bytes()
    script = "#!/bin/sh\nmake check\n"
    land(env, intent("add_file", "files", path="scripts/check.sh", content=script))
    assert (env["skills"] / "files" / "scripts" / "check.sh").read_text() == script
    assert (env["skills"] / "files" / "SKILL.md").read_bytes() == md
    land(env, intent("remove_file", "files", path="scripts/check.sh"))
    assert not (env["skills"] / "files" / "scripts" / "check.sh").exists()
    out = env["pr"].promote(intent("remove_file", "files", path="scripts/check.sh"),
                            WINDOW, str(env["proj"]))
    assert [f.code for f in out.findings] == ["missing_file"]


def test_a_replayed_intent_lands_once(env):
    """The queue delivers at least once: promoting the same intent again reports the same
    landing and writes nothing."""
    it = intent("create", "once")
    first = land(env, it)
    before = tree_digest(*env["trees"])
    again = land(env, it)
    assert again.version == first.version == 1
    assert tree_digest(*env["trees"]) == before
    assert len(env["pr"].history("once", str(env["proj"]))) == 1


def test_create_over_an_owned_skill_is_refused(env):
    """A second create of a skill autoharness already made is `exists` (use update/patch)."""
    land(env, intent("create", "dup"))
    before = tree_digest(*env["trees"])
    out = env["pr"].promote(intent("create", "dup"), WINDOW, str(env["proj"]))
    assert [f.code for f in out.findings] == ["exists"]
    assert tree_digest(*env["trees"]) == before


def test_user_layer_lands_under_claude_config_dir(env):
    """layer=user lands in $CLAUDE_CONFIG_DIR/skills and needs no project root."""
    out = env["pr"].promote(intent("create", "everywhere", layer="user"), WINDOW, None)
    assert out.status == "landed"
    assert read_skill(env, "everywhere", "user")[0]["name"] == "everywhere"
    out = env["pr"].promote(intent("create", "nowhere"), WINDOW, None)
    assert [f.code for f in out.findings] == ["no_project_root"]


def test_review_mode_holds_then_approval_revalidates(env):
    """In review mode a passing intent is held with no writes; approve lands it; approval
    re-validates, so a hand-written skill that appeared meanwhile makes it `not_owned`."""
    pr = Promoter(PromoterConfig(mode="review"))
    ok, late = intent("create", "reviewed"), intent("create", "contested")
    before = tree_digest(*env["trees"])
    assert pr.promote(ok, WINDOW, str(env["proj"])).status == "held"
    assert pr.promote(late, WINDOW, str(env["proj"])).status == "held"
    bad = intent("create", "bad", reason="")
    assert pr.promote(bad, WINDOW, str(env["proj"])).status == "rejected"
    assert tree_digest(*env["trees"]) == before
    assert pr.approve(ok, WINDOW, str(env["proj"])).status == "landed"
    assert (env["skills"] / "reviewed" / "SKILL.md").exists()
    hand_written(env, "contested")
    out = pr.approve(late, WINDOW, str(env["proj"]))
    assert out.status == "rejected" and [f.code for f in out.findings] == ["not_owned"]


def test_revert_puts_back_an_earlier_version_as_a_new_landing(env):
    """revert with no version goes back one; with `to` to that version, supporting files
    included; each revert is itself recorded in history and provenance."""
    pr, proj = env["pr"], str(env["proj"])
    land(env, intent("create", "rev", body="One.\n"))
    land(env, intent("update", "rev", body="Two.\n"))
    land(env, intent("add_file", "rev", path="references/notes.md", content="notes\n"))
    land(env, intent("update", "rev", body="Three.\n"))
    out = pr.revert("rev", project_root=proj)
    assert out.status == "landed" and out.version == 5
    assert read_skill(env, "rev")[1] == "Two.\n"
    assert (env["skills"] / "rev" / "references" / "notes.md").exists()
    out = pr.revert("rev", to=1, project_root=proj)
    assert out.status == "landed" and read_skill(env, "rev")[1] == "One.\n"
    assert not (env["skills"] / "rev" / "references" / "notes.md").exists()
    hist = pr.history("rev", proj)
    assert [(h["action"], h.get("to")) for h in hist[-2:]] == [("revert", 3), ("revert", 1)]
    assert pr.show("rev", proj).landings[-1]["action"] == "revert"
    assert pr.revert("rev", to=99, project_root=proj).findings[0].code == "no_version"


def test_revert_and_restore_refuse_hand_written_skills(env):
    """Operator verbs obey ownership too: a hand-written skill is not reverted."""
    hand_written(env, "manual")
    before = tree_digest(*env["trees"])
    out = env["pr"].revert("manual", project_root=str(env["proj"]))
    assert out.status == "rejected"
    assert tree_digest(*env["trees"]) == before


def test_archive_moves_out_of_discovery_and_restore_brings_it_back(env):
    """archive removes the skill from the skill tree into the state dir, never overwriting an
    earlier archive of the same name; restore brings back the latest, with its provenance."""
    pr, proj = env["pr"], str(env["proj"])
    land(env, intent("create", "old", body="First life.\n"))
    a1 = land(env, intent("archive", "old"))
    assert not (env["skills"] / "old").exists()
    assert not a1.skill_path.startswith(str(env["claude"])) and os.path.isdir(a1.skill_path)
    land(env, intent("create", "old", body="Second life.\n"))
    first_archive = tree_digest(a1.skill_path)
    a2 = land(env, intent("archive", "old"))
    assert a2.skill_path != a1.skill_path and tree_digest(a1.skill_path) == first_archive
    assert [s.status for s in pr.list_skills(proj) if s.name == "old"] == ["archived", "archived"]
    out = pr.restore("old", proj)
    assert out.status == "landed"
    assert read_skill(env, "old")[1] == "Second life.\n"
    prov = json.loads((env["skills"] / "old" / ".autoharness" / "provenance.json").read_text())
    assert [x["action"] for x in prov["landings"]] == ["create", "restore"]
    land(env, intent("update", "old", body="Owned again.\n"))  # ownership came back with it
    before = tree_digest(*env["trees"])
    assert pr.restore("old", proj).findings[0].code == "exists"
    assert tree_digest(*env["trees"]) == before


def test_list_show_history_and_uses(env):
    """skills list gives name, layer, owner, created, last changed and uses (counted with
    record_use on the SKILL.md or dir); hand-written skills are listed as the user's."""
    pr, proj = env["pr"], str(env["proj"])
    land(env, intent("create", "counted"))
    pr.promote(intent("create", "mine-too", layer="user"), WINDOW, None)
    hand_written(env, "handmade")
    assert pr.record_use(str(env["skills"] / "counted" / "SKILL.md"))
    assert pr.record_use(str(env["skills"] / "counted"))
    assert pr.record_use(str(env["outside"])) is None
    by_name = {s.name: s for s in pr.list_skills(proj)}
    assert by_name["counted"].uses == 2 and by_name["counted"].owner == "autoharness"
    assert by_name["counted"].created == by_name["counted"].last_changed
    assert by_name["mine-too"].layer == "user"
    assert by_name["handmade"].owner == "user" and by_name["handmade"].created is None
    view = pr.show("counted", proj)
    assert view.files == ["SKILL.md"] and view.skill_md.startswith("---\nname: counted\n")
    assert pr.show("nope", proj) is None and pr.history("nope", proj) == []


def test_io_failure_mid_landing_rolls_back(env, monkeypatch):
    """If writing SKILL.md fails after the supporting files changed (here: a revert that
    removes one), the landing is undone: the skill is as before, nothing is pending, and the
    outcome says why."""
    land(env, intent("create", "fragile", body="First body.\n"))
    land(env, intent("add_file", "fragile", path="references/a.md", content="old\n"))
    land(env, intent("update", "fragile", body="Current body.\n"))
    before = (env["skills"] / "fragile" / "SKILL.md").read_bytes()
    real = fileops.write_at

    def failing(base, parts, data, **kw):
        if parts[-1] == "SKILL.md":
            raise OSError(28, "No space left on device")
        return real(base, parts, data, **kw)

    monkeypatch.setattr(fileops, "write_at", failing)
    out = env["pr"].revert("fragile", to=1, project_root=str(env["proj"]))
    assert out.status == "rejected" and out.findings[0].code == "io_error"
    monkeypatch.setattr(fileops, "write_at", real)
    assert (env["skills"] / "fragile" / "SKILL.md").read_bytes() == before
    assert (env["skills"] / "fragile" / "references" / "a.md").read_text() == "old\n"
    assert os.listdir(os.path.join(env["pr"].state, "pending")) == []
    hist = env["pr"].history("fragile", str(env["proj"]))
    assert [h["action"] for h in hist] == ["create", "add_file", "update"]


@pytest.mark.parametrize("layer", ["project", "user"])
def test_ambiguous_names_must_be_qualified(env, layer):
    """A name present in both layers is only reverted/shown when the layer is named."""
    pr, proj = env["pr"], str(env["proj"])
    for lay in ("project", "user"):
        pr.promote(intent("create", "both", layer=lay), WINDOW, proj)
        pr.promote(intent("update", "both", layer=lay, body=f"{lay} two.\n"), WINDOW, proj)
    assert pr.revert("both", project_root=proj).findings[0].code == "ambiguous"
    assert pr.revert("both", project_root=proj, layer=layer).status == "landed"
    assert pr.show("both", proj, layer=layer).info.layer == layer


def test_promoter_run_before_the_daemon_leaves_a_state_dir_the_daemon_accepts(home):
    """A promoter run offline (no daemon yet, state dir missing) creates the state dir and its
    parents 0700 under the usual umask, so the daemon that starts later does not refuse them."""
    old = os.umask(0o022)
    try:
        Promoter(PromoterConfig()).recover()
    finally:
        os.umask(old)
    state = paths.state_dir()
    assert os.stat(state).st_mode & 0o777 == 0o700
    check_private_dir(state)  # what the daemon checks at start; raises when open
