"""End to end through real processes: hook events → job → fake Anthropic server (real SDK) →
intents → promoter → skills; plus /learn, review mode, usage, SessionStart context."""

import json
import os
import threading
import time

import pytest

from claude_autoharness.daemon.promote import skillfile
from conftest import REAL
from fake_anthropic import FakeAnthropic, error_reply, tool_reply
from harness import Daemon, ctl, frame, hook, send_raw, wait_for
from pipeline_support import QUOTE, Env, proposal
from promote_support import GH_TOKEN


@pytest.fixture
def fake():
    with FakeAnthropic() as f:
        yield f


@pytest.fixture
def make_env(home, fake, monkeypatch):
    envs = []

    def make(**kw):
        e = Env(home, fake, monkeypatch, **kw)
        envs.append(e)
        return e

    yield make
    for e in envs:
        e.daemon.stop()


def tree_hash(root) -> dict:
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            out[os.path.relpath(p, root)] = open(p, "rb").read()
    return out


def test_full_chain_lands_a_skill(make_env, fake):
    """Hook events → threshold job → forced tool call → intent → a landed SKILL.md whose
    frontmatter parses and whose name matches its directory; the watermark advances."""
    fake.push(tool_reply({"proposals": [proposal()]}))
    e = make_env()
    with open(e.transcript, "a") as f:  # a secret the model must never see
        f.write(json.dumps({"type": "user", "message": {"role": "user", "content":
                            f"my token is {GH_TOKEN} and mail bob@corp.io"}}) + "\n")
    e.work()
    wait_for(lambda: e.status()["intents"]["landed"] == 1, timeout=60, what="landing")
    fields, body = skillfile.parse(e.skill().read_text())
    assert fields["name"] == "check-server-start" == e.skill().parent.name
    assert "read the first error" in body
    st = e.status()
    assert st["sessions"][0]["watermark"] == e.transcript.stat().st_size
    assert st["jobs"]["done"] == 1 and st["reflector"]["tokens_total"] > 0
    [req] = fake.messages_requests
    body = req.json
    assert body["tool_choice"] == {"type": "tool", "name": "propose_skill_changes"}
    assert any("cache_control" in b for b in body["system"])
    raw = req.body.decode()
    assert QUOTE in raw
    assert GH_TOKEN not in raw and "bob@corp.io" not in raw
    assert "REDACTED" in raw


def test_evidence_not_in_window_is_unattributable(make_env, fake):
    """A proposal quoting text that is not in the window is rejected and writes nothing."""
    fake.push(tool_reply({"proposals": [proposal(evidence="words the session never said")]}))
    e = make_env()
    e.work()
    wait_for(lambda: e.status()["intents"]["rejected"] == 1, timeout=60, what="rejection")
    [i] = e.intents()
    assert [f["code"] for f in i.get("findings", [])] == ["unattributable"]
    assert not (e.project / ".claude" / "skills").exists()


def test_malformed_and_over_limit_proposals_are_recorded(make_env, fake):
    """Every proposal becomes an intent: malformed ones rejected `schema`, extras `over_limit`."""
    props = [proposal(skill=f"skill-{i}") for i in range(4)] + [{"action": "explode"}]
    fake.push(tool_reply({"proposals": props}))
    e = make_env()
    e.work()
    wait_for(lambda: len(e.intents()) == 5, timeout=60, what="intake")
    codes = sorted(f["code"] for i in e.intents() for f in i.get("findings", []))
    assert codes.count("over_limit") == 2 and "schema" in codes


def test_transient_errors_are_retried(make_env, fake):
    """429 and 500 replies are retried with backoff; the job then lands its proposal."""
    fake.push(error_reply(429, "rate_limit_error"), error_reply(500),
              tool_reply({"proposals": [proposal()]}))
    e = make_env()
    e.work()
    wait_for(lambda: e.status()["intents"]["landed"] == 1, timeout=60, what="landing")
    assert len(fake.messages_requests) == 3


