"""Evidence on skills, end to end through the real daemon, the real SDK and the fake Messages
API: the reflector's verdicts are grounded in the window (loaded or not, quoted verbatim, one
per skill), counted once across kill -9, shown in `skills list|show`, `status` and history;
two harmful verdicts archive a skill (restorable, held in review mode), two missed ones bring a
landed description repair from the curator; a renamed file makes a skill stale and its return
clears it; the user's own CLAUDE.md and auto memory are seen and never repeated."""

import hashlib
import json
import os
import sys
from pathlib import Path

from claude_autoharness.protocol.paths import project_slug
from evidence_support import (
    CHANGELOG,
    FOCUSED,
    MIGRATE,
    NULLS,
    Work,
    git,
    hand_written,
    history,
    reply,
    seed,
    skills,
    status,
    user_text,
    verdict,
    verdicts,
)
from fake_anthropic import tool_reply
from harness import Daemon, ctl, hook, open_fifo_writer_when_read, wait_for

STUCK = str(Path(__file__).with_name("stuck_daemon.py"))
def test_verdicts_are_grounded_in_the_window(home, project, api):
    """One window loads `focused-tests` (a Skill call) and the hand-written skill (a Read of
    its SKILL.md). The model says: focused-tests helped (accepted, counted, in history with its
    quote, in `skills show` and `status`), a second verdict on it (refused: repeated),
    migrate-first helped though never loaded (refused: not_loaded), changelog ignored with a
    quote that is not in the window (refused: unattributable), changelog-2 missed though it
    was loaded (refused: loaded), a skill that does not exist (refused: missing). The
    hand-written skill's `helped` is accepted and shown, and nothing touches it."""
    seed(project, "focused-tests", *FOCUSED)
    seed(project, "migrate-first", *MIGRATE)
    seed(project, "changelog", *CHANGELOG)
    seed(project, "changelog-two", "Use when tagging a release: bump the version file first.",
         "Bump the version file, then tag.")
    mine = hand_written(project, "by-hand", "Format with the house style.")
    w = Work(home, project)
    w.say("user", "the login test fails, fix it")
    w.load("focused-tests")
    w.load("changelog")
    w.load("changelog-two")
    w.read(mine)
    w.say("assistant", "Running only test_login first, as the skill says: it passes now.")
    followed = "Running only test_login first, as the skill says"
    api.push(reply(
        verdict("focused-tests", "helped", followed),
        verdict("focused-tests", "ignored", "the login test fails, fix it"),
        verdict("migrate-first", "helped", followed),
        verdict("changelog", "ignored", "the agent skipped the changelog entirely"),
        verdict("changelog-two", "missed", "the login test fails"),
        verdict("by-hand", "helped", "Running only test_login first"),
        verdict("no-such-skill", "missed", "the login test fails")))
    d = Daemon(home["home"])
    try:
        w.window_done(1)
        [req] = api.messages_requests
        schema = req.json["tools"][0]["input_schema"]
        assert schema["required"] == ["proposals", "feedback"]
        assert schema["properties"]["feedback"]["items"]["properties"]["verdict"]["enum"] == [
            "helped", "ignored", "harmful", "missed"]
        got = {(v["verdict"]["skill"], v["verdict"]["verdict"]): (
            v["status"], {f["code"] for f in v["findings"]}) for v in verdicts()}
        assert got == {
            ("focused-tests", "helped"): ("accepted", set()),
            ("focused-tests", "ignored"): ("rejected", {"repeated"}),
            ("migrate-first", "helped"): ("rejected", {"not_loaded"}),
            ("changelog", "ignored"): ("rejected", {"unattributable"}),
            ("changelog-two", "missed"): ("rejected", {"loaded"}),
            ("by-hand", "helped"): ("accepted", set()),
            ("no-such-skill", "missed"): ("rejected", {"missing"}),
        }
        not_loaded = next(v for v in verdicts() if v["verdict"]["skill"] == "migrate-first")
        assert "Skill call or a read of its own SKILL.md" in not_loaded["findings"][0]["message"]
        listed = skills(project)
        assert listed[("focused-tests", "live")]["feedback"] == {
            "helped": 1, "ignored": 0, "harmful": 0, "missed": 0}
        assert listed[("by-hand", "live")]["feedback"]["helped"] == 1
        assert listed[("by-hand", "live")]["stage"] == "hand-written"
        for name in ("migrate-first", "changelog", "changelog-two"):
            assert listed[(name, "live")]["feedback"] == {
                "helped": 0, "ignored": 0, "harmful": 0, "missed": 0}
        text = ctl("skills", "list", "--project", str(project)).stdout
        assert "verdicts: 1 helped " in text
        shown = json.loads(ctl("skills", "show", "focused-tests", "--project",
                               str(project), "--json").stdout)
        assert [(v["verdict"], v["quote"]) for v in shown["verdicts"]] == [("helped", followed)]
        [fb] = [e for e in history(project, "focused-tests") if e["action"] == "feedback"]
        assert fb["verdict"] == "helped" and fb["quote"] == followed
        # the totals are autoharness's skills' (the hand-written one is never judged)
        lib = wait_for(lambda: (lambda x: x if x["feedback"]["helped"] == 1 else None)(
            status()["library"]), what="status totals")
        assert lib["verdicts_refused"] == 5
        assert ("evidence (verdicts on autoharness's skills, live and archived, each on its "
                "current version): 1 helped") in ctl("status").stdout
        assert mine.read_text().endswith("Format with the house style.\n")  # never touched
    finally:
        d.stop()


