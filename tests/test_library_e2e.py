"""The library's lifecycle end to end, through real processes: hook events count turns and
uses, a dormant skill is archived after maturity, capacity is enforced, both show in
`skills list --json`, `status --json` and the next SessionStart; the curator round trip against
the fake Messages API with the real SDK."""

import json
import os

import msgspec
import pytest

from claude_autoharness.client.conn import call
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol import paths
from claude_autoharness.protocol.paths import project_slug
from fake_anthropic import FakeAnthropic, tool_reply
from harness import Daemon, ctl, hook, wait_for
from promote_support import seed


@pytest.fixture
def project(home):
    proj = home["tmp"] / "proj"
    (proj / ".claude" / "skills").mkdir(parents=True)
    return proj


class Session:
    def __init__(self, home, project, sid):
        self.sid, self.project = sid, project
        self.transcript = str(home["claude"] / "projects" / project_slug(str(project))
                              / f"{sid}.jsonl")

    def ev(self, name, **kw):
        return {"session_id": self.sid, "hook_event_name": name, "cwd": str(self.project),
                "transcript_path": self.transcript, **kw}

    def send(self, name, **kw):
        r = hook(self.ev(name, **kw))
        assert r.returncode == 0, r.stderr
        return r

    def use(self, skill):
        self.send("PreToolUse", tool_name="Skill", tool_input={"skill": skill})

    def read(self, path):
        self.send("PreToolUse", tool_name="Read", tool_input={"file_path": str(path)})


def skills(project) -> dict:
    r = ctl("skills", "list", "--json", "--project", str(project))
    assert r.returncode == 0, r.stderr
    return {(s["name"], s["status"]): s for s in json.loads(r.stdout)}


def test_turns_and_uses_drive_dormancy_and_capacity(home, project, monkeypatch):
    """Three owned skills, maturity 3, project capacity 1: after three Stops the unused one is
    archived `dormant` and the less used of the other two `capacity`; `skills list --json`
    shows uses, turns, stage and reasons; turns survive kill -9; the next SessionStart reports
    both archives; a restore starts a fresh probation; a hand-written skill is untouched."""
    seed(project, "alpha-skill", "Use when the build cache is stale: wipe it and rebuild.",
         "Wipe `build/` and rebuild.")
    beta_md = seed(project, "beta-skill", "Use when a migration fails: roll back, then rerun.",
                   "Roll back, then rerun with verbose logging.")
    seed(project, "gamma-skill", "Use when docs links break: regenerate the link index.",
         "Run the link checker and regenerate the index.")
    hand = project / ".claude" / "skills" / "by-hand"
    hand.mkdir()
    (hand / "SKILL.md").write_text("---\nname: by-hand\ndescription: Mine.\n---\n\nMine.\n")
    monkeypatch.setenv("AUTOHARNESS_LIBRARY_MATURITY_TURNS", "3")
    monkeypatch.setenv("AUTOHARNESS_LIBRARY_CAPACITY_PROJECT", "1")
    # both archives in one pass: no share of the layer held back for the next one
    monkeypatch.setenv("AUTOHARNESS_LIBRARY_MAX_ARCHIVE_SHARE", "1")
    d = Daemon(home["home"])
    try:
        s = Session(home, project, "sess-lib-1")
        s.send("SessionStart", source="startup")
        s.use("alpha-skill")
        s.send("Stop")
        s.use("alpha-skill")
        s.read(beta_md)
        s.send("Stop")
        wait_for(lambda: skills(project)[("beta-skill", "live")]["uses"] == 1, what="uses")
        listed = skills(project)
        assert {k[0]: (v["stage"], v["uses"], v["turns"]) for k, v in listed.items()} == {
            "alpha-skill": ("probation", 2, 2), "beta-skill": ("probation", 1, 2),
            "gamma-skill": ("probation", 0, 2), "by-hand": ("hand-written", 0, 0)}
        s.send("Stop")
        wait_for(lambda: ("gamma-skill", "archived") in skills(project)
                 and ("beta-skill", "archived") in skills(project), what="archives")
        listed = skills(project)
        assert ("gamma-skill", "live") not in listed and ("beta-skill", "live") not in listed
        gamma, beta = listed[("gamma-skill", "archived")], listed[("beta-skill", "archived")]
        assert (gamma["stage"], gamma["reason"], gamma["uses"], gamma["turns"]) == (
            "archived", "dormant", 0, 3)
        assert (beta["reason"], beta["uses"], beta["turns"]) == ("capacity", 1, 3)
        alpha = listed[("alpha-skill", "live")]
        assert (alpha["stage"], alpha["uses"], alpha["turns"]) == ("graduated", 2, 3)
        assert listed[("by-hand", "live")]["stage"] == "hand-written"
        assert (hand / "SKILL.md").exists()
        lib = wait_for(lambda: (lambda st: st if st["graduated"] == 1 else None)(
            d.status()["library"]), what="library counts")
        assert lib["archived_by_reason"] == {"dormant": 1, "capacity": 1}
        assert (lib["turns"]["user"], lib["hand-written"], lib["probation"]) == (3, 1, 0)
        text = ctl("skills", "list", "--project", str(project)).stdout
        assert "archived (dormant)" in text and "archived (capacity)" in text

        d.kill9()
        d = Daemon(home["home"])
        assert d.status()["library"]["turns"]["user"] == 3  # journaled before the reply
        # every project with turns is judged (and counted for status) at start
        wait_for(lambda: d.status()["library"]["graduated"] == 1, what="counts after restart")
        assert skills(project)[("alpha-skill", "live")]["turns"] == 3

        s2 = Session(home, project, "sess-lib-2")
        out = s2.send("SessionStart", source="startup").stdout.decode()
        ctx = json.loads(out)["hookSpecificOutput"]["additionalContext"]
        assert "archived gamma-skill [project] (dormant: 0 uses in 3 turns)" in ctx
        assert "archived beta-skill [project] (capacity: 1 use in 3 turns)" in ctx
        assert "autoharnessctl skills restore beta-skill" in ctx

        r = ctl("skills", "restore", "beta-skill", "--project", str(project))
        assert r.returncode == 0, r.stdout + r.stderr
        back = skills(project)[("beta-skill", "live")]
        assert (back["stage"], back["turns"], back["uses"]) == ("probation", 0, 0)
        history = json.loads(ctl("skills", "history", "beta-skill", "--project",
                                 str(project), "--json").stdout)
        assert [e.get("retired") for e in history if e["action"] == "archive"] == ["capacity"]
    finally:
        d.stop()