def test_permanent_error_fails_the_job_visibly(make_env, fake):
    """A 400 ends the job as failed with the reason in status; nothing is retried."""
    fake.push(error_reply(400, "invalid_request_error", "bad request"))
    e = make_env()
    e.work()
    wait_for(lambda: e.status()["jobs"]["failed"] == 1, timeout=60, what="failure")
    st = e.status()
    assert st["jobs"]["last_error"]["status"] == "failed"
    assert len(fake.messages_requests) == 1


def test_no_backend_jobs_wait_visibly(make_env):
    """With backend `none`, jobs stay pending with the reason shown; nothing is dropped."""
    e = make_env(extra_env={"AUTOHARNESS_REFLECTOR_BACKEND": "none"})
    e.work()
    st = e.status()
    assert st["jobs"]["pending"] == 1
    assert "no reflector backend" in st["jobs"]["waiting"]
    assert st["reflector"]["backend"] == "none"


def test_daily_token_budget_makes_jobs_wait(make_env, fake):
    """Once today's tokens reach the budget, further jobs wait with the reason in status."""
    fake.push(tool_reply({"proposals": []}), tool_reply({"proposals": []}))
    e = make_env(extra_env={"AUTOHARNESS_REFLECTOR_DAILY_TOKEN_BUDGET": "100"})
    e.work()
    wait_for(lambda: e.status()["jobs"]["done"] == 1, timeout=60, what="first job")
    with open(e.transcript, "a") as f:
        f.write(json.dumps({"type": "user", "message": {"role": "user", "content": "more"}}) + "\n")
    e.work()
    wait_for(lambda: e.status()["jobs"]["pending"] == 1, timeout=90, what="second job")
    st = e.status()
    assert "budget" in st["jobs"]["waiting"] and st["reflector"]["tokens_today"] >= 100
    assert len(fake.messages_requests) == 1


def test_hooks_stay_fast_while_a_reflection_is_in_flight(make_env, fake):
    """The event loop keeps answering hooks while a slow model call is in flight."""
    fake.push(tool_reply({"proposals": []}, delay=120))  # released at teardown
    e = make_env()
    e.work()
    wait_for(lambda: fake.messages_requests, timeout=90, what="model call")
    ev = json.dumps(e.ev("PreToolUse", tool_name="Read", tool_input={"file_path": "/x"}))
    body = b'{"type":"hook","v":1,"payload":%b}' % ev.encode()
    reply = send_raw(e.daemon.sock, frame(body), timeout=60)
    assert b'"hook_reply"' in reply  # answered while the model call is still out
    st = e.status()
    assert st["jobs"]["running"] == 1
    assert st["sessions"][0]["activity"] == 1


def test_kill9_mid_job_yields_exactly_one_set_of_intents(make_env, fake, home):
    """kill -9 while the model call is in flight; after restart the job runs again and exactly
    one set of intents exists."""
    fake.push(tool_reply({"proposals": [proposal()]}, delay=60),
              tool_reply({"proposals": [proposal()]}))
    e = make_env()
    e.work()
    wait_for(lambda: fake.messages_requests, timeout=90, what="model call")
    e.daemon.kill9()
    e.daemon = Daemon(home["home"])
    wait_for(lambda: e.status()["jobs"]["done"] == 1, timeout=60, what="job after restart")
    intents = e.intents()
    assert len(intents) == 1 and intents[0]["status"] == "landed"
    assert e.status()["sessions"][0]["watermark"] == e.transcript.stat().st_size


def test_learn_round_trip(make_env, fake):
    """`autoharnessctl learn` queues a learn job whose intents carry source `learn` and land."""
    guidance = "always read the server error before changing config"
    fake.push(tool_reply({"proposals": [proposal(skill="read-server-error", evidence=guidance)]}))
    e = make_env(extra_env={"AUTOHARNESS_REFLECT_EVERY": "1000"})
    e.work(1)
    r = ctl("learn", "--session", e.sid, guidance)
    assert r.returncode == 0, r.stderr
    wait_for(lambda: e.status()["intents"]["landed"] == 1, timeout=60, what="learn landing")
    [i] = e.intents()
    assert i["source"] == "learn"
    assert e.skill("read-server-error").exists()
    assert guidance in fake.messages_requests[0].body.decode()


