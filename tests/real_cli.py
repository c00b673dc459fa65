"""Run the real Claude Code CLI against a scripted model, with autoharness installed.

`CliModel` is the model: it answers the streaming fake Messages API (tests/fake_anthropic.py)
from per-session scripts keyed by a word of the session's first prompt, follows the /learn
command's instruction (it runs the one Bash command the command text gives it, verbatim), and
answers the reflector backends (the SDK's forced `propose_skill_changes` tool, the `claude`
child's structured-output tool) from a queue of proposal lists.

`Sandbox` is one user: fresh HOME, CLAUDE_CONFIG_DIR, AUTOHARNESS_HOME and project dir on short
temp paths, autoharness installed with `autoharnessctl install --scope user`, the CLI pointed at
the fake with a dummy key and no non-essential traffic. The daemon is left to the hook's
autostart; `close()` stops it.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import leaks
from conftest import REPO
from fake_anthropic import FakeAnthropic, message_reply, text_block, tool_use_block

BIN = Path(sys.executable).parent
DUMMY_KEY = "sk-ant-dummy-key-for-the-fake-api"
REFLECT_TOOL = "propose_skill_changes"


def strings(value) -> list[str]:
    """Every string inside a JSON value (to search requests for text wherever it sits)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def _content_texts(message: dict) -> list[str]:
    return strings(message.get("content"))


def current_prompt(messages: list[dict]) -> tuple[str, int]:
    """The text of the user's latest prompt (a user message that is not tool results) and how
    many model turns followed it: a resumed session carries its earlier prompts too."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        if m.get("role") == "user" and not any(b.get("type") == "tool_result" for b in blocks):
            turns = sum(1 for later in messages[i + 1:] if later.get("role") == "assistant")
            return "\n".join(_content_texts(m)), turns
    return "", 0


def wait_until(pred, timeout: float, what: str):
    end = time.monotonic() + timeout
    while not (v := pred()):
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return v


class CliModel:
    """The scripted model; use `model.fake` (started in `__enter__`) as ANTHROPIC_BASE_URL."""

    def __init__(self):
        self.scripts: dict[str, list[dict]] = {}
        self.proposals: list[list[dict]] = []
        self.feedback: list[list[dict]] = []
        self.lock = threading.Lock()
        self.fake = FakeAnthropic(validate=False, route=self.route)
        self.fake.default = message_reply(text_block("ok"))

    def script(self, key: str, *turns: dict) -> None:
        """Replies for the session whose first prompt contains `key`, one per model turn."""
        self.scripts[key] = list(turns)

    def propose(self, *proposals: dict) -> None:
        """The next reflection (either backend) answers with these proposals."""
        with self.lock:
            self.proposals.append(list(proposals))

    def give_feedback(self, *verdicts: dict) -> None:
        """The next reflection that asks answers with these feedback verdicts too."""
        with self.lock:
            self.feedback.append(list(verdicts))

    def _next_proposals(self) -> list[dict]:
        with self.lock:
            return self.proposals.pop(0) if self.proposals else []

    def _answer(self) -> dict:
        with self.lock:
            fb = self.feedback.pop(0) if self.feedback else []
        return {"proposals": self._next_proposals(), "feedback": fb}

    # -- routing ---------------------------------------------------------------------------

    def route(self, body: dict) -> dict:
        tools = [t.get("name") for t in body.get("tools") or []]
        messages = body.get("messages") or []
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        if REFLECT_TOOL in tools:  # the anthropic SDK backend
            return message_reply(tool_use_block(REFLECT_TOOL, self._answer()))
        structured = [t for t in tools if "structured" in (t or "").lower()]
        if structured:  # the `claude` backend's child session
            if turn == 0:
                return message_reply(tool_use_block(structured[0], self._answer()))
            return message_reply(text_block("done"))
        prompt, turn = current_prompt(messages)
        if re.search(r"<command-name>/(autoharness:)?learn</command-name>", prompt):
            return self._follow_learn(prompt, turn)
        for key, turns in self.scripts.items():
            if key in prompt:
                return turns[turn] if turn < len(turns) else message_reply(text_block("done"))
        return message_reply(text_block("ok"))

    @staticmethod
    def _follow_learn(text: str, turn: int) -> dict:
        """Do what the /learn command says: run its one Bash command exactly as given."""
        if turn:
            return message_reply(text_block("autoharness queued the lesson."))
        m = re.search(r"```bash\n(.*?)\n```", text, re.S)
        if not m:
            return message_reply(text_block("the /learn command gave no command to run"))
        return message_reply(tool_use_block("Bash", {"command": m.group(1),
                                                     "description": "Teach autoharness"}))

    # -- what the fake received ------------------------------------------------------------

    @staticmethod
    def is_reflector(body: dict) -> bool:
        """A request from a reflector backend (SDK or `claude` child), not a user's session."""
        tools = [t.get("name") or "" for t in body.get("tools") or []]
        return REFLECT_TOOL in tools or any("structured" in t.lower() for t in tools)

    def session_requests(self) -> list[dict]:
        """Requests from the users' CLI sessions."""
        return [b for b in (r.json for r in self.fake.messages_requests)
                if not self.is_reflector(b)]

    def reflector_requests(self) -> list[dict]:
        return [b for b in (r.json for r in self.fake.messages_requests) if self.is_reflector(b)]

    def __enter__(self) -> "CliModel":
        self.fake.start()
        return self

    def __exit__(self, *exc) -> None:
        self.fake.stop()


