"""Verdicts count once per piece of work, for the skill that was loaded, end to end through the
real daemon, the real SDK and the fake Messages and Batches API: a record judged live is not
judged again by `replay --batch`, a live `replay` or `/learn`, and a window with nothing new
costs no model call; a load is of the skill Claude Code resolves (the user's before the
project's; a vendored SKILL.md is no skill of ours); `missed` needs no load earlier in the
session, the curator gives no verdicts, and a repair quotes a window where the skill was
missed."""

import json

import pytest

from evidence_support import (
    CHANGELOG,
    FOCUSED,
    NULLS,
    Work,
    reply,
    seed,
    skills,
    status,
    verdict,
    verdicts,
)
from fake_anthropic import tool_reply
from harness import Daemon, ctl, hook, wait_for

FOLLOWED = "Running only test_login first, as the skill says"


@pytest.fixture
def batching(monkeypatch):
    for k, v in {"AUTOHARNESS_REFLECTOR_BATCH_POLL_S": "0.05",
                 "AUTOHARNESS_REFLECTOR_BATCH_POLL_MAX_S": "0.2"}.items():
        monkeypatch.setenv(k, v)


def bash(w, command="ls"):
    """An agent's Bash call in the transcript (a replay turns it into a PreToolUse)."""
    w.n += 1
    w.record("assistant", [{"type": "tool_use", "id": f"toolu_{w.n}", "name": "Bash",
                            "input": {"command": command}}])


def followed_the_skill(w):
    w.say("user", "the login test fails, fix it")
    w.load("focused-tests")
    bash(w, "pytest -k test_login")
    bash(w, "pytest")
    w.say("assistant", FOLLOWED + ": it passes now.")


def helped(project):
    return skills(project)[("focused-tests", "live")]["feedback"]["helped"]


def settled():
    wait_for(lambda: status()["jobs"]["pending"] + status()["jobs"]["running"] == 0,
             timeout=60, what="jobs done")
    wait_for(lambda: all(v["status"] != "queued" for v in verdicts()), timeout=60,
             what="verdicts grounded")


def test_a_record_judged_live_is_not_judged_again_by_any_path(home, project, api, batching):
    """A live window is judged `helped` once. The same transcript then goes through
    `replay --batch` (all its records reflected: no window queued, nothing sent), a live
    `replay` (its window has nothing new: no model call) and `/learn` with nothing new
    (the model is asked, but its verdict quotes records judged before: refused `judged`).
    The count stays 1."""
    seed(project, "focused-tests", *FOCUSED)
    w = Work(home, project)
    followed_the_skill(w)
    api.route = lambda params: reply(verdict("focused-tests", "helped", FOLLOWED))
    d = Daemon(home["home"])
    try:
        w.window_done(1)
        assert helped(project) == 1
        calls = len(api.messages_requests)
        r = ctl("replay", "--batch", str(w.transcript), "--project", str(project),
                "--wait", "20")
        assert r.returncode == 0, r.stderr
        assert "0 window(s) queued" in r.stdout and "1 already reflected" in r.stdout, r.stdout
        assert api.batch_creates == []
        r = ctl("replay", str(w.transcript), "--project", str(project), "--wait", "60")
        assert r.returncode == 0, r.stdout + r.stderr
        settled()
        assert len(api.messages_requests) == calls  # nothing new: no model call
        r = ctl("learn", "--session", w.sid, "what made the login fix quick?")
        assert r.returncode == 0, r.stderr
        job = r.stdout.split("queued learn job ")[1].split()[0]
        wait_for(lambda: any(v["job_id"] == job for v in verdicts()), timeout=60,
                 what="the learn job's verdict")
        settled()
        assert len(api.messages_requests) == calls + 1
        [v] = [v for v in verdicts() if v["job_id"] == job]
        assert [f["code"] for f in v["findings"]] == ["judged"]
        assert helped(project) == 1
    finally:
        d.stop()


