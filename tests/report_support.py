"""What the report tests share: a session of real hook events over a copy of a real transcript,
against the fake Messages API."""

import shutil

from claude_autoharness.protocol.paths import project_slug
from conftest import REAL
from harness import Daemon, hook


class Env:
    """A project, a copy of a real transcript under CLAUDE_CONFIG_DIR/projects, the fake API's
    address in the environment, and a daemon."""

    def __init__(self, home, fake, monkeypatch, corpus="spotter/short.jsonl", sid="sess-rep"):
        self.sid = sid
        self.project = home["tmp"] / "proj"
        self.project.mkdir(exist_ok=True)
        slug_dir = home["claude"] / "projects" / project_slug(str(self.project))
        slug_dir.mkdir(parents=True, exist_ok=True)
        self.transcript = slug_dir / f"{sid}.jsonl"
        shutil.copyfile(REAL / corpus, self.transcript)
        env = {"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key",
               "ANTHROPIC_BASE_URL": fake.base_url, "AUTOHARNESS_REFLECT_EVERY": "2",
               "AUTOHARNESS_REFLECTOR_BACKOFF_BASE_S": "0.05"}
        for k, v in env.items():  # the CLI and hooks run with the same environment
            monkeypatch.setenv(k, v)
        self.daemon = Daemon(home["home"])

    def ev(self, name, **kw) -> dict:
        return {"session_id": self.sid, "transcript_path": str(self.transcript),
                "cwd": str(self.project), "hook_event_name": name, **kw}

    def work(self, n=2):
        for _ in range(n):
            hook(self.ev("PreToolUse", tool_name="Bash", tool_input={"command": "ls"}))
        hook(self.ev("Stop"))

    def status(self):
        return self.daemon.status()