def test_two_harmful_verdicts_archive_a_skill_restorably(home, project, api):
    """Two windows that load `migrate-first` and show the user correcting it: two accepted
    `harmful` verdicts (more than `helped`) archive it with reason `harmful` and the counts in
    its history; the SessionStart summary says so; `restore` brings it back with its counts
    started afresh."""
    seed(project, "migrate-first", *MIGRATE)
    w = Work(home, project)
    d = Daemon(home["home"])
    try:
        for i, jobs in ((1, 1), (2, 2)):
            w.load("migrate-first")
            w.say("user", f"no, the migration script broke the dev database again ({i})")
            api.push(reply(verdict("migrate-first", "harmful",
                                   f"the migration script broke the dev database again ({i})")))
            w.window_done(jobs)
        wait_for(lambda: ("migrate-first", "archived") in skills(project), timeout=60,
                 what="harmful archive")
        arch = skills(project)[("migrate-first", "archived")]
        assert arch["reason"] == "harmful" and arch["feedback"]["harmful"] == 2
        assert not (project / ".claude/skills/migrate-first").exists()
        [a] = [e for e in history(project, "migrate-first") if e["action"] == "archive"]
        assert a["retired"] == "harmful"
        assert a["reason"] == "harmful: 2 harmful and 0 helped verdicts"
        assert status()["library"]["archived_by_reason"] == {"harmful": 1}
        s2 = Work(home, project, sid="sess-ev-2")
        out = hook(s2.ev("SessionStart", source="startup")).stdout.decode()
        ctx = json.loads(out)["hookSpecificOutput"]["additionalContext"]
        assert "archived migrate-first [project] (harmful: 2 harmful and 0 helped" in ctx
        r = ctl("skills", "restore", "migrate-first", "--project", str(project))
        assert r.returncode == 0, r.stdout + r.stderr
        back = skills(project)[("migrate-first", "live")]
        assert back["stage"] == "probation" and back["feedback"]["harmful"] == 0
    finally:
        d.stop()


def test_review_mode_holds_a_harmful_archive_for_the_user(home, project, api, monkeypatch):
    """In review mode the harmful archive waits as a held `lifecycle` intent quoting a
    grounded harmful verdict; the skill stays live until `queue approve` archives it."""
    seed(project, "migrate-first", *MIGRATE)
    monkeypatch.setenv("AUTOHARNESS_PROMOTER_MODE", "review")
    w = Work(home, project)
    d = Daemon(home["home"])
    try:
        for i in (1, 2):
            w.load("migrate-first")
            w.say("user", f"stop, that migration step is wrong here ({i})")
            api.push(reply(verdict("migrate-first", "harmful",
                                   f"that migration step is wrong here ({i})")))
            w.window_done(i)
        held = wait_for(lambda: [i for i in json.loads(ctl("queue", "list", "--json").stdout)
                                 if i["source"] == "lifecycle"], timeout=60, what="held")
        assert [(i["status"], i["proposal"]["action"]) for i in held] == [("held", "archive")]
        assert ("migrate-first", "live") in skills(project)
        [mark] = [e for e in history(project, "migrate-first") if e["action"] == "held"]
        assert mark["reason"] == "harmful: 2 harmful and 0 helped verdicts; held for review"
        r = ctl("queue", "approve", held[0]["id"])
        assert r.returncode == 0, r.stdout + r.stderr
        assert skills(project)[("migrate-first", "archived")]["reason"] == "harmful"
    finally:
        d.stop()


