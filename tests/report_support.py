"""What the report tests share: a session of real hook events over a copy of a real transcript,
against the fake Messages API, and a skill seeded the way the promoter lands any."""

import shutil

from claude_autoharness.daemon.persist.dirs import ensure_private_dir
from claude_autoharness.daemon.promote.land import Promoter
from claude_autoharness.daemon.proposals import Intent, Proposal
from claude_autoharness.protocol import paths
from claude_autoharness.protocol.config import PromoterConfig
from claude_autoharness.protocol.paths import project_slug
from conftest import REAL
from harness import Daemon, hook

QUOTE = "Let me check the project structure and try running the server to see the error."
SEED_EVIDENCE = "the user said: always check the server log first"


def proposal(**over) -> dict:
    p = {"action": "create", "skill": "check-server-start", "layer": "project",
         "reason": "the dev server did not start and the fix was to read its error first",
         "evidence": QUOTE,
         "description": "Use when a dev server does not start: check the structure, then run it.",
         "body": "1. Check the project structure.\n2. Run the server and read the first error.",
         "old": None, "new": None, "path": None, "content": None}
    p.update(over)
    return p


def seed(project, name, description, body, layer="project"):
    """Land an autoharness-owned skill the way the promoter does for any proposal."""
    p = Proposal(action="create", skill=name, layer=layer, reason="seeded for the test",
                 evidence=SEED_EVIDENCE, description=description, body=body)
    it = Intent(id=f"seed-{name}", source="reflector", created_at=0.0, proposal=p)
    ensure_private_dir(paths.state_dir())
    out = Promoter(PromoterConfig()).promote(it, SEED_EVIDENCE, str(project))
    assert out.status == "landed", out.findings
    return out.skill_path


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
