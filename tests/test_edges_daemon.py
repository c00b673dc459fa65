"""The edges of a real session through the real daemon, the real hook client and the fake
Anthropic server (real SDK): the turn's final answer written after Stop, subagent calls, a
forked session's copied history, a /learn-only session. Transcripts are Claude Code 2.1.328's
own (tests/corpus/claude-code), placed under CLAUDE_CONFIG_DIR/projects.
"""

import json
import os
import stat
import time
from pathlib import Path

import pytest

from conftest import CORPUS
from fake_anthropic import FakeAnthropic, tool_reply
from harness import Daemon, ctl, hook, wait_for

CC = CORPUS / "claude-code"
RESUMED = CC / "transcripts" / "resumed.jsonl"
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def payload(line: int) -> dict:
    return json.loads((CC / "hook-payloads.jsonl").read_text().splitlines()[line - 1])


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def stamp(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


class Box:
    """A project dir under CLAUDE_CONFIG_DIR/projects, a fake API and a daemon."""

    def __init__(self, home, fake, monkeypatch, **env):
        self.home = home
        self.fake = fake
        self.project = home["tmp"] / "proj"
        self.project.mkdir(exist_ok=True)
        self.dir = home["claude"] / "projects" / "-proj"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.env = {"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key",
                    "ANTHROPIC_BASE_URL": fake.base_url, "AUTOHARNESS_REFLECT_EVERY": "2",
                    "AUTOHARNESS_REFLECTOR_BACKOFF_BASE_S": "0.05",
                    **{k: str(v) for k, v in env.items()}}
        for k, v in self.env.items():
            monkeypatch.setenv(k, v)
        self.daemon = Daemon(home["home"])

    def path(self, sid: str) -> Path:
        return self.dir / f"{sid}.jsonl"

    def ev(self, name: str, sid: str, **kw) -> dict:
        return {"session_id": sid, "transcript_path": str(self.path(sid)),
                "cwd": str(self.project), "hook_event_name": name, **kw}

    def send(self, name: str, sid: str, **kw) -> None:
        r = hook(self.ev(name, sid, **kw))
        assert r.returncode == 0, r.stderr

    def bash(self, sid: str, n: int, **kw) -> None:
        for i in range(n):
            self.send("PreToolUse", sid, tool_name="Bash", tool_input={"command": "ls"},
                      tool_use_id=f"toolu_{sid}_{i}_{time.monotonic_ns()}", **kw)

    def status(self) -> dict:
        return self.daemon.status()

    def session(self, sid: str) -> dict:
        [s] = [s for s in self.status()["sessions"] if s["session_id"] == sid]
        return s

    def requests(self) -> list[str]:
        return [r.body.decode() for r in self.fake.messages_requests]

    def done(self, n: int, timeout: float = 60) -> None:
        wait_for(lambda: self.status()["jobs"]["done"] == n, timeout=timeout,
                 what=f"{n} jobs done")


@pytest.fixture
def fake():
    with FakeAnthropic() as f:
        f.default = tool_reply({"proposals": []})
        yield f


@pytest.fixture
def box(home, fake, monkeypatch):
    boxes = []

    def make(**env) -> Box:
        b = Box(home, fake, monkeypatch, **env)
        boxes.append(b)
        return b

    yield make
    for b in boxes:
        b.daemon.stop()


def quiet(path: Path) -> None:
    """The file was last written long ago: the model is thinking (a settle wait returns)."""
    old = time.time() - 3600
    os.utime(path, (old, old))


def final_index(lines: list[bytes]) -> int:
    return next(i for i, ln in enumerate(lines) if b"Done: all three steps ran" in ln)


def test_stop_job_waits_for_the_final_answer_written_after_stop(box):
    """Claude Code appends the turn's final assistant record after the Stop hook, and the
    transcript was quiet while the model thought: the threshold job waits until the record
    is there, so its window ends after the turn's final answer (the real record, with its
    marker) — it does not stand in for it."""
    b = box()
    stop = payload(5)
    sid = "final-late"
    lines = lines_of(RESUMED)
    i = final_index(lines)
    b.path(sid).write_bytes(b"".join(lines[:i]))
    quiet(b.path(sid))
    b.send("SessionStart", sid, source="startup")
    b.bash(sid, 2)
    b.send("Stop", sid, prompt_id=stop["prompt_id"],
           last_assistant_message=stop["last_assistant_message"])
    wait_for(lambda: b.status()["jobs"]["running"] == 1, what="the job, waiting")
    with open(b.path(sid), "ab") as f:
        f.write(b"".join(lines[i:42]))
    b.done(1)
    [req] = b.requests()
    # the record's text (a window record carries no uuid) and its marker, not the stand-in
    assert "Done: all three steps ran" in req and "topic: run-tests-first" in req
    assert "Stop event" not in req  # the transcript's own record, not the stand-in
    assert b.status()["jobs"]["by_kind"] == {"threshold": 1}


def test_stop_job_carries_the_final_answer_when_the_record_never_comes(box):
    """The final record never reaches the transcript: after the bounded wait the window
    carries the Stop event's `last_assistant_message` as the turn's final text — redacted
    (the token in it reaches no request) with its marker and lesson."""
    b = box()
    stop = payload(5)
    sid = "final-never"
    lines = lines_of(RESUMED)
    b.path(sid).write_bytes(b"".join(lines[:final_index(lines)]))
    quiet(b.path(sid))
    text = stop["last_assistant_message"].replace("Done:", f"Done (pushed with {SECRET}):")
    b.bash(sid, 2)
    b.send("Stop", sid, prompt_id=stop["prompt_id"], last_assistant_message=text)
    b.done(1)
    [req] = b.requests()
    assert "Stop event" in req and "topic: run-tests-first" in req
    assert "Run the test suite before committing." in req
    assert SECRET not in req and "REDACTED" in req
    journal = (b.home["home"] / "state" / "journal.jsonl").read_text()
    assert SECRET not in journal  # the job kept the text redacted


def test_subagent_calls_counted_apart_and_both_witnesses_agree(box):
    """A subagent's PreToolUse (Claude Code's payload: `agent_id`, the parent's session and
    transcript) is shown apart in `status` (JSON and text) and is no activity; the main
    session's Agent call whose hook was lost is counted once from the transcript, whose
    subagent file is not read as the session's calls: activity 1, subagent calls 3."""
    b = box(AUTOHARNESS_REFLECT_EVERY=1000)
    sid = "6d582c26-88d4-41b3-9b21-e450e4c2f488"
    b.send("SessionStart", sid, source="startup")
    now = time.time() + 1
    src = CC / "transcripts"
    sub_dir = b.dir / sid / "subagents"
    sub_dir.mkdir(parents=True)
    for source, dest in ((src / "subagent.jsonl", b.path(sid)),
                         (src / "subagent" / "subagents" / "agent-a710afd67bddaddef.jsonl",
                          sub_dir / "agent-a710afd67bddaddef.jsonl")):
        out = []
        for ln in lines_of(source):
            rec = json.loads(ln)
            if "timestamp" in rec:
                rec["timestamp"] = stamp(now)
            out.append(json.dumps(rec) + "\n")
        dest.write_text("".join(out))
    sub = payload(8)
    for i in range(3):
        b.send("PreToolUse", sid, tool_name="Bash", tool_input=sub["tool_input"],
               tool_use_id=f"toolu_sub{i}", agent_id=sub["agent_id"],
               agent_type=sub["agent_type"])
    wait_for(lambda: b.session(sid)["calls"]["transcript"] == 1, what="the Agent call read")
    s = b.session(sid)
    assert (s["activity"], s["calls"]["hook"], s["subagent_calls"]) == (1, 0, 3)
    text = ctl("status").stdout
    assert "SUBAGENT" in text
    [row] = [ln for ln in text.splitlines() if sid in ln]
    assert row.split()[1:5] == ["1", "0", "0/1", "3"]


def _fork(parent: list[bytes], new_sid: str) -> list[bytes]:
    out = []
    for ln in parent:
        rec = json.loads(ln)
        if "sessionId" in rec:
            rec["sessionId"] = new_sid
        out.append(json.dumps(rec, separators=(",", ":")).encode() + b"\n")
    return out


def _own(sid: str, prompt: str, answer: str) -> list[bytes]:
    user = {"type": "user", "uuid": f"{sid}-u", "sessionId": sid, "promptId": f"{sid}-p",
            "message": {"role": "user", "content": prompt}, "timestamp": stamp(time.time())}
    asst = {"type": "assistant", "uuid": f"{sid}-a", "sessionId": sid,
            "message": {"role": "assistant", "content": [{"type": "text", "text": answer}]},
            "timestamp": stamp(time.time())}
    return [json.dumps(user).encode() + b"\n", json.dumps(asst).encode() + b"\n"]


def test_fork_leaves_out_the_history_its_parent_reflected_across_a_restart(box, home):
    """The parent's window is reflected; the daemon restarts; a fork of it (Claude Code's
    `--fork-session`: the parent's records copied, same uuids, new session id) gets a first
    window holding only its own records — no earlier prompt already reflected, as `capture
    --session` shows beforehand. The record memory is a 0600 file in the state dir."""
    b = box()
    parent, child = "parent-sess", "fork-sess"
    first = lines_of(RESUMED)[:42]
    b.path(parent).write_bytes(b"".join(first))
    b.bash(parent, 2)
    b.send("Stop", parent)
    b.done(1)
    assert "SCENARIO=CAP" in b.requests()[0]
    b.daemon.stop()
    memory = home["home"] / "state" / "reflected-records.bin"
    assert stat.S_IMODE(memory.stat().st_mode) == 0o600 and memory.stat().st_size > 0
    b.daemon = Daemon(home["home"])
    b.path(child).write_bytes(b"".join(
        _fork(first, child) + _own(child, "FORKED PROMPT: now the docs", "Docs updated.")))
    b.bash(child, 2)
    shown = json.loads(ctl("capture", "--session", child, "--json").stdout)  # as a job would
    assert shown["reflected_records"] > 10 and "SCENARIO=CAP" not in shown["window"]
    b.send("Stop", child)
    b.done(2)
    req = b.requests()[1]
    assert "FORKED PROMPT" in req and "Docs updated." in req
    assert "SCENARIO=CAP" not in req and "Step 1." not in req
    assert "already had" in req


def test_learn_only_session_costs_exactly_one_model_call(box):
    """A session whose only work is `/learn`: its `autoharnessctl learn` Bash call is no
    activity — by the hook (session A) or by the transcript when the hook was lost (session B,
    whose one other call still counts) — so SessionEnd makes no second job: one learn job, one
    model call."""
    b = box(AUTOHARNESS_REFLECT_EVERY=1000)
    a, bsid = "learn-only-a", "learn-only-b"
    cmd = f"autoharnessctl learn --session {a} - <<'AUTOHARNESS_LESSON_{a}'\nlesson\n" \
          f"AUTOHARNESS_LESSON_{a}"
    b.path(a).write_bytes(b"".join(_own(a, "/learn lesson", "queued the lesson")))
    b.send("SessionStart", a, source="startup")
    b.send("PreToolUse", a, tool_name="Bash", tool_input={"command": cmd},
           tool_use_id="toolu_learn_a")
    r = ctl("learn", "--session", a, "-", input=b"always run the migrations first\n")
    assert r.returncode == 0, r.stderr
    b.send("Stop", a)
    b.send("SessionEnd", a, reason="other")
    assert b.status()["jobs"]["by_kind"] == {"learn": 1}
    b.done(1)
    assert len(b.requests()) == 1

    b.send("SessionStart", bsid, source="startup")
    t = stamp(time.time() + 1)
    calls = {"type": "assistant", "uuid": "b-a1", "sessionId": bsid, "timestamp": t,
             "message": {"role": "assistant", "content": [
                 {"type": "tool_use", "id": "toolu_learn_b", "name": "Bash",
                  "input": {"command": cmd.replace(a, bsid)}},
                 {"type": "tool_use", "id": "toolu_work_b", "name": "Bash",
                  "input": {"command": "ls"}}]}}
    b.path(bsid).write_text(json.dumps(calls) + "\n")
    wait_for(lambda: b.session(bsid)["calls"]["transcript"] == 1, what="the transcript read")
    assert b.session(bsid)["activity"] == 1  # the work call; the learn call is none


def test_status_json_has_subagent_calls_for_every_session(box):
    """`status --json` gives every session a `subagent_calls` count (0 without subagents)."""
    b = box()
    b.bash("plain", 1)
    assert b.session("plain")["subagent_calls"] == 0
    assert '"subagent_calls": 0' in ctl("status", "--json").stdout
