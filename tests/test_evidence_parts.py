"""The parts of evidence on their own: the tool schema, which skills a window shows loaded,
grounding, the lifecycle's use of the counts (harmful, stale, graduation, a pass's share),
the paths a skill names and the tree they are checked in, the user's memory lessons, and the
intent file keeping verdicts across a compaction."""

import json
import os

import msgspec

from claude_autoharness.daemon.intents import IntentQueue
from claude_autoharness.daemon.promote import feedback, loads, memory, stale
from claude_autoharness.daemon.promote.lifecycle import SkillCounts, bounded, decide, stage
from claude_autoharness.daemon.proposals import Verdict, VerdictRecord
from claude_autoharness.daemon.reflect.prompt import build_request, tool_schema
from fake_anthropic import strict_schema_problems
from promote_support import EVIDENCE, GH_TOKEN, WINDOW, intent


def test_the_tool_schema_takes_feedback_and_stays_strict():
    """`feedback` is a required list of {skill, layer, verdict, evidence}, every property
    required, verdict one of four; strict mode finds nothing to object to."""
    schema = tool_schema(3)
    assert schema["required"] == ["proposals", "feedback"]
    item = schema["properties"]["feedback"]["items"]
    assert item["required"] == ["skill", "layer", "verdict", "evidence"]
    assert item["additionalProperties"] is False
    assert item["properties"]["verdict"]["enum"] == ["helped", "ignored", "harmful", "missed"]
    assert strict_schema_problems(schema) == []
    p = build_request("{}", "", [], guidance=None, max_intents=3,
                      memory=[{"source": "CLAUDE.md (user)", "text": "Prefer tabs."}])
    assert "Giving none is normal" in p.system_blocks[0]
    assert p.system_blocks[-1].endswith("- [CLAUDE.md (user)] Prefer tabs.")


def _tool(name, args):
    return json.dumps({"type": "assistant", "message": {"content": [
        {"type": "tool_use", "id": "t", "name": name, "input": args}]}})


def test_loads_are_the_agents_own_calls_resolved_per_layer(tmp_path):
    """A Skill call or a Read of a SKILL.md is a load, also in a clipped record JSON cannot
    parse; a mention in text or a Read of another file is not. A name resolves as Claude Code
    resolves it (the user's skill before the project's; a plugin's `tools:x` is none of
    ours); a read loads the skill whose own SKILL.md it is, in its own layer only."""
    user, proj = tmp_path / "home/skills", tmp_path / "p"
    for d in (user / "fmt-code", proj / ".claude/skills/fmt-code", proj / ".claude/skills/run",
              proj / ".claude/skills/lint-it", proj / "vendor/lint-it",
              proj / ".claude/skills/deploy-check"):
        d.mkdir(parents=True)
        (d / "SKILL.md").write_text("---\nname: x\ndescription: y\n---\n")
    clipped = _tool("Skill", {"skill": "run"})
    window = "\n".join([
        _tool("Skill", {"skill": "fmt-code"}),
        _tool("Skill", {"skill": "tools:deploy-check"}),
        _tool("Read", {"file_path": str(proj / "vendor/lint-it/SKILL.md")}),
        _tool("Read", {"file_path": "/p/docs/SKILL.txt"}),
        json.dumps({"type": "user", "message": {"content": "use the Skill lint-it and "
                                                           "read lint-it/SKILL.md"}}),
        clipped[:clipped.index('"run"') + 5] + "…[clipped 400 bytes]",
    ])
    refs = loads.refs(window)
    assert refs == ["skill:fmt-code", "skill:tools:deploy-check",
                    "read:" + str(proj / "vendor/lint-it/SKILL.md"), "skill:run"]
    layers = loads.Layers(user=str(user), project=str(proj / ".claude/skills"))
    assert loads.resolve(refs, layers) == {("user", "fmt-code"), ("project", "run")}
    read_own = ["read:" + str(proj / ".claude/skills/fmt-code/SKILL.md")]
    assert loads.resolve(read_own, layers) == {("project", "fmt-code")}
    assert loads.resolve(["read:" + str(user / "fmt-code/SKILL.md")], layers) == {
        ("user", "fmt-code")}


