"""A lesson with a check, end to end on the real Claude Code CLI (model scripted).

One user corrects a bare `pytest` to `uv run pytest` in a real session; the reflection lands
a skill with a check. In the next session the model's `pytest` call runs, and the reminder
reaches the model in its next request; once the user approves the check, the call is denied
with the lesson as the reason and the model's next call is the compliant one; the adherence
counts show both.
"""

import json
import subprocess

from check_support import CORRECTION, MESSAGE, proposal
from fake_anthropic import message_reply, text_block, tool_use_block
from harness import wait_for
from real_cli import CliModel, Sandbox, copy_layout, strings

SKILL = "run-tests-with-uv"
LESSON = f"autoharness lesson `{SKILL}`"


def bash(command: str) -> dict:
    return tool_use_block("Bash", {"command": command, "description": "run it"})


def reply(*blocks) -> dict:
    return message_reply(*blocks)


def stream_session(box: Sandbox, *prompts: str, stops: int) -> str:
    """A `--input-format stream-json` session of several prompts, one after the other's
    result; stays up until the daemon has counted `stops` Stops. Its session id."""
    proc = subprocess.Popen(
        [box.cli, "-p", "--input-format", "stream-json", "--output-format", "stream-json",
         "--verbose", "--allowedTools", "Bash"],
        cwd=box.project, env=box.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    sid = ""
    try:
        for prompt in prompts:
            proc.stdin.write(json.dumps({"type": "user", "message": {
                "role": "user", "content": prompt}}) + "\n")
            proc.stdin.flush()
            for line in proc.stdout:
                record = json.loads(line)
                if record.get("type") == "result":
                    assert record["subtype"] == "success", record
                    sid = record["session_id"]
                    break
        wait_for(lambda: box.stops() >= stops, what="the Stops")
        proc.stdin.close()
        assert proc.wait(120) == 0, proc.stderr.read()[-2000:]
        return sid
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def requests_after(model: CliModel, key: str) -> list[str]:
    """The text of each session request made after the first that carries `key`."""
    bodies = ["\n".join(strings(b.get("messages"))) for b in model.session_requests()]
    first = next((i for i, t in enumerate(bodies) if key in t), len(bodies))
    return bodies[first:]


def check_figures(box: Sandbox) -> dict:
    listed = json.loads(box.ctl("skills", "list", "--json", "--project",
                                str(box.project)).stdout)
    [s] = [s for s in listed if s["name"] == SKILL]
    return s["check"]


def test_a_corrected_call_is_reminded_then_denied_and_the_counts_show_it(sandbox, model):
    box = sandbox(AUTOHARNESS_REFLECT_EVERY=2, AUTOHARNESS_REFLECTOR_BACKEND="anthropic")
    # 1. the user corrects the agent: bare pytest, then uv run pytest
    model.script("please run the tests", reply(bash("pytest -q")),
                 reply(text_block("The tests could not import the package.")))
    model.script("never run bare pytest", reply(bash("uv run pytest -q")),
                 reply(text_block("Ran them through uv.")))
    model.propose(proposal(evidence=CORRECTION))
    stream_session(box, "please run the tests", CORRECTION, stops=2)
    skill = box.project / ".claude" / "skills" / SKILL
    wait_for(lambda: (skill / "check.json").exists(), timeout=60, what="the skill and its check")
    wait_for(lambda: check_figures(box)["adherence"], timeout=30, what="the baseline")
    before = check_figures(box)
    assert (before["rule"], before["action"], before["proposed"]) == \
        ("Bash(pytest *)", "remind", "deny")
    [a] = before["adherence"]
    assert (a["before_calls"], a["before_violations"], a["before_sessions"]) == (2, 1, 1)

    # 2. the next session: the call runs, the reminder reaches the model with its result
    model.script("run the suite now", reply(bash("pytest -q")),
                 reply(text_block("Ran the suite.")))
    stream_session(box, "run the suite now", stops=3)
    later = requests_after(model, "run the suite now")
    assert len(later) == 2 and LESSON not in later[0] and LESSON in later[1]
    assert MESSAGE in later[1]

    # 3. approved: the call is denied with the lesson, and the model's next call complies
    r = box.ctl("skills", "check", "approve", SKILL, "--project", str(box.project))
    assert r.returncode == 0, r.stderr
    model.script("test it once more", reply(bash("pytest -x")),
                 reply(bash("uv run pytest -x")), reply(text_block("Done through uv.")))
    sid = stream_session(box, "test it once more", stops=4)
    last = requests_after(model, "test it once more")
    assert len(last) == 3 and LESSON in last[1]
    records = [json.loads(x) for x in box.transcript(sid).read_text().splitlines()]
    calls = [b["input"]["command"] for rec in records if rec.get("type") == "assistant"
             for b in rec["message"]["content"] if b.get("type") == "tool_use"]
    assert calls == ["pytest -x", "uv run pytest -x"]
    denied = [b for rec in records if rec.get("type") == "user"
              and isinstance(rec["message"].get("content"), list)
              for b in rec["message"]["content"] if b.get("type") == "tool_result"]
    assert LESSON in json.dumps(denied[0]) and denied[0].get("is_error")

    # 4. the counts: reminded once, denied once, and the call after the deny complied
    def counted():
        c = check_figures(box)
        return c if c["adherence"][0]["calls"] >= 3 else None
    c = wait_for(counted, timeout=30, what="the adherence counts")
    [a] = c["adherence"]
    assert (c["action"], c["confirmed"]) == ("deny", "user")
    assert (a["calls"], a["violations"], a["reminded"], a["denied"], a["complied"]) == \
        (3, 2, 1, 1, 1)
    shown = box.ctl("skills", "show", SKILL, "--project", str(box.project)).stdout
    assert "since landing: 2 in 3 calls (reminded 1, denied 1, complied 1)" in shown


def test_a_hand_written_skill_is_never_given_a_check(sandbox, model):
    """A skill the user wrote, then a session that corrects the call it is about: the
    reflection's update carrying a check is refused, and nothing holds the next call."""
    box = sandbox(AUTOHARNESS_REFLECT_EVERY=2, AUTOHARNESS_REFLECTOR_BACKEND="anthropic")
    skill = box.project / ".claude" / "skills" / SKILL
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(f"---\nname: {SKILL}\ndescription: Use when testing.\n"
                                    "---\n\nRun the tests.\n")
    model.script("please run the tests", reply(bash("pytest -q")),
                 reply(text_block("The tests could not import the package.")))
    model.script("never run bare pytest", reply(bash("uv run pytest -q")),
                 reply(text_block("Ran them through uv.")))
    model.propose(proposal(action="update", evidence=CORRECTION))
    stream_session(box, "please run the tests", CORRECTION, stops=2)
    wait_for(lambda: box.status()["intents"]["rejected"] == 1, timeout=60, what="the refusal")
    [i] = json.loads(box.ctl("queue", "list", "--json").stdout)
    assert "not_owned" in {f["code"] for f in i["findings"]}
    assert not (skill / "check.json").exists()
    model.script("run the suite now", reply(bash("pytest -q")),
                 reply(tool_use_block("Bash", {"command": "echo ok"})),
                 reply(text_block("Ran the suite.")))
    stream_session(box, "run the suite now", stops=3)
    assert not any(LESSON in t for t in requests_after(model, "run the suite now"))


def test_the_plugins_check_hook_reminds_too(claude_cli, model, monkeypatch):
    """Installed as a plugin (`--plugin-dir`, nothing in the settings), the check hook entry of
    the plugin's hooks.json holds the call against a landed lesson's check the same way."""
    import msgspec

    from check_support import WINDOW
    from claude_autoharness.daemon.persist.dirs import ensure_private_dir
    from claude_autoharness.daemon.promote.land import Promoter
    from claude_autoharness.daemon.proposals import Intent, Proposal
    from claude_autoharness.protocol import paths
    from claude_autoharness.protocol.config import PromoterConfig

    box = Sandbox(claude_cli, model, {"AUTOHARNESS_REFLECT_EVERY": "1000"}, install=False)
    try:
        plugin = copy_layout(box)
        for k in ("AUTOHARNESS_HOME", "CLAUDE_CONFIG_DIR", "HOME"):
            monkeypatch.setenv(k, box.env[k])
        ensure_private_dir(paths.state_dir())
        p = msgspec.convert(proposal(evidence=CORRECTION), Proposal)
        pr = Promoter(PromoterConfig())
        out = pr.promote(Intent(id="plugin-1", source="reflector", created_at=0.0, proposal=p),
                         WINDOW, str(box.project))
        assert out.status == "landed", out.findings
        pr.write_check_table()  # as the daemon's first pass will
        model.script("run the suite now", reply(bash("pytest -q")),
                     reply(text_block("Ran the suite.")))
        box.run("run the suite now", "--plugin-dir", str(plugin), "--allowedTools", "Bash")
        later = requests_after(model, "run the suite now")
        assert len(later) == 2 and LESSON in later[1]
    finally:
        box.close()