def test_learn_reads_the_lesson_verbatim_from_stdin(make_env, fake):
    """`autoharnessctl learn -` (the /learn command's heredoc spelling) takes the lesson from
    stdin with quotes, backticks, `$`, backslashes and newlines unchanged, and the reflector
    receives it exactly."""
    lesson = "quote \"$HOME\" and `ls`, never ${X} or $(whoami) 'here' \\n\nsecond line"
    fake.push(tool_reply({"proposals": []}))
    e = make_env(extra_env={"AUTOHARNESS_REFLECT_EVERY": "1000"})
    e.work(1)
    r = ctl("learn", "--session", e.sid, "-", input=(lesson + "\n").encode())
    assert r.returncode == 0, r.stderr
    wait_for(lambda: e.status()["jobs"]["done"] == 1, timeout=60, what="learn job")
    [req] = fake.messages_requests
    assert json.dumps(lesson)[1:-1] in req.body.decode()  # the text, JSON-escaped once


def test_review_mode_holds_then_approve_and_reject(make_env, fake):
    """promoter.mode=review: passing intents are held; approve lands, reject writes nothing."""
    fake.push(tool_reply({"proposals": [proposal(), proposal(skill="second-skill")]}))
    e = make_env(extra_env={"AUTOHARNESS_PROMOTER_MODE": "review"})
    e.work()
    wait_for(lambda: e.status()["intents"]["held"] == 2, timeout=60, what="held intents")
    assert not e.skill().exists()
    first, second = e.intents()
    r = ctl("queue", "approve", first["id"])
    assert r.returncode == 0 and "landed" in r.stdout
    assert e.skill().exists()
    before = tree_hash(e.project)
    r = ctl("queue", "reject", second["id"], "--why", "not useful")
    assert r.returncode == 0 and "rejected" in r.stdout
    assert tree_hash(e.project) == before
    assert ctl("queue", "approve", second["id"]).returncode == 1


def test_skills_verbs_and_usage_counting(make_env, fake):
    """skills list/history/revert/restore work; a Skill call and a SKILL.md read each count as
    a use; a reflector child's read does not."""
    fake.push(tool_reply({"proposals": [proposal()]}))
    e = make_env()
    e.work()
    wait_for(lambda: e.status()["intents"]["landed"] == 1, timeout=60, what="landing")
    hook(e.ev("PreToolUse", tool_name="Skill", tool_input={"skill": "check-server-start"}))
    hook(e.ev("PreToolUse", tool_name="Read", tool_input={"file_path": str(e.skill())}))
    hook(e.ev("PreToolUse", tool_name="Read", tool_input={"file_path": str(e.skill())}),
         env={"AUTOHARNESS_CHILD_SESSION": "1"})

    def uses():
        r = ctl("skills", "list", "--json", "--project", str(e.project))
        return [s["uses"] for s in json.loads(r.stdout) if s["name"] == "check-server-start"]
    wait_for(lambda: uses() == [2], timeout=90, what="two uses")
    hist = json.loads(ctl("skills", "history", "check-server-start", "--project",
                          str(e.project), "--json").stdout)
    assert len(hist) == 1
    text = ctl("skills", "history", "check-server-start", "--project", str(e.project)).stdout
    assert text.startswith("v1 create ") and "{" not in text, text  # for people, not JSON


def test_session_start_context_rule_and_summary(make_env, fake):
    """SessionStart: the rule on startup and compact, not again on a repeated resume; the
    promoter summary once; none of it for a reflector child."""
    fake.push(tool_reply({"proposals": [proposal()]}))
    e = make_env()
    e.work()
    wait_for(lambda: e.status()["intents"]["landed"] == 1, timeout=60, what="landing")

    def context(sid, source, env=None):
        ev = e.ev("SessionStart", source=source)
        ev["session_id"] = sid
        r = hook(ev, env=env)
        if not r.stdout:
            return ""
        return json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"]

    rule = ctl("learnings", "rule").stdout.strip()
    first = context("new-sess", "startup")
    assert rule in first and "landed create check-server-start" in first
    assert len(first) <= 2000
    compact = context("new-sess", "compact")
    assert rule in compact and "check-server-start" not in compact
    assert context("new-sess", "resume") == ""
    assert context("new-sess", "resume") == ""
    assert rule in context("resumed-fresh", "resume")
    assert context("kid", "startup", env={"AUTOHARNESS_CHILD_SESSION": "1"}) == ""