def test_grounding_refuses_with_a_reason():
    def ground(v, s="a", window="{}", exists=True, loaded=True, before=False):
        found = feedback.ground(v, s, "project", window, exists=exists, loaded=loaded,
                                loaded_before=before)
        return found[0].code if found else None

    assert ground("helped") is None and ground("missed", loaded=False) is None
    assert [ground("helped", loaded=False), ground("missed"),
            ground("missed", loaded=False, before=True), ground("helped", exists=False),
            ground("helped", window=None), ground("liked")] == [
        "not_loaded", "loaded", "loaded_before", "missing", "no_window", "verdict"]


def _counts(entries):
    return feedback.counts(entries), feedback.missed_quotes(entries), feedback.needs_repair(
        entries)


def _fb(verdict, quote, version):
    return {"action": "feedback", "verdict": verdict, "quote": quote, "version": version}


def test_counts_are_per_version_and_repairs_are_asked_once():
    """Verdicts count for the version their window saw: an update starts a new count (a
    verdict on the old text grounded after it lands is the old text's), a restore too; every
    verdict stays in `verdicts` with its version. Two misses ask for one repair."""
    entries = [{"action": "create", "version": 1, "at": 10.0},
               *[_fb(v, q, 1) for v, q in (("helped", "h"), ("missed", "m1"), ("missed", "m2"))]]
    c, missed, due = _counts(entries)
    assert c == {"helped": 1, "ignored": 0, "harmful": 0, "missed": 2} and due
    assert missed == ["m1", "m2"]
    asked = entries + [{"action": feedback.REPAIR_ASKED, "version": 1, "at": 20.0}]
    assert not feedback.needs_repair(asked) and feedback.missed_quotes(asked) == ["m1", "m2"]
    assert feedback.repair_asked(asked)
    repaired = asked + [{"action": "update", "version": 2, "at": 50.0}]
    assert feedback.judged_version(repaired, 40.0) == 1
    assert feedback.judged_version(repaired, 60.0) == feedback.judged_version(repaired, None) == 2
    late = repaired + [_fb("harmful", "old text", 1), _fb("harmful", "new text", 2)]
    assert feedback.missed_quotes(late) == [] and not feedback.repair_asked(late)
    assert feedback.counts(late) == {"helped": 0, "ignored": 0, "harmful": 1, "missed": 0}
    assert [(v["quote"], v["version"], v["current"]) for v in feedback.verdicts(late)] == [
        ("h", 1, False), ("m1", 1, False), ("m2", 1, False), ("old text", 1, False),
        ("new text", 2, True)]
    restored = late + [{"action": "archive", "version": 3}, {"action": "restore", "version": 4}]
    assert feedback.counts(late + [{"action": "archive", "version": 3}])["harmful"] == 1
    assert feedback.counts(restored) == dict.fromkeys(feedback.VERDICTS, 0)
    assert feedback.repair_findings(asked, "update", "m2", "x") == []
    assert [f.code for f in feedback.repair_findings(asked, "update", "h", "x")] == [
        "repair_unquoted"]
    assert feedback.repair_findings(repaired, "update", "h", "x") == []


def sk(name, *, uses=1, turns=100, helped=0, harmful=0, stale_turns=None, owned=True):
    return SkillCounts(name=name, layer="project", scope="/p", owned=owned, uses=uses,
                       turns=turns, helped=helped, harmful=harmful, stale_turns=stale_turns)


def test_the_lifecycle_uses_the_evidence():
    """Two harmful and more than helped: archived `harmful`, even on probation; two harmful
    against two helped: kept, but not graduated; stale past stale_after_turns: `stale`; a
    stale skill never graduates; hand-written skills are never judged."""
    def why(skills):
        return [(d.name, d.reason) for d in decide(
            skills, maturity_turns=50, capacity_project=20, capacity_user=10,
            stale_after_turns=20)]
    assert why([sk("bad", harmful=2, turns=3), sk("even", harmful=2, helped=2),
                sk("old-paths", stale_turns=20), sk("new-stale", stale_turns=19),
                sk("mine", harmful=5, stale_turns=99, owned=False)]) == [
        ("bad", "harmful"), ("old-paths", "stale")]
    assert stage(sk("even", harmful=2, helped=2), 50) == "graduated"
    assert stage(sk("worse", harmful=1), 50) == "probation"
    assert stage(sk("new-stale", stale_turns=0), 50) == "probation"
    assert stage(sk("unused", uses=0), 50) == "dormant"


