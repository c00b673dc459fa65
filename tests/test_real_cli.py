"""End to end on the real Claude Code CLI (npm `@anthropic-ai/claude-code`), model scripted.

Each test is one fresh user (tests/real_cli.py: HOME, CLAUDE_CONFIG_DIR, AUTOHARNESS_HOME) with
autoharness installed; the CLI talks to a streaming loopback fake of the Messages API and never
to the network. The daemon is started by the hook (autostart), as on a real machine.
"""

import json
import re

from claude_autoharness.daemon.capture.records import WORK_TYPES, work_kind
from fake_anthropic import message_reply, text_block, tool_use_block
from harness import wait_for
from real_cli import CliModel, Sandbox, strings

SECRET = "AKIA" + "Q7R2X5W9ZK3M8B4N"  # an AWS access key id shape the redactor knows
MARKER = ("<!-- learning\ntopic: run-tests-first\nkind: convention\ndoc-impact: none\n"
          "body: Run the test suite before committing.\n-->")
QUOTED = ("<!-- learning\ntopic: quoted-in-file\nkind: discovery\ndoc-impact: none\n"
          "body: This marker is quoted in a file and must not be reported.\n-->\n")
LESSON = ("Quote \"$HOME\" and `pwd` literally; never ${X} or $(whoami) -- 'single' \\n\n"
          "second line: 100% $5\nAUTOHARNESS_LESSON\nafter a line that was once the end marker")


def bash(command: str) -> dict:
    return tool_use_block("Bash", {"command": command, "description": "run it"})


def reply(*blocks) -> dict:
    return message_reply(*blocks)


def three_steps(model: CliModel, key: str, final_text: str = "All three steps ran.") -> None:
    """Script session `key`: Bash, Read, Bash (one tool call per turn), then `final_text`."""
    model.script(key,
                 reply(text_block("Listing first."), bash("ls")),
                 reply(tool_use_block("Read", {"file_path": "notes.txt"})),
                 reply(bash("echo done")),
                 reply(text_block(final_text)))


def test_cli_runs_install_doctor_and_autostart(sandbox, model, claude_cli):
    """The installed CLI runs; `autoharnessctl install` wires it; the first session's hook
    starts the daemon (autostart) and waits for it, so that very session gets the SessionStart
    context (the marker rule reaches the model) and every one of its events counts, once, up
    to its SessionEnd; `doctor` passes."""
    box = sandbox()
    (box.project / "notes.txt").write_text("nothing here\n")
    assert box.status() is None  # not running before the first session
    three_steps(model, "autostart please")
    box.run("autostart please")
    st = wait_for(lambda: box.status(), what="autostarted daemon")
    wanted = {"SessionStart": 1, "UserPromptSubmit": 1, "PreToolUse": 3, "Stop": 1, "SessionEnd": 1}
    wait_for(lambda: (box.status() or {})["events"]["by_kind"] == wanted,
             what="the session's events in the daemon")
    rule = box.ctl("learnings", "rule").stdout.strip()
    [req] = [b for b in model.session_requests()
             if "autostart please" in "".join(strings(b["messages"][:1]))][:1]
    assert rule and rule.splitlines()[0] in "\n".join(
        strings(req.get("messages")) + strings(req.get("system")))
    r = box.ctl("doctor")
    assert r.returncode == 0, r.stdout + r.stderr
    assert st["pid"] > 0


def test_stream_json_mode_counts_exactly_and_stops(sandbox, model):
    """In stream-json mode (the CLI alive until its input closes) every tool call counts exactly
    once and each session's Stop reaches the daemon: session after session of Bash, Read, Bash,
    the live session shows activity 3 and the totals grow by 3 PreToolUse and 1 Stop."""
    box = sandbox(AUTOHARNESS_REFLECT_EVERY=1000)
    (box.project / "notes.txt").write_text("nothing here\n")

    def counted(sid, n):
        st = box.status() or {"sessions": [], "events": {"by_kind": {}}}
        live = [s["activity"] for s in st["sessions"] if s["session_id"] == sid]
        kinds = st["events"]["by_kind"]
        return live == [3] and kinds.get("PreToolUse") == 3 * n and kinds.get("Stop") == n

    for n in (1, 2, 3):
        three_steps(model, f"count run {n}")
        box.run_stream(f"count run {n}", before_exit=lambda result, n=n: wait_for(
            lambda: counted(result["session_id"], n), what=f"session {n} counted"))
    kinds = box.status()["events"]["by_kind"]
    assert kinds["PreToolUse"] == 9 and kinds["Stop"] == 3