def test_teach_switch_turns_the_rule_off(make_env):
    """learnings.teach = false: nothing injected at SessionStart."""
    e = make_env(extra_env={"AUTOHARNESS_LEARNINGS_TEACH": "0"})
    r = hook(e.ev("SessionStart", source="startup"))
    assert r.stdout == b""


def test_marker_already_saved_is_not_proposed_again(make_env, fake):
    """A window with a marker already queued as a `marker` intent: the reflector proposing the
    same lesson yields no second intent."""
    marker = ("<!-- learning\ntopic: server-errors\nkind: pattern\n"
              "body: Read the dev server's first error before touching config, because the "
              "rest is noise.\n-->")
    rec = {"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "text", "text": "Fixed it.\n" + marker}]}, "timestamp": "2026-11-30T10:00:00Z"}
    e = make_env()
    with open(e.transcript, "a") as f:
        f.write(json.dumps(rec) + "\n")
    wait_for(lambda: e.status()["learnings"]["unprocessed"] == 1, timeout=90, what="marker")
    r = ctl("learnings", "save", "--project", str(e.project))
    assert r.returncode == 0, r.stderr
    wait_for(lambda: any(i["source"] == "marker" for i in e.intents()), timeout=90,
             what="marker intent")
    body = "Read the dev server's first error before touching config, because the rest is noise."
    fake.push(tool_reply({"proposals": [proposal(skill="server-errors-again", evidence=body)]}))
    e.work()
    wait_for(lambda: e.status()["jobs"]["done"] == 1, timeout=60, what="job")
    assert [i["source"] for i in e.intents()] == ["marker"]
    prompt = fake.messages_requests[0].body.decode()
    assert "server-errors" in prompt  # the window still shows it, as data


def test_marker_report_then_save_then_silence(make_env):
    """A marker appended to a growing transcript is reported at the next SessionStart, saved to
    journal and wiki, and not reported again."""
    e = make_env(extra_env={"AUTOHARNESS_LEARNINGS_TEACH": "0"})
    rec = {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text",
           "text": "<!-- learning\ntopic: auth-refresh\nkind: decision\ndoc-impact: readme\n"
                   "body: 7-day JWT refresh because users log in weekly.\n-->"}]},
           "timestamp": "2026-11-30T10:00:00Z"}
    with open(e.transcript, "a") as f:
        f.write(json.dumps(rec) + "\n")
    wait_for(lambda: e.status()["learnings"]["unprocessed"] == 1, timeout=90, what="marker")
    out = json.loads(hook(e.ev("SessionStart", source="startup")).stdout)
    ctx = out["hookSpecificOutput"]["additionalContext"]
    assert "1 unprocessed marker" in ctx and "/save-learnings" in ctx
    assert ctl("learnings", "save", "--project", str(e.project)).returncode == 0
    assert (e.project / ".claude" / "wiki" / "auth-refresh.md").exists()
    assert list((e.project / ".claude" / "doc-drafts").iterdir())
    r = hook(dict(e.ev("SessionStart", source="startup"), session_id="another"))
    assert r.stdout == b""


def test_replay_of_a_real_transcript_yields_intents(make_env, fake, short_tmp):
    """`replay` plays a real corpus transcript through the daemon; the fake model's proposal
    comes back as an intent for the replayed session."""
    fake.push(tool_reply({"proposals": [proposal()]}))
    e = make_env()
    r = ctl("replay", str(REAL / "spotter/short.jsonl"), "--session", "replayed",
            "--project", str(e.project), "--json")
    assert r.returncode == 0, r.stderr
    intents = json.loads(r.stdout)
    assert len(intents) == 1 and intents[0]["session_id"] == "replayed"