def test_two_missed_verdicts_bring_a_landed_description_repair(home, project, api):
    """Two windows where the changelog came up and `changelog` was not loaded: two accepted
    `missed` verdicts; the lifecycle asks the curator (reason in history) with the missed
    quotes; its `update` of the description, quoting a missed window, lands and starts the
    repaired text's count afresh."""
    seed(project, "changelog", *CHANGELOG)
    seed(project, "focused-tests", *FOCUSED)
    w = Work(home, project)
    d = Daemon(home["home"])
    quotes = ["write the release notes for 2.3 from the merged PRs",
              "draft the release notes for 2.4 from what got merged"]
    repaired = ("Use when the changelog or release notes are due: list merged pull "
                "requests since the last tag.")
    api.push(*[reply(verdict("changelog", "missed", q)) for q in quotes],
             tool_reply({"feedback": [], "proposals": [dict(  # the curator's answer
                 NULLS, action="update", skill="changelog", layer="project",
                 reason="it was missed when the user asked for release notes",
                 evidence=quotes[1], description=repaired, body=CHANGELOG[1])]}))
    try:
        for i, q in enumerate(quotes, 1):
            w.say("user", q)
            w.say("assistant", "Listing the merged pull requests by hand.")
            w.window_done(i)
        md = project / ".claude/skills/changelog/SKILL.md"
        wait_for(lambda: repaired in md.read_text(), timeout=60, what="description repair")
        user = user_text(api.messages_requests[-1])
        assert quotes[0] in user and quotes[1] in user and "<missed_" in user
        asked = [e for e in history(project, "changelog") if e["action"] == "repair_asked"]
        assert len(asked) == 1 and "missed 2 times" in asked[0]["reason"]
        # the repaired text starts a new count; the misses stay in its history
        assert skills(project)[("changelog", "live")]["feedback"]["missed"] == 0
        shown = json.loads(ctl("skills", "show", "changelog", "--project", str(project),
                               "--json").stdout)
        assert [(v["verdict"], v["current"]) for v in shown["verdicts"]] == [
            ("missed", False), ("missed", False)]
    finally:
        d.stop()


def test_a_renamed_file_makes_a_skill_stale_and_its_return_clears_it(home, project, api,
                                                                     monkeypatch):
    """`migrate-first` names `scripts/migrate.sh`. `git mv` it away: the next lifecycle pass
    marks the skill stale (skills list, --json `stale`, SessionStart, history, curator request,
    `curate --dry-run`), a hand-written skill naming it is shown stale but never judged; moved
    back, the next pass clears it; gone for `stale_after_turns` turns, it is archived
    `stale` (and restorable)."""
    monkeypatch.setenv("AUTOHARNESS_LIBRARY_STALE_AFTER_TURNS", "2")
    git(project, "init", "-q")
    git(project, "add", "scripts/migrate.sh")
    git(project, "commit", "-qm", "init")
    seed(project, "migrate-first", *MIGRATE)
    hand_written(project, "by-hand", "See [the script](scripts/migrate.sh).")
    w = Work(home, project)
    d = Daemon(home["home"])
    try:
        def stop():
            assert hook(w.ev("Stop")).returncode == 0

        stop()
        assert skills(project)[("migrate-first", "live")]["stale"] == []
        git(project, "mv", "scripts/migrate.sh", "scripts/migrate-db.sh")
        stop()
        wait_for(lambda: skills(project)[("migrate-first", "live")]["stale"], timeout=90,
                 what="stale")
        listed = skills(project)
        assert listed[("migrate-first", "live")]["stale"] == ["scripts/migrate.sh"]
        assert listed[("by-hand", "live")]["stale"] == ["scripts/migrate.sh"]
        text = ctl("skills", "list", "--project", str(project)).stdout
        assert "stale: names missing scripts/migrate.sh" in text
        plan = json.loads(ctl("curate", "--dry-run", "--json", "--layer", "project",
                              "--project", str(project)).stdout)
        assert plan["stale"] == {"migrate-first": ["scripts/migrate.sh"]}
        wait_for(lambda: any('stale="scripts/migrate.sh"' in user_text(r)
                             for r in api.messages_requests), timeout=60,
                 what="curator sent the stale skill")
        s2 = Work(home, project, sid="sess-ev-2")
        ctx = json.loads(hook(s2.ev("SessionStart", source="startup")).stdout.decode())
        ctx = ctx["hookSpecificOutput"]["additionalContext"]
        assert "stale migrate-first [project]: names missing scripts/migrate.sh" in ctx

        git(project, "mv", "scripts/migrate-db.sh", "scripts/migrate.sh")
        stop()
        wait_for(lambda: not skills(project)[("migrate-first", "live")]["stale"], timeout=90,
                 what="cleared")
        marks = [e["action"] for e in history(project, "migrate-first")
                 if e["action"] in ("stale", "fresh")]
        assert marks == ["stale", "fresh"]

        git(project, "rm", "-q", "scripts/migrate.sh")
        for _ in range(3):
            stop()
        wait_for(lambda: ("migrate-first", "archived") in skills(project), timeout=90,
                 what="stale archive")
        assert skills(project)[("migrate-first", "archived")]["reason"] == "stale"
        assert ("by-hand", "live") in skills(project)  # shown, never judged
        r = ctl("skills", "restore", "migrate-first", "--project", str(project))
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        d.stop()


