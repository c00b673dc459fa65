"""The end-to-end pipeline's environment, shared by the pipeline tests and the redaction
tests: a project, a transcript under CLAUDE_CONFIG_DIR/projects, a fake API and a daemon."""

import json
import shutil

from claude_autoharness.protocol.paths import project_slug
from conftest import REAL
from harness import Daemon, ctl, hook

QUOTE = "Let me check the project structure and try running the server to see the error."


def proposal(**over) -> dict:
    p = {"action": "create", "skill": "check-server-start", "layer": "project",
         "reason": "the dev server did not start and the fix was to read its error first",
         "evidence": QUOTE,
         "description": "Use when a dev server does not start: check the structure, then run it.",
         "body": "1. Check the project structure.\n2. Run the server and read the first error.",
         "old": None, "new": None, "path": None, "content": None}
    p.update(over)
    return p


class Env:
    """A project, a transcript under CLAUDE_CONFIG_DIR/projects, a fake API and a daemon."""

    def __init__(self, home, fake, monkeypatch, extra_env=None, corpus="spotter/short.jsonl",
                 sid="sess-e2e"):
        self.home = home
        self.fake = fake
        self.sid = sid
        self.project = home["tmp"] / "proj"
        self.project.mkdir(exist_ok=True)
        slug_dir = home["claude"] / "projects" / project_slug(str(self.project))
        slug_dir.mkdir(parents=True, exist_ok=True)
        self.transcript = slug_dir / f"{sid}.jsonl"
        shutil.copyfile(REAL / corpus, self.transcript)
        self.env = {"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key",
                    "ANTHROPIC_BASE_URL": fake.base_url, "AUTOHARNESS_REFLECT_EVERY": "2",
                    "AUTOHARNESS_REFLECTOR_BACKOFF_BASE_S": "0.05"}
        self.env.update(extra_env or {})
        for k, v in self.env.items():  # the CLI and hooks run with the same environment
            monkeypatch.setenv(k, v)
        self.daemon = Daemon(home["home"])

    def ev(self, name, **kw) -> dict:
        return {"session_id": self.sid, "transcript_path": str(self.transcript),
                "cwd": str(self.project), "hook_event_name": name, **kw}

    def work(self, n=2, stop=True):
        for _ in range(n):
            hook(self.ev("PreToolUse", tool_name="Bash", tool_input={"command": "ls"}))
        if stop:
            hook(self.ev("Stop"))

    def status(self):
        return self.daemon.status()

    def intents(self):
        return json.loads(ctl("queue", "list", "--json").stdout)

    def skill(self, name="check-server-start"):
        return self.project / ".claude" / "skills" / name / "SKILL.md"