def test_a_batched_window_is_not_judged_again_live(home, project, api, batching):
    """A backlog transcript reflected through `replay --batch` counts its verdict once; a
    live `replay` of the same transcript afterwards finds nothing new and asks no model."""
    seed(project, "focused-tests", *FOCUSED)
    old = Work(home, project, sid="sess-backlog")
    followed_the_skill(old)
    api.route = lambda params: reply(verdict("focused-tests", "helped", FOLLOWED))
    d = Daemon(home["home"])
    try:
        r = ctl("replay", "--batch", str(old.transcript), "--project", str(project),
                "--wait", "60")
        assert r.returncode == 0 and "1 window(s) queued" in r.stdout, r.stdout + r.stderr
        wait_for(lambda: helped(project) == 1, timeout=60, what="the batch's verdict counted")
        assert len(api.batch_creates) == 1
        r = ctl("replay", str(old.transcript), "--project", str(project), "--wait", "60")
        assert r.returncode == 0, r.stdout + r.stderr
        settled()
        assert api.messages_requests == []
        assert helped(project) == 1
    finally:
        d.stop()


def by_layer(project):
    r = ctl("skills", "list", "--json", "--project", str(project))
    assert r.returncode == 0, r.stderr
    return {(s["name"], s["layer"]): s for s in json.loads(r.stdout) if s["status"] == "live"}


def test_a_load_is_of_the_skill_claude_code_loads(home, project, api):
    """`fmt-code` exists in both layers, `lint-it` in the project; the window reads the user
    skill's own SKILL.md, a vendored `vendor/lint-it/SKILL.md`, and calls the plugin skill
    `tools:lint-it`. Only the user `fmt-code` was loaded: its `harmful` is accepted; `helped`
    for the project `fmt-code` and for `lint-it` are refused (not_loaded). A `Skill` call of
    `fmt-code` counts a use of the user skill, as Claude Code resolves the name."""
    seed(project, "fmt-code", "Use when formatting Python: run black with the house profile.",
         "Run `black --config house.toml`.", layer="user")
    seed(project, "fmt-code", "Use when editing the web client: prettier with two spaces.",
         "Run `npx prettier --write` on what changed.")
    seed(project, "lint-it", "Use when the shell scripts change: shellcheck every one.",
         "Run `shellcheck` on each changed script.")
    vendored = project / "vendor/lint-it/SKILL.md"
    vendored.parent.mkdir(parents=True)
    vendored.write_text("---\nname: lint-it\ndescription: A vendored tool's own skill.\n---\n")
    w = Work(home, project)
    w.say("user", "format the module and lint the vendored scripts")
    w.read(home["claude"] / "skills/fmt-code/SKILL.md")
    w.read(vendored)
    w.load("tools:lint-it")
    w.say("assistant", "Formatted with black; the house profile broke the imports again.")
    quote = "the house profile broke the imports again"
    api.push(reply(verdict("fmt-code", "helped", quote),
                   verdict("fmt-code", "harmful", quote, layer="user"),
                   verdict("lint-it", "helped", quote)))
    d = Daemon(home["home"])
    try:
        hook(w.ev("PreToolUse", tool_name="Skill", tool_input={"skill": "fmt-code"}))
        w.window_done(1)
        got = {(v["verdict"]["skill"], v["verdict"]["layer"]): [f["code"] for f in v["findings"]]
               for v in verdicts()}
        assert got == {("fmt-code", "project"): ["not_loaded"], ("fmt-code", "user"): [],
                       ("lint-it", "project"): ["not_loaded"]}
        listed = wait_for(lambda: (lambda x: x if x[("fmt-code", "user")]["uses"] else None)(
            by_layer(project)), what="the use counted")
        assert listed[("fmt-code", "user")]["feedback"]["harmful"] == 1
        assert listed[("fmt-code", "project")]["uses"] == 0
        assert listed[("fmt-code", "project")]["feedback"]["helped"] == 0
        assert listed[("lint-it", "project")]["feedback"]["helped"] == 0
    finally:
        d.stop()