def test_only_main_sessions_take_turns_durably(home, project, monkeypatch):
    """Only main sessions' Stops are turns: a Stop from the reflector's own child directory and
    a replayed Stop (`autoharnessctl replay`) count nothing; a real Stop counts one turn for
    the user layer and one for its project, journaled before the hook is answered: with no
    snapshot taken (a long persist interval), a kill -9 right after loses no turn."""
    monkeypatch.setenv("AUTOHARNESS_PERSIST_INTERVAL_S", "3600")
    d = Daemon(home["home"])
    try:
        child = {"session_id": "child-1", "hook_event_name": "Stop",
                 "cwd": os.path.join(paths.reflector_dir(), "job-1")}
        assert hook(child).returncode == 0
        s = Session(home, project, "sess-turn")
        call(m.Hook(payload=msgspec.json.encode(s.ev("Stop")), replayed=True))
        assert d.status()["library"]["turns"] == {"user": 0, "projects": 0}
        s.send("Stop")
        st = d.status()["library"]["turns"]
        assert st == {"user": 1, "projects": 1}
        d.kill9()
        d = Daemon(home["home"])
        assert d.status()["library"]["turns"] == {"user": 1, "projects": 1}
    finally:
        d.stop()


CHECK = ("Use when the dev server does not start: check the project structure, then run it.",
         "1. Check the project structure.\n2. Run the server and read the first error.")
DEBUG = ("Use when npm start fails locally with a stack trace about a missing module.",
         "When npm start fails, read the stack trace printed first: it names the missing "
         "module to install.")


