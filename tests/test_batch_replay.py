"""`replay --batch` through the Message Batches API: a real daemon, the real SDK and the fake
Batches endpoints on loopback. Chunking to the API's limits, landing through the same intake
and promoter, resuming after kill -9 without reflecting twice, errored items retried alone,
cancel, and the token budget."""

import json
import re

import pytest

from claude_autoharness.client.batch import collect
from claude_autoharness.daemon.reflect.batches import chunk
from fake_anthropic import FakeAnthropic, error_reply, tool_reply
from harness import Daemon, ctl, wait_for

# Distinct enough that the duplicate guard sees ten different skills.
TOPICS = ["editing the parser", "bumping a dependency", "touching the database schema",
          "changing the CLI flags", "writing a migration", "updating the docs site",
          "renaming a public function", "adding a new endpoint", "tuning the cache sizes",
          "rotating the signing keys", "refactoring the scheduler", "upgrading the compiler"]
LESSON = re.compile(r"lesson-(\d+): (always run make check-\d+ before pushing)")


def write_backlog(root, project, n: int):
    """`n` small transcripts, each with one lesson line the fake can quote back."""
    root.mkdir(parents=True, exist_ok=True)
    for k in range(n):
        recs = [
            {"type": "user", "cwd": str(project), "sessionId": f"s{k}",
             "message": {"role": "user", "content":
                         f"lesson-{k}: always run make check-{k} before pushing"}},
            {"type": "assistant", "cwd": str(project), "sessionId": f"s{k}",
             "message": {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]}},
        ]
        (root / f"t{k:03d}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return root


def proposal_for(params: dict, every: int = 1):
    """A create proposal quoting the transcript's lesson (for every `every`-th transcript)."""
    text = json.dumps(params["messages"])
    m = LESSON.search(text)
    if m is None or int(m.group(1)) % every:
        return tool_reply({"proposals": []})
    k = int(m.group(1))
    return tool_reply({"proposals": [{
        "action": "create", "skill": f"check-{k}", "layer": "project",
        "reason": "the user stated it as a rule", "evidence": m.group(2),
        "description": f"Use when {TOPICS[(k // every) % len(TOPICS)]}: run make check-{k}.",
        "body": f"Run `make check-{k}` before `git push`.\n",
        "old": None, "new": None, "path": None, "content": None}]})


@pytest.fixture
def setup(home, monkeypatch):
    project = home["tmp"] / "proj"
    project.mkdir()
    with FakeAnthropic() as fake:
        env = {"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key",
               "ANTHROPIC_BASE_URL": fake.base_url,
               "AUTOHARNESS_REFLECTOR_BATCH_POLL_S": "0.05",
               "AUTOHARNESS_REFLECTOR_BATCH_POLL_MAX_S": "0.2"}
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        daemons = []

        def start(**extra):
            for k, v in extra.items():
                monkeypatch.setenv(k, v)
            d = Daemon(home["home"])
            daemons.append(d)
            return d

        yield {"fake": fake, "project": project, "start": start, "home": home}
        for d in daemons:
            if d.proc.poll() is None:
                d.stop()


def batches(d) -> dict:
    return d.status()["batches"]


def replay_batch(*args):
    r = ctl("replay", "--batch", *args)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_250_transcripts_go_out_in_chunked_batches_and_land(setup):
    """250 transcripts with a limit of 100 requests per batch: three batches (100, 100, 50),
    every item reflected once, and the proposals landed as skills by the promoter."""
    fake, project = setup["fake"], setup["project"]
    fake.route = lambda params: proposal_for(params, every=25)
    d = setup["start"](AUTOHARNESS_REFLECTOR_BATCH_MAX_REQUESTS="100")
    backlog = write_backlog(setup["home"]["tmp"] / "backlog", project, 250)
    out = replay_batch(str(backlog), "--project", str(project), "--wait", "60")
    assert "250 window(s) queued" in out
    sizes = [len(r.json["requests"]) for r in fake.batch_creates]
    assert sizes == [100, 100, 50]
    ids = [q["custom_id"] for r in fake.batch_creates for q in r.json["requests"]]
    assert len(set(ids)) == 250
    st = batches(d)
    assert st["items"]["done"] == 250 and not st["in_flight"] and st["tokens"] > 0
    assert st["tokens_at_batch_price"] == st["tokens"] // 2
    skills = project / ".claude" / "skills"
    wait_for(lambda: len(list(skills.glob("*/SKILL.md"))) == 10,
             what=f"10 landings: {ctl('queue', 'list').stdout}")
    assert sorted(p.name for p in skills.iterdir()) == sorted(f"check-{k}"
                                                             for k in range(0, 250, 25))
    # the same transcripts again: nothing new is sent
    out = replay_batch(str(backlog), "--project", str(project))
    assert "0 window(s) queued" in out and "250 already sent" in out
    assert len(fake.batch_creates) == 3


def test_kill9_while_in_flight_resumes_polling_and_reflects_once(setup):
    """The daemon dies (kill -9) while a batch is in flight; the restarted daemon resumes
    polling the same batch id (no second create) and takes each result in exactly once."""
    fake, project = setup["fake"], setup["project"]
    fake.route = proposal_for
    fake.hold_batches = True
    d = setup["start"]()
    backlog = write_backlog(setup["home"]["tmp"] / "backlog", project, 5)
    replay_batch(str(backlog), "--project", str(project))
    wait_for(lambda: batches(d)["in_flight"], what="a batch in flight")
    batch_id = batches(d)["in_flight"][0]["id"]
    d.kill9()
    fake.end_batches()
    d2 = setup["start"]()
    wait_for(lambda: batches(d2)["items"]["done"] == 5, what="all 5 items taken in")
    assert len(fake.batch_creates) == 1
    polled = [r.path for r in fake.requests if r.method == "GET" and batch_id in r.path]
    assert any(p.endswith("/results") for p in polled)
    intents = json.loads(ctl("queue", "list", "--json").stdout)
    assert len(intents) == 5 and len({i["job_id"] for i in intents}) == 5
    skills = project / ".claude" / "skills"
    wait_for(lambda: len(list(skills.glob("*/SKILL.md"))) == 5, what="5 landings")
    # a second restart re-reads nothing into intake
    d2.stop()
    d3 = setup["start"]()
    assert batches(d3)["items"]["done"] == 5
    assert len(json.loads(ctl("queue", "list", "--json").stdout)) == 5


def test_kill9_between_create_and_its_answer_sends_the_items_once(setup):
    """The daemon dies (kill -9) after its create request reached the API (the batch exists)
    but before the answer, the batch id, came back: the restarted daemon finds that batch in
    the API's list and adopts it, so the API sees exactly one create for those items, and each
    result is taken in once."""
    fake, project = setup["fake"], setup["project"]
    fake.route = proposal_for
    fake.stall_batch_creates = True
    d = setup["start"]()
    backlog = write_backlog(setup["home"]["tmp"] / "backlog", project, 5)
    replay_batch(str(backlog), "--project", str(project))
    wait_for(lambda: fake.batches, what="the batch made, its answer held back")
    d.kill9()
    fake.stall_batch_creates = False  # a second create would now be answered
    d2 = setup["start"]()
    wait_for(lambda: batches(d2)["items"]["done"] == 5, what="all 5 items taken in")
    assert len(fake.batch_creates) == 1 and len(fake.batches) == 1
    assert any(r.method == "GET" and r.path.split("?")[0] == "/v1/messages/batches"
               for r in fake.requests)  # it looked the batch up
    intents = json.loads(ctl("queue", "list", "--json").stdout)
    assert len(intents) == 5 and len({i["job_id"] for i in intents}) == 5


def test_a_create_that_never_arrived_is_sent_again(setup):
    """A create the API refused (no batch made) is looked up, not found, and its items go out
    in a new create: nothing is lost for fear of sending twice."""
    fake, project = setup["fake"], setup["project"]
    fake.route = proposal_for
    fake.fail_batch_creates = 1
    d = setup["start"]()
    backlog = write_backlog(setup["home"]["tmp"] / "backlog", project, 3)
    replay_batch(str(backlog), "--project", str(project))
    wait_for(lambda: batches(d)["items"]["done"] == 3, what="all 3 items taken in")
    creates = fake.batch_creates
    assert len(creates) == 2 and len(fake.batches) == 1
    assert ([q["custom_id"] for q in creates[0].json["requests"]]
            == [q["custom_id"] for q in creates[1].json["requests"]])
    calls = [(r.method, r.path.split("?")[0]) for r in fake.requests]
    post, listing = ("POST", "/v1/messages/batches"), ("GET", "/v1/messages/batches")
    assert calls[:3] == [post, listing, post]  # looked up before sending again


def test_an_errored_item_is_retried_alone(setup):
    """One item of three errors (an overloaded upstream): the next batch carries that item
    alone, and it lands once it succeeds."""
    fake, project = setup["fake"], setup["project"]
    failed_once = []

    def route(params):
        text = json.dumps(params["messages"])
        if "lesson-1:" in text and not failed_once:
            failed_once.append(True)
            return error_reply(529, "overloaded_error")
        return proposal_for(params)

    fake.route = route
    d = setup["start"]()
    backlog = write_backlog(setup["home"]["tmp"] / "backlog", project, 3)
    replay_batch(str(backlog), "--project", str(project), "--wait", "120")
    creates = fake.batch_creates
    assert [len(r.json["requests"]) for r in creates] == [3, 1]
    retried = creates[1].json["requests"][0]
    assert "lesson-1:" in json.dumps(retried["params"]["messages"])
    assert retried["custom_id"] in [q["custom_id"] for q in creates[0].json["requests"]]
    assert batches(d)["items"]["done"] == 3
    wait_for(lambda: (project / ".claude" / "skills" / "check-1" / "SKILL.md").exists(),
             what="the retried item's landing")


def test_cancel_stops_the_batch_and_drops_what_was_not_sent(setup):
    """`replay --cancel` cancels the batch in flight: its unanswered items end canceled,
    nothing is taken in for them, and status shows no batch in flight."""
    fake, project = setup["fake"], setup["project"]
    fake.route = proposal_for
    fake.hold_batches = True
    d = setup["start"]()
    backlog = write_backlog(setup["home"]["tmp"] / "backlog", project, 4)
    replay_batch(str(backlog), "--project", str(project))
    wait_for(lambda: batches(d)["in_flight"], what="a batch in flight")
    for res in next(iter(fake.batches.values())).results.values():
        res["type"] = "processing"  # not answered yet when the cancel arrives
    r = ctl("replay", "--cancel")
    assert r.returncode == 0 and "canceled 1 batch" in r.stdout, r.stderr
    assert any(q.path.endswith("/cancel") for q in fake.requests)
    wait_for(lambda: batches(d)["items"]["canceled"] == 4, what="items canceled")
    assert not batches(d)["in_flight"]
    assert json.loads(ctl("queue", "list", "--json").stdout) == []


def test_the_daily_token_budget_holds_batches_back(setup):
    """With the daily budget smaller than one request, nothing is sent; status says why."""
    fake, project = setup["fake"], setup["project"]
    d = setup["start"](AUTOHARNESS_REFLECTOR_DAILY_TOKEN_BUDGET="100")
    backlog = write_backlog(setup["home"]["tmp"] / "backlog", project, 3)
    replay_batch(str(backlog), "--project", str(project))
    wait_for(lambda: batches(d)["waiting"], what="a waiting reason")
    assert "budget" in batches(d)["waiting"] and batches(d)["items"]["waiting"] == 3
    assert fake.batch_creates == []
    assert "budget" in ctl("status").stdout


def test_chunks_respect_both_limits():
    """Consecutive ranges never exceed the request count or the byte size; an oversized
    request goes alone (the API judges it)."""
    assert chunk([1] * 250, 100, 10**9) == [(0, 100), (100, 200), (200, 250)]
    assert chunk([40, 40, 40, 500, 10], 100, 100) == [(0, 2), (2, 3), (3, 4), (4, 5)]
    assert chunk([], 100, 100) == []


def test_all_since_collects_transcripts_under_the_projects_dir(home):
    """--all walks $CLAUDE_CONFIG_DIR/projects for *.jsonl; --since drops older files."""
    import os
    import time
    d = home["claude"] / "projects" / "-tmp-x"
    d.mkdir(parents=True)
    new, old = d / "new.jsonl", d / "old.jsonl"
    for p in (new, old, d / "notes.txt"):
        p.write_text("{}\n")
    past = time.mktime((2020, 1, 1, 0, 0, 0, 0, 0, -1))
    os.utime(old, (past, past))
    assert collect([], True, None) == [str(new), str(old)]
    assert collect([], True, "2024-06-01") == [str(new)]


def test_batch_feedback_is_grounded_like_a_live_reflection(setup):
    """`replay --batch`: a reply's verdicts go through the same intake and grounding: a
    `missed` verdict quoting the window is accepted and counted on the skill; one naming a
    layer the skill is not in is refused as missing."""
    from claude_autoharness.daemon.persist.dirs import ensure_private_dir
    from claude_autoharness.daemon.promote.land import Promoter
    from claude_autoharness.daemon.proposals import Intent, Proposal
    from claude_autoharness.protocol import paths
    from claude_autoharness.protocol.config import PromoterConfig

    fake, project = setup["fake"], setup["project"]
    quote = "always run make check-0 before pushing"
    p = Proposal(action="create", skill="pre-push-check", layer="project", reason="seeded",
                 evidence=quote, description="Use when pushing: run the checks first.",
                 body="Run the checks before `git push`.")
    ensure_private_dir(paths.state_dir())
    assert Promoter(PromoterConfig()).promote(
        Intent(id="seed", source="reflector", created_at=0.0, proposal=p), quote,
        str(project)).status == "landed"
    fake.route = lambda params: tool_reply({"proposals": [], "feedback": [
        {"skill": "pre-push-check", "layer": "project", "verdict": "missed", "evidence": quote},
        {"skill": "pre-push-check", "layer": "user", "verdict": "helped", "evidence": quote}]})
    setup["start"]()
    backlog = write_backlog(setup["home"]["tmp"] / "backlog", project, 1)
    replay_batch(str(backlog), "--project", str(project), "--wait", "60")

    def grounded():
        got = json.loads(ctl("queue", "feedback", "--json").stdout)
        return got if got and all(v["status"] != "queued" for v in got) else None
    got = wait_for(grounded, timeout=60, what="verdicts grounded")
    assert sorted((v["verdict"]["layer"], v["status"]) for v in got) == [
        ("project", "accepted"), ("user", "rejected")]
    [refused] = [v for v in got if v["status"] == "rejected"]
    assert [f["code"] for f in refused["findings"]] == ["missing"]  # not in the user layer
    listed = json.loads(ctl("skills", "list", "--json", "--project", str(project)).stdout)
    [s] = [s for s in listed if s["name"] == "pre-push-check"]
    assert s["feedback"]["missed"] == 1