def test_missed_needs_no_load_earlier_in_the_session(home, project, api):
    """`focused-tests` is loaded in a session's first window; in its second window the model
    calls it `missed`: refused (loaded_before). The same `missed` in another session that
    never loaded it is accepted."""
    seed(project, "focused-tests", *FOCUSED)
    w = Work(home, project)
    followed_the_skill(w)
    api.push(reply(verdict("focused-tests", "helped", FOLLOWED)))
    d = Daemon(home["home"])
    try:
        w.window_done(1)
        w.say("user", "now the signup test fails, fix that too")
        w.say("assistant", "Running the whole suite to see.")
        api.push(reply(verdict("focused-tests", "missed", "now the signup test fails")))
        w.window_done(2)
        other = Work(home, project, sid="sess-ev-2")
        other.say("user", "the billing test fails, fix it")
        other.say("assistant", "Running the whole suite to see.")
        api.push(reply(verdict("focused-tests", "missed", "the billing test fails")))
        other.window_done(3)
        got = [(v["session_id"], v["verdict"]["verdict"], [f["code"] for f in v["findings"]])
               for v in sorted(verdicts(), key=lambda v: v["created_at"])]
        assert got == [("sess-ev", "helped", []), ("sess-ev", "missed", ["loaded_before"]),
                       ("sess-ev-2", "missed", [])]
        [refused] = [f for v in verdicts() for f in v["findings"]]
        assert refused["message"] == "`missed`, but the session loaded focused-tests earlier"
        assert skills(project)[("focused-tests", "live")]["feedback"]["missed"] == 1
    finally:
        d.stop()


def test_the_curator_gives_no_verdicts(home, project, api):
    """A curator run (it is shown skills, no work) that answers `missed` on a skill: refused
    (`curator`), nothing counted, so no description repair can follow from it."""
    seed(project, "focused-tests", *FOCUSED)
    seed(project, "changelog", *CHANGELOG)
    api.push(tool_reply({"proposals": [], "feedback": [
        verdict("changelog", "missed", CHANGELOG[1])]}))
    d = Daemon(home["home"])
    try:
        assert ctl("curate", "--layer", "project", "--project", str(project)).returncode == 0
        wait_for(lambda: verdicts() and verdicts()[0]["status"] != "queued", timeout=60,
                 what="the curator's verdict")
        [v] = verdicts()
        assert v["source"] == "curator" and [f["code"] for f in v["findings"]] == ["curator"]
        assert skills(project)[("changelog", "live")]["feedback"]["missed"] == 0
    finally:
        d.stop()


def test_a_repair_must_quote_a_window_where_the_skill_was_missed(home, project, api):
    """Two `missed` verdicts ask the curator for a description repair; its `update` quoting
    only the skill's own text is refused (repair_unquoted) and the description stays."""
    seed(project, "changelog", *CHANGELOG)
    seed(project, "focused-tests", *FOCUSED)
    quotes = ["write the release notes for 2.3 from the merged PRs",
              "draft the release notes for 2.4 from what got merged"]
    api.push(*[reply(verdict("changelog", "missed", q)) for q in quotes],
             tool_reply({"feedback": [], "proposals": [dict(
                 NULLS, action="update", skill="changelog", layer="project",
                 reason="broaden it", evidence=CHANGELOG[1],
                 description="Use when anything about releases comes up.",
                 body=CHANGELOG[1])]}))
    w = Work(home, project)
    d = Daemon(home["home"])
    try:
        for i, q in enumerate(quotes, 1):
            w.say("user", q)
            w.say("assistant", "Listing the merged pull requests by hand.")
            w.window_done(i)
        def curator_intent():
            return [i for i in json.loads(ctl("queue", "list", "--json").stdout)
                    if i["source"] == "curator" and i["status"] != "queued"]
        [i] = wait_for(curator_intent, timeout=60, what="the curator's repair judged")
        assert i["status"] == "rejected"
        assert [f["code"] for f in i["findings"]] == ["repair_unquoted"]
        md = project / ".claude/skills/changelog/SKILL.md"
        assert CHANGELOG[0] in md.read_text()
    finally:
        d.stop()