def test_kill9_between_answer_and_intake_counts_each_verdict_once(home, project, api):
    """The daemon is killed after the model answered and before intake (its job blocked right
    there): the restarted daemon asks again and the verdict counts once. Killed again after
    intake, before the promoter grounds the verdict: no new model call, and it counts once."""
    seed(project, "focused-tests", *FOCUSED)
    fifo = home["tmp"] / "never-written"
    os.mkfifo(fifo)
    w = Work(home, project)
    followed = "Running only test_login first, as the skill says"
    w.load("focused-tests")
    w.say("assistant", followed + ".")
    api.push(reply(verdict("focused-tests", "helped", followed)),
             reply(verdict("focused-tests", "helped", followed)))
    d = Daemon(home["home"], argv=[sys.executable, STUCK, str(fifo), "answered"])
    writer = None
    try:
        for _ in range(2):
            hook(w.ev("PreToolUse", tool_name="Bash", tool_input={"command": "ls"}))
        hook(w.ev("Stop"))
        writer = open_fifo_writer_when_read(fifo)
        assert len(api.messages_requests) == 1
        d.kill9()
        os.close(writer)
        writer = None
        d = Daemon(home["home"])
        wait_for(lambda: status()["jobs"]["done"] == 1, timeout=60, what="job after restart")
        wait_for(lambda: skills(project)[("focused-tests", "live")]["feedback"]["helped"] == 1,
                 timeout=60, what="counted")
        assert len(api.messages_requests) == 2
        assert len(verdicts()) == 1
        d.stop()

        w.load("focused-tests")
        w.say("assistant", "Again: running only test_api first, as the skill says.")
        api.push(reply(verdict("focused-tests", "helped", "running only test_api first")))
        d = Daemon(home["home"], argv=[sys.executable, STUCK, str(fifo), "grounding"])
        for _ in range(2):
            hook(w.ev("PreToolUse", tool_name="Bash", tool_input={"command": "ls"}))
        hook(w.ev("Stop"))
        writer = open_fifo_writer_when_read(fifo)
        d.kill9()
        os.close(writer)
        writer = None
        d = Daemon(home["home"])
        wait_for(lambda: skills(project)[("focused-tests", "live")]["feedback"]["helped"] == 2,
                 timeout=60, what="second verdict counted")
        assert len(api.messages_requests) == 3  # no model call after intake
        assert [v["status"] for v in verdicts()] == ["accepted", "accepted"]
        fb = [e for e in history(project, "focused-tests") if e["action"] == "feedback"]
        assert len(fb) == 2
    finally:
        if writer is not None:
            os.close(writer)
        d.stop()