def test_curator_merges_and_archives_through_the_promoter(home, project, monkeypatch):
    """`autoharnessctl curate` sends the project layer's autoharness skills (full text, and no
    hand-written one) to the fake Messages API through the real SDK; the merge (an update)
    lands, the absorbed skill is archived as `curated` and restorable; a proposal quoting text
    that is not in the sent skills, aimed at a hand-written skill, lands nothing, nor does an
    archive whose quote comes from another skill than the one it archives, nor a change to
    a layer the curator was not shown."""
    seed(project, "check-server-start", *CHECK)
    seed(project, "server-start-debug", *DEBUG)
    seed(project, "user-habit", "Use when committing anywhere: keep commits small.",
         "Commit small.", layer="user")
    seed(project, "unrelated-skill", "Use when the changelog is due: list merged pull requests.",
         "List merged pull requests since the last tag.")
    hand = project / ".claude" / "skills" / "by-hand"
    hand.mkdir()
    (hand / "SKILL.md").write_text("---\nname: by-hand\ndescription: Mine.\n---\n\nHands off.\n")
    merged = CHECK[1] + "\n3. If it names a missing module, install it."
    null = {"old": None, "new": None, "path": None, "content": None}
    reply = {"proposals": [
        {"action": "update", "skill": "check-server-start", "layer": "project",
         "reason": "one skill for a server that does not start",
         "evidence": "read the stack trace printed first: it names the missing module",
         "description": CHECK[0], "body": merged, **null},
        {"action": "archive", "skill": "server-start-debug", "layer": "project",
         "reason": "merged into check-server-start",
         "evidence": "When npm start fails, read the stack trace printed first",
         "description": None, "body": None, **null},
        {"action": "archive", "skill": "by-hand", "layer": "project", "reason": "unused",
         "evidence": "Hands off.", "description": None, "body": None, **null},
        {"action": "patch", "skill": "user-habit", "layer": "user", "reason": "tidier",
         "evidence": "Check the project structure.", "description": None, "body": None,
         **dict(null, old="Commit small.", new="Commit smaller.")},
        {"action": "archive", "skill": "unrelated-skill", "layer": "project",
         "reason": "merged too", "evidence": "read the first error",
         "description": None, "body": None, **null},
    ]}
    with FakeAnthropic() as fake:
        fake.push(tool_reply(reply))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        d = Daemon(home["home"])
        try:
            r = ctl("curate", "--layer", "project", "--project", str(project))
            assert r.returncode == 0 and "queued curator job" in r.stdout, r.stderr
            wait_for(lambda: d.status()["intents"].get("landed", 0) == 2
                     and d.status()["intents"].get("queued", 1) == 0, timeout=60,
                     what="curator intents landed")
            [req] = fake.messages_requests
            body = req.json
            user = body["messages"][0]["content"]
            user = user if isinstance(user, str) else "".join(b.get("text", "") for b in user)
            check_md = (project / ".claude/skills/check-server-start/SKILL.md")
            assert CHECK[1] in user and DEBUG[1] in user and "Hands off." not in user
            assert 'name="server-start-debug"' in user and 'uses="0"' in user
            system = json.dumps(body["system"])
            assert "curator" in system.lower()
            assert "install it." in check_md.read_text()
            assert not (project / ".claude/skills/server-start-debug").exists()
            assert (hand / "SKILL.md").read_text().endswith("Hands off.\n")
            intents = json.loads(ctl("queue", "list", "--json").stdout)
            assert {i["source"] for i in intents} == {"curator"}
            bad = {i["proposal"]["skill"]: {f["code"] for f in i["findings"]}
                   for i in intents if i["status"] == "rejected"}
            assert set(bad) == {"by-hand", "unrelated-skill", "user-habit"}
            assert bad["user-habit"] == {"wrong_layer"}  # shown the project layer only
            assert "unattributable" in bad["by-hand"]  # not among the skills sent
            # quoted from another skill that was sent, not from the one it archives
            assert bad["unrelated-skill"] == {"evidence_not_found"}
            assert (project / ".claude/skills/unrelated-skill/SKILL.md").exists()
            arch = skills(project)[("server-start-debug", "archived")]
            assert arch["reason"] == "curated"
            r = ctl("skills", "restore", "server-start-debug", "--project", str(project))
            assert r.returncode == 0, r.stdout + r.stderr
            assert skills(project)[("server-start-debug", "live")]["stage"] == "probation"
        finally:
            d.stop()


def test_curator_runs_every_curate_every_reflection_jobs(home, project, monkeypatch):
    """With curate_every = 1, a finished reflection job queues a curator job for the user layer
    (it finishes without a model call: fewer than two skills to merge); curate_every = 0 is
    off."""
    with FakeAnthropic() as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        monkeypatch.setenv("AUTOHARNESS_LIBRARY_CURATE_EVERY", "1")
        d = Daemon(home["home"])
        try:
            hook({"hook_event_name": "PreToolUse", "session_id": "sess-curate",
                  "tool_name": "Bash"})  # learn needs a session to learn from
            assert ctl("learn", "always check the server log first").returncode == 0
            wait_for(lambda: d.status()["jobs"]["by_kind"].get("curate") == 1
                     and d.status()["jobs"]["done"] == 2, timeout=60, what="curator job")
            assert len(fake.messages_requests) == 1  # the learn job's; the curator's none
        finally:
            d.stop()
        monkeypatch.setenv("AUTOHARNESS_LIBRARY_CURATE_EVERY", "0")
        d = Daemon(home["home"])
        try:
            assert ctl("learn", "always check the server log twice").returncode == 0
            wait_for(lambda: d.status()["jobs"]["done"] == 3, timeout=60, what="learn job")
            assert d.status()["jobs"]["by_kind"].get("curate") == 1
        finally:
            d.stop()