def test_replay_dry_run_queues_nothing(make_env, fake):
    """`replay --dry-run` prints the intents without queueing anything in the daemon."""
    fake.push(tool_reply({"proposals": [proposal()]}))
    e = make_env()
    r = ctl("replay", str(REAL / "spotter/short.jsonl"), "--dry-run", "--json",
            "--project", str(e.project))
    assert r.returncode == 0, r.stderr
    assert [i["status"] for i in json.loads(r.stdout)] == ["queued"]
    assert e.intents() == []
    assert e.status()["events"]["received"] == 0


def test_replay_dry_run_says_whose_backend_it_judges(make_env, fake, short_tmp):
    """A dry run reflects in this process: it says its backend is this shell's, not the
    daemon's, and with none here it says so rather than that nothing can reflect."""
    fake.push(tool_reply({"proposals": [proposal()]}))
    e = make_env()
    r = ctl("replay", str(REAL / "spotter/short.jsonl"), "--dry-run", "--json",
            "--project", str(e.project))
    assert r.returncode == 0, r.stderr
    assert "anthropic backend of this shell's environment, not the daemon's" in r.stderr
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["PATH"] = str(short_tmp / "no-claude-here")
    r = ctl("replay", str(REAL / "spotter/short.jsonl"), "--dry-run", "--project",
            str(e.project), env=env)
    assert r.returncode == 1 and "in this shell's environment" in r.stderr
    assert "autoharnessctl status" in r.stderr


def test_replay_dry_run_asks_like_a_real_job(make_env, fake):
    """The dry run runs the pool's own pipeline: the request lists the project's live skills,
    as a daemon job's does (the dry run used to send an empty skill index)."""
    fake.push(tool_reply({"proposals": [proposal()]}))
    e = make_env()
    skill = e.project / ".claude" / "skills" / "hand-rolled"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: hand-rolled\ndescription: Use when rolling by "
                                    "hand.\n---\n\nRoll it.\n")
    r = ctl("replay", str(REAL / "spotter/short.jsonl"), "--dry-run", "--json",
            "--project", str(e.project))
    assert r.returncode == 0, r.stderr
    system = json.dumps(fake.messages_requests[-1].json["system"])
    assert "- hand-rolled [project" in system and "Use when rolling by hand." in system
    assert e.intents() == []


def test_capture_prints_the_redacted_packet(make_env):
    """`capture` prints exactly what would leave the machine: redacted, with and without the
    daemon (for --transcript)."""
    e = make_env()
    with open(e.transcript, "a") as f:
        f.write(json.dumps({"type": "user", "message": {"role": "user", "content":
                            f"token {GH_TOKEN}"}}) + "\n")
    e.work(1, stop=False)
    r = ctl("capture", "--session", e.sid, "--json")
    assert r.returncode == 0, r.stderr
    packet = json.loads(r.stdout)
    assert GH_TOKEN not in packet["window"] and "REDACTED" in packet["window"]
    assert packet["watermark_to"] == e.transcript.stat().st_size
    e.daemon.stop()
    r = ctl("capture", "--transcript", str(e.transcript))
    assert r.returncode == 0 and GH_TOKEN not in r.stdout and "--- window ---" in r.stdout


def test_job_waits_for_the_transcript_to_settle(make_env, fake):
    """Claude Code is still writing the transcript when Stop arrives: the job waits until the
    file has been quiet for a moment, so the records written after the Stop are in its window."""
    late = "The fix was to clear the stale pid file before starting the server."
    fake.push(tool_reply({"proposals": [proposal(skill="stale-pid-file", evidence=late)]}))
    e = make_env()

    def append(text):
        with open(e.transcript, "a") as f:
            f.write(json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [
                {"type": "text", "text": text}]}}) + "\n")

    def writer():  # records keep coming in for a while after the Stop, then the last one
        for i in range(12):  # a tenth of the settle time apart: a loaded machine has slack
            append(f"still writing {i}")
            time.sleep(0.1)
        append(late)

    e.work(stop=False)
    t = threading.Thread(target=writer)
    t.start()
    hook(e.ev("Stop"))
    t.join()
    wait_for(lambda: e.status()["jobs"]["done"] == 1, timeout=60, what="job")
    assert late in fake.messages_requests[0].body.decode()
    assert e.status()["intents"]["landed"] == 1