def test_the_users_own_memory_is_seen_and_not_repeated(home, project, api):
    """The project's CLAUDE.md and the auto memory (MEMORY.md and a topic file) go to the
    reflector as a bounded index beside the skills; a `create` repeating a lesson from either
    is refused as a duplicate naming where it is kept; those files are never written."""
    (project / "CLAUDE.md").write_text(
        "# House rules\n\n- Always run make lint before committing: the CI rejects unformatted "
        "code.\n")
    mem = home["claude"] / "projects" / project_slug(str(project)) / "memory"
    mem.mkdir(parents=True)
    (mem / "MEMORY.md").write_text("- [Deploys](deploys.md) — how this project deploys\n")
    (mem / "deploys.md").write_text(
        "---\nname: deploys\ndescription: Deploy with the blue green script, never push to "
        "production directly from a laptop.\ntype: project\n---\n\nDeploy via CI.\n")
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest()
              for p in (project / "CLAUDE.md", mem / "MEMORY.md", mem / "deploys.md")}
    w = Work(home, project)
    w.say("user", "lint failed in CI again, remember to lint before committing")
    create = dict(NULLS, action="create", skill="lint-before-commit", layer="project",
                  reason="CI rejected unformatted code",
                  evidence="remember to lint before committing",
                  description="Use when committing: run make lint before committing, the CI "
                              "rejects unformatted code.", body="Run `make lint`.")
    deploy = dict(create, skill="deploys", evidence="lint failed in CI again",
                  description="Use when deploying the project.", body="Deploy via CI.")
    api.push(reply(proposals=[create, deploy]))
    d = Daemon(home["home"])
    try:
        w.window_done(1)
        wait_for(lambda: all(i["status"] != "queued" for i in json.loads(
            ctl("queue", "list", "--json").stdout)), timeout=60, what="promoted")
        system = json.dumps(api.messages_requests[0].json["system"])
        assert "What the user already keeps" in system
        assert "[CLAUDE.md (project)] Always run make lint" in system
        assert "[memory/deploys.md] Deploy with the blue green script" in system
        got = {i["proposal"]["skill"]: i for i in json.loads(
            ctl("queue", "list", "--json").stdout)}
        for name, where in (("lint-before-commit", "CLAUDE.md (project)"),
                            ("deploys", "memory/deploys.md")):
            assert got[name]["status"] == "rejected"
            [f] = got[name]["findings"]
            assert f["code"] == "duplicate" and where in f["message"]
        after = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in before}
        assert after == before
    finally:
        d.stop()


def test_a_curator_run_archives_at_most_its_share_and_its_feedback_is_grounded(home, project,
                                                                               api):
    """Four project skills, a share of 25 %: of three well-quoted archives the curator
    proposes, one lands and two are refused (`archive_share`, naming the setting); its verdict
    is refused (the curator sees skills, not work: it gives no verdicts);
    `curate --dry-run` queued nothing."""
    bodies = {"alpha-one": "Alpha rule one applies.", "beta-two": "Beta rule two applies.",
              "gamma-three": "Gamma rule three applies.", "delta-four": "Delta rule four."}
    for i, (name, body) in enumerate(bodies.items()):
        seed(project, name, f"Use when topic {name} number {i} comes up in review.", body)
    archives = [dict(NULLS, action="archive", skill=n, layer="project", reason="obsolete",
                     evidence=bodies[n]) for n in ("alpha-one", "beta-two", "gamma-three")]
    api.push(tool_reply({"proposals": archives, "feedback": [
        verdict("delta-four", "helped", "Delta rule four.")]}))
    d = Daemon(home["home"])
    try:
        r = ctl("curate", "--dry-run", "--layer", "project", "--project", str(project))
        assert r.returncode == 0 and "nothing was done" in r.stdout, r.stderr
        assert "a curator run would look at 4 skills of the project layer;" in r.stdout
        assert status()["jobs"]["by_kind"].get("curate") is None
        assert ctl("curate", "--layer", "project", "--project", str(project)).returncode == 0
        wait_for(lambda: len(json.loads(ctl("queue", "list", "--json").stdout)) == 3
                 and all(i["status"] != "queued"
                         for i in json.loads(ctl("queue", "list", "--json").stdout))
                 and verdicts() and verdicts()[0]["status"] != "queued", timeout=60,
                 what="curator intents and verdict")
        got = {i["proposal"]["skill"]: (i["status"], [f["code"] for f in i["findings"]])
               for i in json.loads(ctl("queue", "list", "--json").stdout)}
        assert sorted(s for s, _ in got.values()) == ["landed", "rejected", "rejected"]
        assert all(codes == ["archive_share"] for s, codes in got.values() if s == "rejected")
        [v] = verdicts()
        assert v["source"] == "curator" and [f["code"] for f in v["findings"]] == ["curator"]
    finally:
        d.stop()
