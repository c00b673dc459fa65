"""autoharness installed as a Claude Code plugin, end to end on the real CLI.

The plugin is the repository's own layout (.claude-plugin/, hooks/, commands/, README.md,
LICENSE) copied into a temp dir, installed the two ways Claude Code offers: `claude plugin
marketplace add DIR` + `claude plugin install autoharness@autoharness`, and `--plugin-dir DIR`.
The hooks run `autoharness-hook` from PATH (the test's venv), the daemon is autostarted by the
first hook, the model is the scripted loopback fake (tests/real_cli.py). Also: both installs at
once, and a settings install whose program is gone.
"""

import json
import subprocess

import pytest

from fake_anthropic import message_reply, text_block, tool_use_block
from harness import wait_for
from real_cli import CliModel, Sandbox, copy_layout, strings

MARKER = ("<!-- learning\ntopic: run-tests-first\nkind: convention\ndoc-impact: none\n"
          "body: Run the test suite before committing.\n-->")
PLUGIN_SAVE = "→ Run: /autoharness:save-learnings"


def bash(command: str) -> dict:
    return tool_use_block("Bash", {"command": command, "description": "run it"})


@pytest.fixture
def box(claude_cli, model):
    """A fresh user with no settings install: the test installs the plugin."""
    b = Sandbox(claude_cli, model, {"AUTOHARNESS_REFLECT_EVERY": "1000"}, install=False)
    b.plugin = copy_layout(b)
    yield b
    b.close()