def test_one_pass_archives_at_most_a_share_of_a_layer_most_urgent_first():
    """Eight skills, four due (dormant, capacity, harmful, stale) at a share of 25 %: two
    archives, harmful then stale; the rest wait for the next pass."""
    skills = [sk(f"s{i}") for i in range(4)] + [
        sk("h", harmful=3), sk("st", stale_turns=30), sk("dorm", uses=0), sk("cap")]
    every = decide(skills, maturity_turns=50, capacity_project=20, capacity_user=10)
    assert {d.reason for d in every} == {"harmful", "stale", "dormant"}
    kept = bounded(every, skills, 0.25)
    assert [d.reason for d in kept] == ["harmful", "stale"]
    assert len(bounded(every, skills[:1] + skills[4:5], 0.25)) == 1  # at least one


def test_named_paths_are_repository_files_only():
    md = ("Run `scripts/migrate.sh` then read [the API](docs/api.md#auth) and "
          "[checklist](references/checklist.md). Not `make lint`, `-k NAME`, `/etc/passwd`, "
          "`../up.sh`, `https://x.io/a.md`, `*.py`, `setup.py`, `src/`.")
    assert stale.named_paths(md) == ["scripts/migrate.sh", "docs/api.md",
                                     "references/checklist.md"]


def test_the_tree_is_the_projects_and_nothing_outside_it(tmp_path):
    """Without git the file system under the root decides; a path through a symlink leading
    out of the root is not checked (neither present nor missing); a skill's own supporting
    file is the skill's."""
    root, outside = tmp_path / "proj", tmp_path / "outside"
    (root / "docs").mkdir(parents=True)
    (root / "docs/api.md").write_text("x")
    outside.mkdir()
    (outside / "gone.md").write_text("x")
    os.symlink(outside, root / "out")
    skill = tmp_path / "skill"
    (skill / "references").mkdir(parents=True)
    (skill / "references/checklist.md").write_text("x")
    tree = stale.Tree(str(root))
    assert tree.exists("docs/api.md") is True and tree.exists("docs/old.md") is False
    assert tree.exists("out/gone.md") is None
    md = "`docs/api.md` `docs/old.md` `out/gone.md` [c](references/checklist.md)"
    assert stale.missing_paths(str(skill), md, tree) == ["docs/old.md"]


def test_memory_lessons_and_the_near_test(home, tmp_path):
    """CLAUDE.md paragraphs and list items are lessons (headings and code left out); a topic
    file's description is one, with its name; a new skill near either is found, a different
    one is not; a FIFO named CLAUDE.md is skipped without blocking."""
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "CLAUDE.md").write_text("# Rules\n\n- Always run make lint before committing.\n"
                                    "```\nmake lint\n```\nKeep PRs small and focused on one "
                                    "change.\n")
    os.mkfifo(home["claude"] / "CLAUDE.md")
    found = memory.lessons(str(proj))
    assert [x.text for x in found] == ["Always run make lint before committing.",
                                       "Keep PRs small and focused on one change."]
    assert memory.near_lesson("lint", "Use when committing: run make lint before committing.",
                              found).source == "CLAUDE.md (project)"
    assert memory.near_lesson("db-reset", "Use when the database is stuck: reset it.",
                              found) is None


def test_verdicts_survive_compaction_and_reintake_adds_nothing(home, tmp_path):
    """Verdicts are recorded with the job's intents, one per (job, verdict); intake again
    (a crash before the job was marked done) adds nothing; a compaction keeps them, with
    their status."""
    path = str(tmp_path / "intents.jsonl")
    q = IntentQueue(path)
    q.load()
    raw = {"skill": "s", "layer": "project", "verdict": "helped", "evidence": EVIDENCE}
    prop = msgspec.to_builtins(intent("create", "x").proposal)
    for _ in range(2):
        q.intake("job-1", "s1", "reflector", [prop], WINDOW, None, 3, raw_feedback=[raw])
    [v] = q.verdicts()
    assert v.status == "queued" and q.job_recorded("job-1") and not q.job_recorded("job-2")
    q.update_verdict(v.id, "accepted")
    q.compact()
    again = IntentQueue(path)
    again.load()
    assert [(x.id, x.status) for x in again.verdicts()] == [(v.id, "accepted")]
    assert len(again.list()) == 1