def test_marker_rule_and_report_reach_the_model(sandbox, model):
    """A marker the assistant wrote in session 1 is reported at the next session's start: the
    request the model receives carries the marker rule and the report of exactly one marker of
    kind convention; the marker quoted inside a file the session read (kind discovery) is not
    counted."""
    box = sandbox(AUTOHARNESS_REFLECT_EVERY=1000)
    (box.project / "notes.txt").write_text("Some notes.\n" + QUOTED)
    three_steps(model, "first session", "Done.\n\n" + MARKER)
    box.run("first session")
    wait_for(lambda: box.status(), what="daemon")
    rule = box.ctl("learnings", "rule").stdout.strip()
    assert rule
    model.script("second session", reply(text_block("Hello.")))
    box.run("second session")
    [req] = [b for b in model.session_requests()
             if "second session" in "".join(strings(b["messages"][:1]))][:1]
    seen = "\n".join(strings(req.get("messages")) + strings(req.get("system")))
    assert rule.splitlines()[0] in seen
    assert "1 unprocessed marker" in seen and "1 convention" in seen
    assert "discovery" not in seen.split(rule.splitlines()[0])[0]  # the report, before the rule


def _reflection_lands(box: Sandbox, model: CliModel) -> None:
    """A session whose Bash output carries a planted secret crosses the threshold (2 calls);
    the reflection lands the proposed skill, no reflector request carries the secret, and the
    capture stats count the bookkeeping records left out of the window."""
    (box.project / "config.env").write_text(f"AWS_ACCESS_KEY_ID={SECRET}\n")
    model.script("reflect me",
                 reply(bash("cat config.env")),
                 reply(bash("echo checked")),
                 reply(text_block("The config holds an AWS key; checked.")))
    model.propose({"action": "create", "skill": "check-config-keys", "layer": "project",
                   "reason": "the session checked config.env before running",
                   "evidence": "The config holds an AWS key; checked.",
                   "description": "Use when a project's config.env must be checked first.",
                   "body": "1. Read config.env.\n2. Check the keys are set.",
                   "old": None, "new": None, "path": None, "content": None, "check": None})
    # stream-json mode: the CLI stays up until the daemon has the Stop that triggers the job
    result = box.run_stream("reflect me", before_exit=lambda _: wait_for(
        lambda: box.stops() == 1, what="the Stop"))
    assert result["subtype"] == "success"
    wait_for(lambda: box.skill("check-config-keys").exists(), timeout=60,
             what="the reflected skill to land")
    assert any(SECRET in "".join(strings(b["messages"])) for b in model.session_requests())
    reflections = model.reflector_requests()
    assert reflections
    for body in reflections:
        assert SECRET not in json.dumps(body)
    capture = box.status()["capture"]  # the window left Claude Code's bookkeeping out
    assert capture["windows_cut"] >= 1 and capture["bookkeeping_records"] > 0


def test_threshold_reflection_through_the_anthropic_backend(sandbox, model):
    """The SDK backend (against the fake) reflects on a real CLI transcript and lands a skill;
    the planted secret reaches no reflector request."""
    box = sandbox(AUTOHARNESS_REFLECT_EVERY=2, AUTOHARNESS_REFLECTOR_BACKEND="anthropic")
    _reflection_lands(box, model)


