"""Checks through the real daemon and the fake Anthropic server: a window where the user
corrects `pytest` to `uv run pytest` lands a skill with a check, the daemon compiles the
check hook's table, and the real hook client reminds, then (once approved) denies; checks
that would hold every call, or not the quoted one, are refused with the reason."""

import json
import os
import re

import pytest

from check_support import WINDOW, check, proposal
from claude_autoharness.protocol import paths
from fake_anthropic import FakeAnthropic, tool_reply
from harness import ctl, hook, wait_for
from pipeline_support import Env

CHECK_ENV = {"AUTOHARNESS_HOOK": "check"}


@pytest.fixture
def fake():
    with FakeAnthropic() as f:
        yield f


@pytest.fixture
def env(home, fake, monkeypatch):
    e = Env(home, fake, monkeypatch, sid="sess-checks")
    e.transcript.write_text(WINDOW)
    yield e
    e.daemon.stop()


def table() -> tuple[list[str], list[dict]]:
    head, body = open(paths.checks_table_file(), encoding="utf-8").read().split("\n", 1)
    return head.split(), json.loads(body)["checks"]


def check_hook(e: Env, command: str, cwd=None) -> dict | None:
    """The real hook client in check mode on a PreToolUse of `command`; its decision."""
    r = hook(e.ev("PreToolUse", tool_name="Bash", tool_input={"command": command},
                  cwd=str(cwd or e.project)), env=CHECK_ENV)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode().strip()
    return json.loads(out)["hookSpecificOutput"] if out else None