class Terminal:
    """A process on a pseudo-terminal; its output is drained in a thread (kept in `output`) so
    it never blocks on a full pty."""

    def __init__(self, argv: list[str], cwd: Path, env: dict):
        import pty

        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: exec at once
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        self.output = b""
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            self.output += data

    def screen(self) -> str:
        """The output so far, without escape sequences and spacing (for `in` checks)."""
        text = re.sub(r"\x1b(\[[0-9;?>]*[a-zA-Z]|\][^\x07]*\x07|[78])", "",
                      self.output.decode("utf-8", "replace"))
        return re.sub(r"\s+", "", text)

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def close(self) -> None:
        """Ctrl-C twice (Claude Code's exit), then make sure the process is gone."""
        for _ in range(2):
            try:
                self.type("\x03")
            except OSError:
                break
            time.sleep(0.3)
        end = time.monotonic() + 10
        while time.monotonic() < end:
            if os.waitpid(self.pid, os.WNOHANG) != (0, 0):
                break
            time.sleep(0.05)
        else:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)


class Sandbox:
    """One user's machine: fresh dirs, autoharness installed, the CLI at the scripted model."""

    def __init__(self, cli: Path, model: CliModel, extra_env: dict | None = None,
                 install: bool = True):
        """`install` False: no `autoharnessctl install` (a test installs the plugin instead)."""
        self.cli = str(cli)
        self.model = model
        self.root = Path(tempfile.mkdtemp(prefix="ah-cli-", dir="/tmp"))
        self.home = self.root / "home"
        self.claude = self.root / "claude"
        self.ah = self.root / "ah"
        self.project = self.root / "proj"
        for d in (self.home, self.claude, self.project):
            d.mkdir()
        self.ah.mkdir(mode=0o700)
        path = os.pathsep.join([str(BIN), str(Path(self.cli).parent), "/usr/local/bin",
                                "/usr/bin", "/bin"])
        self.env = {
            "PATH": path, "HOME": str(self.home), "CLAUDE_CONFIG_DIR": str(self.claude),
            "AUTOHARNESS_HOME": str(self.ah), "ANTHROPIC_BASE_URL": model.fake.base_url,
            "ANTHROPIC_API_KEY": DUMMY_KEY, "TERM": "dumb", "LANG": "C.UTF-8",
            # never reach the network: no telemetry, error reports, update checks
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
            "AUTOHARNESS_REFLECTOR_BACKOFF_BASE_S": "0.05",
        }
        self.env.update(extra_env or {})
        self.write_config()
        if install:
            r = self.ctl("install", "--scope", "user")
            assert r.returncode == 0, r.stderr

    def write_config(self) -> None:
        """The user's config file: the AUTOHARNESS_<KEY> settings of `env` and the reflector
        pointed at the fake. The daemon the hook autostarts reads only this file: it is given
        none of the session's settings (nor its ANTHROPIC_* variables)."""
        from claude_autoharness.protocol.config import load

        sources: dict[str, str] = {}
        cfg = load(str(self.ah / "none.toml"), self.env, sources)
        tables: dict[str, dict] = {"": {}, "reflector": {"base_url": self.model.fake.base_url,
                                                          "api_key": DUMMY_KEY}}
        for dotted in sources:
            obj = cfg
            for part in dotted.split("."):
                obj = getattr(obj, part)
            section, _, key = dotted.rpartition(".")
            tables.setdefault(section, {})[key] = obj
        lines = [f"{k} = {json.dumps(v)}" for k, v in tables.pop("").items()]
        for section, keys in tables.items():
            lines += [f"[{section}]"] + [f"{k} = {json.dumps(v)}" for k, v in keys.items()]
        config = self.ah / "config.toml"
        config.write_text("\n".join(lines) + "\n")
        config.chmod(0o600)  # it holds a key: doctor fails one others can read

    def ctl(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / "autoharnessctl"), *args], env=self.env, input=input,
                              capture_output=True, text=True, timeout=120)

    def run(self, prompt: str, *args: str, timeout: float = 120) -> dict:
        """`claude -p PROMPT --output-format json` in the project; the CLI's result object."""
        r = subprocess.run([self.cli, "-p", prompt, "--output-format", "json", *args],
                           cwd=self.project, env=self.env, capture_output=True, text=True,
                           timeout=timeout)
        assert r.returncode == 0, f"claude exited {r.returncode}: {r.stdout[-2000:]} {r.stderr[-2000:]}"
        return json.loads(r.stdout)

    def run_stream(self, prompt: str, *args: str, before_exit=None, timeout: float = 120) -> dict:
        """One turn of a `--input-format stream-json` session: the CLI stays alive after its
        result until stdin closes, so the async Stop hook is not cut off at exit.
        `before_exit(result)` runs between the result record and closing stdin; returns the
        result record (it carries the `session_id`)."""
        proc = subprocess.Popen(
            [self.cli, "-p", "--input-format", "stream-json", "--output-format", "stream-json",
             "--verbose", *args],
            cwd=self.project, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        try:
            proc.stdin.write(json.dumps({"type": "user", "message": {
                "role": "user", "content": prompt}}) + "\n")
            proc.stdin.flush()
            result = None
            for line in proc.stdout:
                record = json.loads(line)
                if record.get("type") == "result":
                    result = record
                    break
            assert result is not None, f"no result record: {proc.stderr.read()[-2000:]}"
            if before_exit:
                before_exit(result)
            proc.stdin.close()
            assert proc.wait(timeout) == 0, proc.stderr.read()[-2000:]
            return result
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def interactive(self, *args: str) -> "Terminal":
        """The CLI in a terminal (a pty), as a person runs it; first-run dialogs (onboarding,
        folder trust, API key approval) answered beforehand in its config file."""
        config = self.claude / ".claude.json"
        data = json.loads(config.read_text()) if config.exists() else {}
        data.update({"hasCompletedOnboarding": True, "theme": "dark",
                     "customApiKeyResponses": {"approved": [DUMMY_KEY[-20:]], "rejected": []}})
        data.setdefault("projects", {})[str(self.project)] = {"hasTrustDialogAccepted": True}
        config.write_text(json.dumps(data))
        return Terminal([self.cli, *args], self.project, dict(self.env, TERM="xterm-256color"))

    def stops(self) -> int:
        """How many Stop events the daemon has received (0 when it is not running)."""
        st = self.status() or {}
        return st.get("events", {}).get("by_kind", {}).get("Stop", 0)

    def status(self) -> dict | None:
        r = self.ctl("status", "--json")
        return json.loads(r.stdout) if r.returncode == 0 else None

    def transcript(self, session_id: str) -> Path:
        [path] = (self.claude / "projects").glob(f"*/{session_id}.jsonl")
        return path

    def skill(self, name: str) -> Path:
        return self.project / ".claude" / "skills" / name / "SKILL.md"

    def close(self) -> None:
        st = self.status()
        if st is not None:
            self.ctl("stop")
            pid = st.get("pid")
            end = time.monotonic() + 10
            while pid and time.monotonic() < end:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)
            else:
                if pid:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        # A daemon a late hook was still starting (not answering yet, so `status` missed it)
        # would come up after the rmtree, recreate its home and outlive the run.
        leaks.end_processes_under([str(self.root)])
        shutil.rmtree(self.root, ignore_errors=True)


LAYOUT = (".claude-plugin", "hooks", "commands", "README.md", "LICENSE")


def copy_layout(box: Sandbox):
    """The repository's plugin layout, alone, in the sandbox (a marketplace install copies
    the plugin's directory whole: never the checkout with its venv)."""
    layout = box.root / "plugin"
    layout.mkdir()
    for part in LAYOUT:
        src = REPO / part
        if src.is_dir():
            shutil.copytree(src, layout / part)
        else:
            shutil.copy2(src, layout / part)
    return layout