def claude(box: Sandbox, *args: str) -> subprocess.CompletedProcess:
    r = subprocess.run([box.cli, *args], env=box.env, cwd=box.project, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def first_request(model: CliModel, key: str) -> str:
    """Everything the model saw in the first request of the session whose prompt has `key`."""
    [req] = [b for b in model.session_requests()
             if key in "".join(strings(b["messages"][:1]))][:1]
    return "\n".join(strings(req.get("messages")) + strings(req.get("system")))


def marker_then_report(box: Sandbox, model: CliModel, *args: str) -> str:
    """Session 1 (Bash, Read, Bash) ends with a marker; session 2 starts: returns what session
    2's first request told the model. Checks that session 1 counted, once per call."""
    (box.project / "notes.txt").write_text("nothing here\n")
    model.script("plugin first",
                 message_reply(text_block("Listing first."), bash("ls")),
                 message_reply(tool_use_block("Read", {"file_path": "notes.txt"})),
                 message_reply(bash("echo done")),
                 message_reply(text_block("Done.\n\n" + MARKER)))
    box.run("plugin first", *args)
    wanted = {"SessionStart": 1, "UserPromptSubmit": 1, "PreToolUse": 3, "Stop": 1, "SessionEnd": 1}
    wait_for(lambda: (box.status() or {}).get("events", {}).get("by_kind") == wanted,
             timeout=90, what="the plugin session's events, each once")
    model.script("plugin second", message_reply(text_block("Hello.")))
    box.run("plugin second", *args)
    return first_request(model, "plugin second")


def test_marketplace_install_counts_and_names_the_plugins_command(box, model):
    """`claude plugin marketplace add` + `claude plugin install autoharness@autoharness`: the
    plugin's hooks count a session (each event once, the daemon autostarted), the next
    session's start context reports the marker with `→ Run: /autoharness:save-learnings` (the
    command the plugin has; there is no `/save-learnings`), and `doctor` names the plugin's
    commands."""
    claude(box, "plugin", "marketplace", "add", str(box.plugin))
    claude(box, "plugin", "install", "autoharness@autoharness")
    settings = json.loads((box.claude / "settings.json").read_text())
    assert settings["enabledPlugins"] == {"autoharness@autoharness": True}
    seen = marker_then_report(box, model)
    assert "1 unprocessed marker" in seen and PLUGIN_SAVE in seen
    assert "Run: /save-learnings" not in seen
    r = box.ctl("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["hooks"]["ok"] and "plugin autoharness@autoharness" in checks["hooks"]["detail"]
    assert "/autoharness:save-learnings" in checks["commands"]["detail"], checks["commands"]


def test_plugin_dir_session_counts_and_names_the_plugins_command(box, model):
    """`claude --plugin-dir DIR` (nothing installed anywhere): the session counts and the next
    one is told `/autoharness:save-learnings`."""
    seen = marker_then_report(box, model, "--plugin-dir", str(box.plugin))
    assert "1 unprocessed marker" in seen and PLUGIN_SAVE in seen


def test_plugin_learn_command_queues_the_lesson(box, model):
    """`/autoharness:learn LESSON` (the plugin's name for /learn) runs its one Bash command
    and queues a learn job for that session."""
    model.script("plugin work", message_reply(bash("echo working")),
                 message_reply(text_block("Worked.")))
    args = ("--plugin-dir", str(box.plugin))
    sid = box.run("plugin work", *args)["session_id"]
    box.run("/autoharness:learn always run the linter first", "--resume", sid, *args)
    learn = [b for b in model.session_requests()
             if "<command-name>/autoharness:learn</command-name>" in
             "".join(strings(b["messages"]))]
    results = [blk for b in learn for m in b["messages"] if isinstance(m["content"], list)
               for blk in m["content"] if blk.get("type") == "tool_result"]
    assert results, "the model's Bash call got no result"
    out = "".join(strings(results[-1]["content"]))
    assert not results[-1].get("is_error") and "queued learn job" in out and sid in out


def test_plugin_and_settings_install_give_the_start_context_once(claude_cli, model):
    """The plugin (`--plugin-dir`) and `autoharnessctl install` both wired: both hooks run for
    every event, yet the session's tool call counts once and the model is given the start
    context (the marker rule) once."""
    box = Sandbox(claude_cli, model, {"AUTOHARNESS_REFLECT_EVERY": "1000"})
    try:
        layout = copy_layout(box)
        model.script("both installs", message_reply(bash("echo one")),
                     message_reply(text_block("Done.")))

        def counted_once(result) -> bool:
            st = box.status() or {"sessions": [], "events": {"by_kind": {}}}
            live = [s["activity"] for s in st["sessions"]
                    if s["session_id"] == result["session_id"]]
            return live == [1] and st["events"]["by_kind"].get("PreToolUse") == 2

        box.run_stream("both installs", "--plugin-dir", str(layout),
                       before_exit=lambda result: wait_for(lambda: counted_once(result),
                                                           timeout=90, what="one call, twice"))
        assert box.status()["events"]["by_kind"]["SessionStart"] == 2  # both hooks ran
        rule = box.ctl("learnings", "rule").stdout.strip().splitlines()[0]
        assert first_request(model, "both installs").count(rule) == 1
    finally:
        box.close()


def hook_errors(box: Sandbox, prompt: str) -> list[str]:
    """One `claude -p` session (a Bash call, then an answer) in stream-json: every hook error
    Claude Code reported — in its stream (a failed hook response, a hook-error notification),
    on stderr, or in the transcript (a hook error attachment)."""
    model = box.model
    model.script(prompt, message_reply(bash("echo hi")), message_reply(text_block("Done.")))
    r = subprocess.run([box.cli, "-p", prompt, "--output-format", "stream-json", "--verbose"],
                       cwd=box.project, env=box.env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    errors = []
    for line in r.stdout.splitlines():
        rec = json.loads(line)
        if rec.get("subtype") == "hook_response" and rec.get("outcome") != "success":
            errors.append(f"{rec.get('hook_name')}: {rec.get('stderr')}")
        if rec.get("subtype") == "notification" and "hook" in rec.get("key", ""):
            errors.append(rec.get("text", ""))
        if rec.get("type") == "result":
            sid = rec["session_id"]
    errors += [line for line in r.stderr.splitlines() if "hook" in line.lower()]
    for line in box.transcript(sid).read_text().splitlines():
        att = json.loads(line).get("attachment") or {}
        if "hook" in att.get("type", "") and (att.get("exitCode") or 0) != 0:
            errors.append(f"{att.get('hookName')}: {att.get('stderr')}")
    return errors


def test_a_vanished_settings_install_fails_silently(claude_cli, model):
    """Settings wired to an installation that is gone (its venv deleted): with the command
    `install` writes, Claude Code reports no hook error anywhere (stream, stderr, transcript);
    `doctor` names the missing interpreter and how to wire the hooks again. The form earlier
    versions wrote (the script's path alone) shows the error, on every event."""
    from claude_autoharness.client import settings as settings_mod

    box = Sandbox(claude_cli, model, install=False)
    try:
        gone = box.root / "gone-venv" / "bin"
        cmd = settings_mod.settings_command(str(gone / "autoharness-hook"), str(gone / "python3"))
        (box.claude / "settings.json").write_text(json.dumps(settings_mod.wire({}, cmd)))
        assert hook_errors(box, "vanished now") == []
        r = box.ctl("doctor", "--json")
        [hooks] = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "hooks"]
        assert not hooks["ok"] and str(gone / "python3") in hooks["detail"]
        assert "autoharnessctl install --scope user" in hooks["fix"]
        old = settings_mod.wire({}, str(gone / "autoharness-hook"))
        (box.claude / "settings.json").write_text(json.dumps(old))
        errors = hook_errors(box, "vanished before")
        assert any("not found" in e for e in errors), errors
    finally:
        box.close()