def test_threshold_reflection_through_the_claude_backend(sandbox, model, claude_cli):
    """The `claude` backend runs the real CLI as its child (structured output, no tools, no
    hooks) against the fake and lands a skill; the planted secret reaches no reflector request
    and the child never counts as a session."""
    box = sandbox(AUTOHARNESS_REFLECT_EVERY=2, AUTOHARNESS_REFLECTOR_BACKEND="claude",
                  AUTOHARNESS_REFLECTOR_CLAUDE_PATH=claude_cli)
    _reflection_lands(box, model)
    by_kind = box.status()["events"]["by_kind"]
    assert by_kind["SessionStart"] == 1 and by_kind["PreToolUse"] == 2  # the user's session only


def test_learn_slash_command_runs_in_p_mode_for_the_session(sandbox, model):
    """`/learn LESSON` on a resumed session runs its one Bash command under the command's own
    allowed-tools (no permission denial), queues a learn job for that same session, and the
    lesson reaches the reflector verbatim: quotes, backticks, `$`, the newlines and a line
    equal to a heredoc end marker kept."""
    box = sandbox(AUTOHARNESS_REFLECT_EVERY=1000, AUTOHARNESS_REFLECTOR_BACKEND="anthropic")
    model.script("some work", reply(bash("echo working")), reply(text_block("Worked.")))
    sid = box.run("some work")["session_id"]
    result = box.run(f"/learn {LESSON}", "--resume", sid)
    assert result["session_id"] == sid
    learn = [b for b in model.session_requests()
             if "<command-name>/learn</command-name>" in "".join(strings(b["messages"]))]
    results = [blk for b in learn for m in b["messages"] if isinstance(m["content"], list)
               for blk in m["content"] if blk.get("type") == "tool_result"]
    assert results, "the model's Bash call got no result"
    out = "".join(strings(results[-1]["content"]))
    assert not results[-1].get("is_error"), out
    assert "queued learn job" in out and sid in out
    # the first session's own SessionEnd job may reflect first: the lesson is in one request
    wait_for(lambda: any(LESSON in "\n".join(strings(r["messages"]))
                         for r in model.reflector_requests()),
             timeout=60, what="the learn reflection, lesson verbatim")


def test_learn_slash_command_runs_interactively(sandbox, model):
    """In a terminal session with `--permission-mode default` (so a refused command would stop
    at a permission prompt), `/learn LESSON` runs without a prompt, queues a learn job for that
    session (the one whose transcript the CLI writes) and the lesson reaches the reflector
    verbatim."""
    box = sandbox(AUTOHARNESS_REFLECT_EVERY=1000, AUTOHARNESS_REFLECTOR_BACKEND="anthropic")
    lesson = "keep \"$HOME\" and `pwd` and ${X} as typed -- 'single' 100% $5"
    term = box.interactive("--permission-mode", "default")
    try:
        wait_for(lambda: "forshortcuts" in term.screen(), timeout=90, what="the input prompt")
        typed = f"/learn {lesson}"
        term.type(typed)  # the Enter goes once the input box shows all of it (else: a paste)
        wait_for(lambda: re.sub(r"\s+", "", typed) in term.screen(), what="echo")
        term.type("\r")

        def tool_result():
            for body in model.session_requests():
                for m in body["messages"]:
                    for blk in m["content"] if isinstance(m["content"], list) else []:
                        if blk.get("type") == "tool_result":
                            return blk
            return None
        result = wait_for(tool_result, timeout=90, what="the /learn command's Bash result")
        out = "".join(strings(result["content"]))
        assert not result.get("is_error"), out
        sid = re.search(r"queued learn job \S+ \(session ([0-9a-f-]{36})\)", out).group(1)
        assert box.transcript(sid).exists()
        wait_for(lambda: any(lesson in "\n".join(strings(r["messages"]))
                             for r in model.reflector_requests()),
                 timeout=60, what="the learn reflection, lesson verbatim")
    finally:
        term.close()


