"""Shared by the evidence tests: a scripted session (its transcript under
CLAUDE_CONFIG_DIR/projects and its hook events), seeded skills, the fake model's replies with
verdicts, and the CLI's views of the queue and the library."""

import json
import os
import subprocess
from pathlib import Path

import promote_support
from claude_autoharness.protocol.paths import project_slug
from fake_anthropic import tool_reply
from harness import ctl, hook, wait_for

SEED_QUOTE = "the user said: run the focused test first"
NULLS = {"description": None, "body": None, "old": None, "new": None, "path": None,
         "content": None}


def seed(project, name, description, body, layer="project"):
    return Path(promote_support.seed(project, name, description, body, layer, SEED_QUOTE))


def hand_written(project, name, body):
    d = project / ".claude" / "skills" / name
    d.mkdir(parents=True)
    (d / "SKILL.md").write_text(f"---\nname: {name}\ndescription: Mine, by hand.\n---\n\n{body}\n")
    return d / "SKILL.md"


def verdict(skill, kind, evidence, layer="project"):
    return {"skill": skill, "layer": layer, "verdict": kind, "evidence": evidence}


def reply(*feedback, proposals=()):
    return tool_reply({"proposals": list(proposals), "feedback": list(feedback)})


class Work:
    """A project, its transcript under CLAUDE_CONFIG_DIR/projects, scripted windows."""

    def __init__(self, home, project, sid="sess-ev"):
        self.home, self.project, self.sid = home, project, sid
        d = home["claude"] / "projects" / project_slug(str(project))
        d.mkdir(parents=True, exist_ok=True)
        self.transcript = d / f"{sid}.jsonl"
        self.transcript.touch()
        self.n = 0

    def ev(self, name, **kw):
        return {"session_id": self.sid, "transcript_path": str(self.transcript),
                "cwd": str(self.project), "hook_event_name": name, **kw}

    def record(self, role, content):
        self.n += 1
        # unique across sessions: a uuid another session had is a fork's copy, left out
        rec = {"type": role, "uuid": f"{self.sid}-u-{self.n}", "sessionId": self.sid,
               "message": {"role": role, "content": content}}
        with open(self.transcript, "a") as f:
            f.write(json.dumps(rec) + "\n")

    def say(self, role, text):
        self.record(role, [{"type": "text", "text": text}] if role == "assistant" else text)

    def load(self, skill):
        """The agent's Skill call, as Claude Code records it."""
        self.n += 1
        self.record("assistant", [{"type": "tool_use", "id": f"toolu_{self.n}", "name": "Skill",
                                   "input": {"skill": skill}}])
        self.record("user", [{"type": "tool_result", "tool_use_id": f"toolu_{self.n}",
                              "content": f"Launching skill: {skill}"}])

    def read(self, path):
        self.n += 1
        self.record("assistant", [{"type": "tool_use", "id": f"toolu_{self.n}", "name": "Read",
                                   "input": {"file_path": str(path)}}])

    def window_done(self, n_jobs):
        """End the window with a Stop (after enough tool calls for a job) and wait for the
        job and for the promoter to ground every verdict."""
        for _ in range(2):
            hook(self.ev("PreToolUse", tool_name="Bash", tool_input={"command": "ls"}))
        assert hook(self.ev("Stop")).returncode == 0
        wait_for(lambda: status()["jobs"]["done"] >= n_jobs, timeout=60, what="job done")
        wait_for(lambda: all(v["status"] != "queued" for v in verdicts()), timeout=60,
                 what="verdicts grounded")


def status():
    r = ctl("status", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def verdicts():
    r = ctl("queue", "feedback", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def skills(project):
    r = ctl("skills", "list", "--json", "--project", str(project))
    assert r.returncode == 0, r.stderr
    return {(s["name"], s["status"]): s for s in json.loads(r.stdout)}


def history(project, name):
    r = ctl("skills", "history", name, "--project", str(project), "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


FOCUSED = ("Use when a test fails: run only the failing test first, then the whole suite.",
           "Run the failing test alone with `-k NAME`, then the suite.")
MIGRATE = ("Use when the database schema changes: run the migration script first.",
           "Run `scripts/migrate.sh` before starting the server.")
CHANGELOG = ("Use when the changelog is due: list merged pull requests since the last tag.",
             "List merged pull requests since the last tag, newest first.")


def user_text(req) -> str:
    user = req.json["messages"][0]["content"]
    return user if isinstance(user, str) else "".join(b.get("text", "") for b in user)


def git(cwd, *args):
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True,
                   env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
                            GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com"))