def test_grounding_twice_records_once(env):
    """A verdict grounded again (the queue's update lost to a crash) is accepted without a
    second history entry."""
    pr, proj = env["pr"], env["proj"]
    assert pr.promote(intent("create", "run-tests"), WINDOW, str(proj)).status == "landed"
    window = _tool("Skill", {"skill": "run-tests"}) + "\n" + WINDOW
    rec = VerdictRecord(id="v-1", source="reflector", created_at=0.0, job_id="j",
                        project_root=str(proj),
                        verdict=Verdict(skill="run-tests", layer="project", verdict="helped",
                                        evidence=EVIDENCE))
    assert pr.ground_feedback(rec, window) == ("accepted", [])
    assert pr.ground_feedback(rec, window) == ("accepted", [])
    [info] = [i for i in pr.list_skills(str(proj)) if i.name == "run-tests"]
    assert info.feedback.helped == 1


def test_a_verdict_quoting_a_secret_is_refused_and_stored_redacted(tmp_path):
    """The secret check of proposals applies to verdict quotes: refused `safe/secret`, and the
    secret never reaches the intent file."""
    path = tmp_path / "intents.jsonl"
    q = IntentQueue(str(path))
    q.load()
    window = f"deploy with token {GH_TOKEN} now"
    raw = {"skill": "deploy", "layer": "project", "verdict": "harmful",
           "evidence": f"deploy with token {GH_TOKEN}"}
    q.intake("job-s", "s1", "reflector", [], window, None, 3, raw_feedback=[raw])
    [v] = q.verdicts()
    assert v.status == "rejected" and "secret" in {f.code for f in v.findings}
    assert GH_TOKEN not in v.verdict.evidence and GH_TOKEN not in path.read_text()


def test_what_a_skill_says_exists_is_what_is_checked(tmp_path):
    """Paths the skill says to make, URLs and (unless the project has such a directory)
    host-like names are not checked; a path made in one place and used in another is not
    either; the rest missing from the tree are."""
    md = ("Clone `github.com/acme/tool.git` (see https://example.com/docs/x.md). Create\n"
          "`docs/adr/0001-title.md` from the template, then run `scripts/migrate.sh`.\n"
          "Write the report to `out/report.json`. `dist/bundle.js` is generated by make.\n"
          "Read [the API](docs/api.md) and `src/app/main.py`; create `notes/todo.md`, "
          "then edit `notes/todo.md`.\n")
    assert stale.named_paths(md) == ["github.com/acme/tool.git", "scripts/migrate.sh",
                                     "src/app/main.py", "docs/api.md"]
    root = tmp_path / "p"
    (root / "docs").mkdir(parents=True)
    (root / "docs/api.md").write_text("x")
    tree = stale.Tree(str(root))
    assert stale.missing_paths(str(tmp_path / "skill"), md, tree) == [
        "scripts/migrate.sh", "src/app/main.py"]
    (root / "github.com/acme").mkdir(parents=True)  # the project's own directory of that name
    assert "github.com/acme/tool.git" in stale.missing_paths(str(tmp_path / "skill"), md,
                                                             stale.Tree(str(root)))


def test_in_a_git_work_tree_what_exists_is_there(tmp_path):
    """Tracked files count, untracked and ignored ones that exist too (a build output); a
    tracked file deleted from the work tree (a plain `rm`, not staged) is gone."""
    import subprocess

    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    for name in ("docs/api.md", "docs/old.md", ".gitignore"):
        (root / name).write_text("build/\n" if name == ".gitignore" else "x")
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(root), *cmd], check=True, env=env)
    (root / "docs/old.md").unlink()
    (root / "docs/new.md").write_text("x")
    (root / "build").mkdir()
    (root / "build/out.js").write_text("x")
    tree = stale.Tree(str(root))
    assert [tree.exists(p) for p in ("docs/api.md", "docs/old.md", "docs/new.md",
                                     "build/out.js", "docs")] == [True, False, True, True, True]