def test_a_corrected_call_lands_a_skill_with_a_check_that_reminds_then_denies(env, fake):
    fake.push(tool_reply({"proposals": [proposal()]}))
    env.work()
    wait_for(lambda: env.status()["intents"]["landed"] == 1, timeout=60, what="landing")
    d = env.project / ".claude" / "skills" / "run-tests-with-uv"
    assert json.loads((d / "check.json").read_text())["rule"] == "Bash(pytest *)"
    wait_for(lambda: os.path.exists(paths.checks_table_file()), what="check table")
    assert os.stat(paths.checks_table_file()).st_mode & 0o777 == 0o600
    tools, [c] = table()
    assert tools == ["Bash"] and (c["rule"], c["action"]) == ("Bash(pytest *)", "remind")
    # a new check only reminds: the call runs, the model is told
    out = check_hook(env, "pytest -q")
    assert out is not None and "permissionDecision" not in out
    assert "uv run pytest" in out["additionalContext"]
    assert "run-tests-with-uv" in out["additionalContext"]
    assert check_hook(env, "uv run pytest -q") is None
    assert check_hook(env, "autoharnessctl learn 'pytest *'") is None  # its own calls
    other = env.home["tmp"] / "other"
    other.mkdir()
    assert check_hook(env, "pytest -q", cwd=other) is None  # another project's lesson
    # tool calls wake the promoter loop; the table is written again only when checks change
    inode = os.stat(paths.checks_table_file()).st_ino
    for _ in range(3):
        hook(env.ev("PreToolUse", tool_name="Bash", tool_input={"command": "pytest"}))
    wait_for(lambda: counted(env)["adherence"][0]["calls"] == 3, what="the calls counted")
    assert os.stat(paths.checks_table_file()).st_ino == inode
    # approved: the proposed deny applies, with the lesson as the reason
    r = ctl("skills", "check", "approve", "run-tests-with-uv", "--project", str(env.project))
    assert r.returncode == 0, r.stderr
    assert "deny" in r.stdout and "confirmed by user" in r.stdout
    out = check_hook(env, "cd tests && pytest -x")
    assert out["permissionDecision"] == "deny"
    assert "uv run pytest" in out["permissionDecisionReason"]
    assert check_hook(env, "uv run pytest -x") is None
    assert os.stat(paths.checks_table_file()).st_ino != inode
    # a damaged table fails open, and the daemon's next pass writes it whole again
    whole = open(paths.checks_table_file(), "rb").read()
    with open(paths.checks_table_file(), "wb") as f:
        f.write(whole[: len(whole) // 2])
    assert check_hook(env, "pytest -q") is None
    hook(env.ev("PreToolUse", tool_name="Bash", tool_input={"command": "ls"}))
    wait_for(lambda: open(paths.checks_table_file(), "rb").read() == whole, what="the repair")


def counted(e: Env) -> dict:
    [s] = [s for s in json.loads(ctl("skills", "list", "--json", "--project",
                                     str(e.project)).stdout) if s["name"] == "run-tests-with-uv"]
    return s["check"]


def test_adherence_counts_before_and_after_landing(env, fake):
    """Before: the project's transcripts (the window itself: 1 violation in 3 Bash calls).
    Since: each main-session call the counting hook reports, held against the table in force:
    reminded while new, denied once approved, and whether the next call complied."""
    fake.push(tool_reply({"proposals": [proposal()]}))
    env.work()
    wait_for(lambda: env.status()["intents"]["landed"] == 1, timeout=60, what="landing")
    wait_for(lambda: counted(env)["adherence"], what="baseline")
    [a] = counted(env)["adherence"]
    assert (a["project"], a["tool"], a["before_calls"], a["before_violations"],
            a["before_sessions"], a["calls"]) == (str(env.project), "Bash", 3, 1, 1, 0)

    def call(command, sid="sess-next"):
        hook({**env.ev("PreToolUse", tool_name="Bash", tool_input={"command": command}),
              "session_id": sid})

    call("pytest -q")  # reminded
    call("ls")
    wait_for(lambda: counted(env)["adherence"][0]["calls"] == 2, what="counts")
    a = counted(env)["adherence"][0]
    assert (a["violations"], a["reminded"], a["denied"]) == (1, 1, 0)
    ctl("skills", "check", "approve", "run-tests-with-uv", "--project", str(env.project))
    call("pytest -x")  # denied
    call("uv run pytest -x")  # the next call complied
    call("pytest", sid="sess-third")  # denied
    call("pytest -q", sid="sess-third")  # repeated: the user insisted
    wait_for(lambda: counted(env)["adherence"][0]["calls"] == 6, what="counts")
    a = counted(env)["adherence"][0]
    assert (a["violations"], a["reminded"], a["denied"], a["complied"], a["repeated"]) == \
        (4, 1, 3, 1, 1)
    c = counted(env)
    assert (c["action"], c["proposed"], c["confirmed"]) == ("deny", "deny", "user")
    shown = ctl("skills", "show", "run-tests-with-uv", "--project", str(env.project)).stdout
    figure = ("before: 1 violation in 3 `Bash` calls (1 session); since landing: 4 in 6 calls "
              "(reminded 1, denied 3, complied 1, repeated 1)")
    assert figure in shown
    # status, report (text, JSON, page) show the same figures per lesson
    [lc] = json.loads(ctl("status", "--json").stdout)["library"]["checks"]
    assert (lc["skill"], lc["check"]["adherence"][0]["violations"]) == ("run-tests-with-uv", 4)
    text = ctl("status").stdout
    assert "check run-tests-with-uv [project]: Bash(pytest *) -> deny" in text and figure in text
    assert figure in ctl("report").stdout
    rep = json.loads(ctl("report", "--json").stdout)
    [row] = [s for s in rep["skills"] if s["name"] == "run-tests-with-uv"]
    assert row["check"]["adherence"][0]["denied"] == 3
    page = env.home["tmp"] / "report.html"
    assert ctl("report", "--html", str(page)).returncode == 0
    html = page.read_text()
    assert re.search(r'data-figure="skills\.\d+\.check\.adherence\.0\.violations" '
                     r'data-value="4">4<', html)


def test_a_second_window_with_the_same_violation_confirms_the_check(env, fake):
    fake.push(tool_reply({"proposals": [proposal()]}))
    env.work()
    wait_for(lambda: env.status()["intents"]["landed"] == 1, timeout=60, what="landing")
    assert counted(env)["action"] == "remind"
    # another session, the same correction: the reflector updates the lesson, same rule
    second = env.transcript.with_name("sess-other.jsonl")
    second.write_text(WINDOW)

    def ev(name, **kw):
        return {**env.ev(name, **kw), "session_id": "sess-other", "transcript_path": str(second)}

    fake.push(tool_reply({"proposals": [proposal(action="update")]}))
    for _ in range(2):
        hook(ev("PreToolUse", tool_name="Bash", tool_input={"command": "ls"}))
    hook(ev("Stop"))
    wait_for(lambda: env.status()["intents"]["landed"] == 2, timeout=60, what="update")
    wait_for(lambda: counted(env)["action"] == "deny", what="confirmed")
    assert counted(env)["confirmed"] == "repeat"


@pytest.mark.parametrize("rule, words", [
    ("Bash(*)", "matches every Bash call"),
    ("Bash(npm test*)", "does not match the quoted call `pytest -q tests/`"),
])
def test_a_check_that_holds_every_call_or_not_the_quoted_one_is_refused(env, fake, rule, words):
    fake.push(tool_reply({"proposals": [proposal(check=check(rule=rule))]}))
    env.work()
    wait_for(lambda: env.status()["intents"]["rejected"] == 1, timeout=60, what="refusal")
    [i] = env.intents()
    assert any(words in f["message"] for f in i["findings"]), i["findings"]
    assert not (env.project / ".claude" / "skills").exists()
    r = ctl("queue", "show", i["id"])
    assert words in r.stdout


def test_approving_a_skill_without_a_check_says_so(env, fake):
    fake.push(tool_reply({"proposals": [proposal(check=None)]}))
    env.work()
    wait_for(lambda: env.status()["intents"]["landed"] == 1, timeout=60, what="landing")
    r = ctl("skills", "check", "approve", "run-tests-with-uv", "--project", str(env.project))
    assert r.returncode != 0 and "has no check" in r.stderr
    r = ctl("skills", "check", "approve", "nope", "--project", str(env.project))
    assert r.returncode != 0


@pytest.mark.parametrize("damage", [b"", b"Bash\n{not json", b"Bash\n[]\n", b"\x00" * 64,
                                    b"Bash\n" + json.dumps({"v": 1, "checks": [
                                        {"rule": "Bash(*)", "action": "deny",
                                         "message": "x", "root": None}]}).encode()])
def test_a_damaged_table_fails_open(home, damage):
    """Whatever the table holds, a call is never blocked by a table that is not one (a rule
    that would hold every call is not a check either)."""
    paths.make_private_dirs(paths.state_dir())
    with open(paths.checks_table_file(), "wb") as f:
        f.write(damage)
    os.chmod(paths.checks_table_file(), 0o600)
    r = hook({"session_id": "s", "hook_event_name": "PreToolUse", "cwd": str(home["tmp"]),
              "tool_name": "Bash", "tool_input": {"command": "pytest -q"}}, env=CHECK_ENV)
    assert (r.returncode, r.stdout) == (0, b"")


def test_a_table_others_may_write_is_not_read(home):
    paths.make_private_dirs(paths.state_dir())
    body = {"v": 1, "checks": [{"skill": "s", "rule": "Bash(pytest *)", "action": "deny",
                                "message": "no", "root": None}]}
    path = paths.checks_table_file()
    with open(path, "w") as f:
        f.write("Bash\n" + json.dumps(body) + "\n")
    ev = {"session_id": "s", "hook_event_name": "PreToolUse", "cwd": str(home["tmp"]),
          "tool_name": "Bash", "tool_input": {"command": "pytest -q"}}
    os.chmod(path, 0o600)
    assert b"deny" in hook(ev, env=CHECK_ENV).stdout  # the same table, private: read
    os.chmod(path, 0o622)
    assert hook(ev, env=CHECK_ENV).stdout == b""
    os.chmod(path, 0o600)
    assert hook(ev, env={**CHECK_ENV, "AUTOHARNESS_CHILD_SESSION": "1"}).stdout == b""


def test_the_check_hook_imports_neither_json_nor_re(home):
    """Deciding a matching call (a deny, with its output) loads no `json` and no `re`: the
    table and the event are read with `_json`'s C scanner alone."""
    import subprocess
    import sys

    from harness import HOOK

    paths.make_private_dirs(paths.state_dir())
    body = {"v": 1, "checks": [{"skill": "s", "rule": "Bash(pytest *)", "action": "deny",
                                "message": "use uv run pytest", "root": None}]}
    with open(paths.checks_table_file(), "w") as f:
        f.write("Bash\n" + json.dumps(body) + "\n")
    os.chmod(paths.checks_table_file(), 0o600)
    ev = json.dumps({"session_id": "s", "hook_event_name": "PreToolUse", "cwd": str(home["tmp"]),
                     "tool_name": "Bash", "tool_input": {"command": "pytest -q"}}).encode()
    r = subprocess.run([sys.executable, "-X", "importtime", HOOK], input=ev, capture_output=True,
                       timeout=60, env=dict(os.environ, **CHECK_ENV))
    assert json.loads(r.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    mods = {line.split("|")[-1].strip().split(".")[0]
            for line in r.stderr.decode().splitlines() if line.startswith("import time:")}
    editable = any(name.startswith("__editable__") for name in mods)
    assert "json" not in mods and "msgspec" not in mods
    assert editable or "re" not in mods