def test_save_learnings_slash_command(sandbox, model):
    """`/save-learnings` runs `autoharnessctl learnings save` through the command's `!` line:
    the marker lands in the project's journal and the save output reaches the model."""
    box = sandbox(AUTOHARNESS_REFLECT_EVERY=1000)
    (box.project / "notes.txt").write_text("nothing here\n")
    three_steps(model, "marker session", "Done.\n\n" + MARKER)
    box.run("marker session")
    wait_for(lambda: box.status(), what="daemon")
    before = len(model.session_requests())
    box.run("/save-learnings")
    [req] = model.session_requests()[before:][:1]
    seen = "\n".join(strings(req["messages"]))
    assert "run-tests-first" in seen
    journal = "\n".join(p.read_text() for p in (box.project / ".claude" / "journal").glob("*.md"))
    assert "Run the test suite before committing." in journal


def test_window_on_the_transcript_the_cli_wrote(sandbox, model):
    """`autoharnessctl capture` on the session the CLI just wrote: the window holds only
    conversation records (>= 90 % of its bytes) and the bookkeeping it left out is counted."""
    box = sandbox(AUTOHARNESS_REFLECT_EVERY=1000)
    (box.project / "notes.txt").write_text("nothing here\n")
    three_steps(model, "window session")
    sid = box.run("window session")["session_id"]
    path = box.transcript(sid)
    r = box.ctl("capture", "--transcript", str(path), "--json")
    assert r.returncode == 0, r.stderr
    packet = json.loads(r.stdout)
    lines = [ln for ln in packet["window"].splitlines(keepends=True)
             if not ln.startswith("[autoharness:")]
    types = [json.loads(ln)["type"] for ln in lines]
    assert set(types) <= WORK_TYPES and "assistant" in types and "user" in types
    conv = sum(len(ln.encode()) for ln in lines)
    assert conv >= 0.9 * len(packet["window"].encode())
    raw = path.read_bytes().splitlines()
    bookkeeping = [ln for ln in raw if work_kind(json.loads(ln)) is not None]
    assert packet["bookkeeping_records"] == len(bookkeeping) > 0


def test_a_skill_the_real_cli_loads_is_judged_helped(sandbox, model):
    """A landed skill, then a real session whose agent calls the Skill tool on it: the CLI
    records the call in its transcript, the reflection's `helped` verdict is grounded in that
    record and accepted (and the Skill call counted as a use); a verdict naming a layer the
    skill is not in is refused."""
    box = sandbox(AUTOHARNESS_REFLECT_EVERY=2, AUTOHARNESS_REFLECTOR_BACKEND="anthropic")
    _reflection_lands(box, model)
    model.script("use the skill",
                 reply(tool_use_block("Skill", {"skill": "check-config-keys"})),
                 reply(bash("echo keys-set")),
                 reply(text_block("Following the skill: the keys are set.")))
    model.give_feedback(
        {"skill": "check-config-keys", "layer": "project", "verdict": "helped",
         "evidence": "Following the skill: the keys are set."},
        {"skill": "check-config-keys", "layer": "user", "verdict": "missed",
         "evidence": "Following the skill"})
    result = box.run_stream("use the skill", "--allowedTools", "Skill,Bash",
                            before_exit=lambda _: wait_for(lambda: box.stops() == 2,
                                                           what="the Stop"))
    assert result["subtype"] == "success"
    text = box.transcript(result["session_id"]).read_text()
    assert '"name":"Skill"' in text.replace(" ", "")

    def grounded():
        r = box.ctl("queue", "feedback", "--json")
        got = json.loads(r.stdout) if r.returncode == 0 else []
        return got if len(got) == 2 and all(v["status"] != "queued" for v in got) else None
    got = wait_for(grounded, timeout=60, what="verdicts grounded")
    assert {(v["verdict"]["verdict"], v["status"]) for v in got} == {
        ("helped", "accepted"), ("missed", "rejected")}
    listed = json.loads(box.ctl("skills", "list", "--json", "--project",
                                str(box.project)).stdout)
    [s] = [s for s in listed if s["name"] == "check-config-keys"]
    assert s["feedback"]["helped"] == 1 and s["uses"] == 1
