"""The durable intent queue: intake verdicts, durability, crash tolerance, idempotence."""

import json
import os
import resource
import stat
import threading
import time

import pytest

from claude_autoharness.daemon.capture.redact import Redactor, default_redactor
from claude_autoharness.daemon.intents import IntentQueue
from claude_autoharness.daemon.persist import files as files_mod
from claude_autoharness.daemon.proposals import Finding
from claude_autoharness.protocol import paths
from claude_autoharness.protocol.paths import intents_file
from fake_anthropic import FakeAnthropic, tool_reply
from harness import Daemon, ctl, fill_disk_midway, hook, wait_for
from promote_support import GH_TOKEN

WINDOW = (
    '{"type":"user","message":{"content":"no, always run `make lint` before committing"}}\n'
    '{"type":"assistant","message":{"content":[{"type":"text","text":"Understood:\\nI will run'
    ' make lint first."}]}}\n'
)


def good(**over) -> dict:
    p = {"action": "create", "skill": "lint-before-commit", "layer": "project",
         "reason": "the user corrected the agent", "evidence": "always run `make lint` before committing",
         "description": "Use when committing in this project.", "body": "Run `make lint` first.",
         "old": None, "new": None, "path": None, "content": None}
    p.update(over)
    return p


@pytest.fixture
def queue(home):
    q = IntentQueue()
    q.load()
    return q


def intake(q, proposals, *, job="job-1", window=WINDOW, max_intents=3, redactor=None):
    """Intake with capture's default redaction rules unless a redactor is given."""
    return q.intake(job, "sess-1", "reflector", proposals, window, "/proj", max_intents,
                    redactor=redactor)


def findings(intent) -> list[str]:
    return [f.code for f in intent.findings]


def test_good_proposal_is_queued_and_survives_reload(queue):
    """A well-formed, attributable proposal becomes a queued intent that a fresh queue reads back."""
    [i] = intake(queue, [good()])
    assert i.status == "queued" and i.findings == []
    assert (i.source, i.job_id, i.session_id, i.project_root) == ("reflector", "job-1", "sess-1", "/proj")
    assert i.proposal.skill == "lint-before-commit" and i.proposal.body == "Run `make lint` first."
    again = IntentQueue()
    report = again.load()
    assert report.bad_lines == 0 and report.quarantined is None
    assert again.get(i.id) == i
    assert again.counts() == {"queued": 1, "landed": 0, "rejected": 0, "held": 0}


def test_file_lives_in_state_dir_with_private_mode(queue):
    """The queue file sits in the state dir and is readable by its owner only (0600)."""
    intake(queue, [good()])
    path = intents_file()
    assert os.path.dirname(path) == paths.state_dir()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_update_is_durable_and_replaces_findings(queue):
    """Status changes are appended durably; findings given to update replace the old ones."""
    [i] = intake(queue, [good()])
    queue.update(i.id, "held", [Finding(family="owned", code="human_skill", message="m")])
    queue.update(i.id, "landed")
    again = IntentQueue()
    again.load()
    got = again.get(i.id)
    assert got.status == "landed"
    assert findings(got) == ["human_skill"]  # update without findings keeps them
    assert got.updated_at >= got.created_at
    assert again.list("landed") == [got] and again.list("queued") == []
    with pytest.raises(ValueError):
        queue.update(i.id, "bogus")
    with pytest.raises(KeyError):
        queue.update("i-missing", "landed")


def test_truncated_last_line_is_tolerated_and_quarantined(queue):
    """A torn last append (crash mid-write) loses nothing already durable: the file is moved to
    the quarantine dir, rewritten clean, and later appends and reloads work."""
    [a] = intake(queue, [good()])
    path = intents_file()
    with open(path, "ab") as f:
        f.write(b'{"op":"add","key":"job-2:abc","intent":{"id":"i-tor')  # no newline: torn
    original = open(path, "rb").read()
    q = IntentQueue()
    report = q.load()
    assert report.bad_lines == 1 and report.problems
    assert report.quarantined and os.path.dirname(report.quarantined) == paths.quarantine_dir()
    assert open(report.quarantined, "rb").read() == original
    assert [i.id for i in q.list()] == [a.id]
    [b] = intake(q, [good(skill="other-skill")], job="job-2")
    again = IntentQueue()
    assert again.load().bad_lines == 0
    assert [i.id for i in again.list()] == [a.id, b.id]


def test_garbage_in_the_middle_is_quarantined_not_fatal(queue):
    """An unreadable line in the middle is reported and kept aside; the records around it load."""
    [a] = intake(queue, [good()])
    with open(intents_file(), "ab") as f:
        f.write(b"\x00\xffnot json\n")
    [b] = intake(queue, [good(skill="second-skill")], job="job-2")
    q = IntentQueue()
    report = q.load()
    assert report.bad_lines == 1 and report.quarantined
    assert [i.id for i in q.list()] == [a.id, b.id]


def test_reintake_after_crash_adds_no_duplicates(queue):
    """Re-running the same job (same id, same proposals) returns the recorded intents and writes
    nothing, before and after a reload; the same proposal from another job is a new intent."""
    first = intake(queue, [good(), good(skill="x-skill", evidence="nowhere")])
    size = os.path.getsize(intents_file())
    assert intake(queue, [good(), good(skill="x-skill", evidence="nowhere")]) == first
    q = IntentQueue()
    q.load()
    assert q.intake("job-1", "sess-1", "reflector", [good(), good(skill="x-skill", evidence="nowhere")],
                    WINDOW, "/proj", 3) == first
    assert os.path.getsize(intents_file()) == size
    assert len(q.list()) == 2
    [other] = q.intake("job-9", "sess-1", "reflector", [good()], WINDOW, "/proj", 3)
    assert other.id not in {i.id for i in first}
    assert len(q.list()) == 3


def test_same_proposal_twice_in_one_reply_is_one_intent(queue):
    """A model repeating itself in one reply yields one intent, not two."""
    assert len(intake(queue, [good(), good()])) == 1
    assert len(queue.list()) == 1


def test_evidence_not_in_window_is_unattributable(queue):
    """Evidence that is not a verbatim quote of the window (or is empty) is rejected
    `unattributable`; a quote of the JSON-decoded text (escapes undone, whitespace reflowed)
    is accepted."""
    made_up, empty, decoded = intake(queue, [
        good(skill="a-skill", evidence="the user loves tabs"),
        good(skill="b-skill", evidence="   "),
        good(skill="c-skill", evidence="Understood: I will run  make lint first."),
    ])
    assert (made_up.status, findings(made_up)) == ("rejected", ["unattributable"])
    assert (empty.status, findings(empty)) == ("rejected", ["unattributable"])
    assert (decoded.status, decoded.findings) == ("queued", [])


@pytest.mark.parametrize("raw", [
    "just a string",
    {"action": "create"},                           # no skill
    {"action": "explode", "skill": "x"},            # unknown action
    {"action": "create", "skill": "x", "evidence": "always run `make lint` before committing"},
    {"action": "patch", "skill": 7},                 # wrong type
])
def test_malformed_proposals_are_recorded_as_schema_rejections(queue, raw):
    """Every proposal is recorded: malformed ones become rejected intents with finding `schema`."""
    [i] = intake(queue, [raw])
    assert i.status == "rejected"
    assert "schema" in findings(i)
    assert i.proposal is not None or i.raw  # what was proposed stays readable for the operator


def test_proposals_past_the_cap_are_over_limit(queue):
    """Past `max_intents` per job, proposals are still recorded, as rejected `over_limit`."""
    out = intake(queue, [good(skill=f"s-{n}") for n in range(5)], max_intents=3)
    assert [i.status for i in out] == ["queued"] * 3 + ["rejected"] * 2
    assert findings(out[3]) == ["over_limit"] and findings(out[4]) == ["over_limit"]


def test_secret_is_rejected_and_stored_redacted(queue):
    """A proposal carrying a secret is rejected `secret` at intake, and neither the queue file nor
    the in-memory intent holds the secret (the same for a malformed proposal's raw text)."""
    [i] = intake(queue, [good(body=f"export GITHUB_TOKEN={GH_TOKEN}")])
    [bad] = intake(queue, [{"action": "create", "note": f"token {GH_TOKEN}"}], job="job-2")
    assert i.status == "rejected" and "secret" in findings(i)
    assert "[REDACTED:github_token]" in i.proposal.body
    assert GH_TOKEN not in json.dumps([i.proposal.body, bad.raw])
    assert "schema" in findings(bad) and "[REDACTED:github_token]" in bad.raw
    assert GH_TOKEN.encode() not in open(intents_file(), "rb").read()


def test_real_pii_is_rejected_but_placeholders_pass_unchanged(queue):
    """Personal data is rejected like a secret; an obvious placeholder (user@example.com) is
    neither rejected nor redacted, so a skill showing an example address can still land."""
    real, placeholder = intake(queue, [
        good(skill="mail-a", body="Send the report to jane.roe@acme-corp.io every Friday."),
        good(skill="mail-b", body="Configure git with `git config user.email user@example.com`."),
    ])
    assert real.status == "rejected" and "secret" in findings(real)
    assert "jane.roe@acme-corp.io" not in real.proposal.body
    assert placeholder.status == "queued"
    assert "user@example.com" in placeholder.proposal.body


def test_quoting_the_redacted_window_is_not_a_secret(queue):
    """Evidence that quotes a redaction marker from the (redacted) window is attributable and
    not itself a secret hit."""
    window = WINDOW + '{"type":"user","message":{"content":"use TOKEN=[REDACTED:github_token] here"}}\n'
    [i] = intake(queue, [good(evidence="use TOKEN=[REDACTED:github_token] here")], window=window)
    assert (i.status, i.findings) == ("queued", [])


class Hooked:
    """The packaged rules, calling `hook(text)` before each use (to stall or meet a thread)."""

    def __init__(self, hook):
        self.hook, self.rules = hook, default_redactor()
        self.pii_kinds = self.rules.pii_kinds

    def redact(self, text):
        self.hook(text)
        return self.rules.redact(text)

    def find(self, text, **kw):
        self.hook(text)
        return self.rules.find(text, **kw)


def test_a_configured_redactor_judges_intake(queue):
    """The redactor given (here with one extra rule) is what intake judges and redacts with:
    what its rule finds counts as a secret."""
    [i] = intake(queue, [good(body="the word classified here")],
                 redactor=Redactor([{"kind": "custom", "pattern": "classified"}]))
    assert "custom" in i.findings[0].message
    assert i.proposal.body == "the word [REDACTED:custom] here"
    assert [f.code for f in i.findings] == ["secret"]


def test_compact_folds_updates_and_keeps_state(queue):
    """Compaction rewrites one record per intent (temp file + rename) with the same state, and
    keeps idempotence keys so re-intake still adds nothing."""
    out = intake(queue, [good(skill=f"s-{n}") for n in range(3)])
    for i in out:
        queue.update(i.id, "held")
        queue.update(i.id, "landed")
    before = {i.id: i for i in queue.list()}
    queue.compact()
    lines = open(intents_file(), "rb").read().splitlines()
    assert len(lines) == 3
    assert not [n for n in os.listdir(paths.state_dir()) if ".tmp" in n]
    q = IntentQueue()
    q.load()
    assert {i.id: i for i in q.list()} == before
    assert q.intake("job-1", "sess-1", "reflector", [good(skill=f"s-{n}") for n in range(3)],
                    WINDOW, "/proj", 3) == list(before.values())
    assert len(open(intents_file(), "rb").read().splitlines()) == 3


def test_concurrent_intakes_are_all_recorded(queue):
    """Intakes from several worker threads interleave safely: every intent is on disk once."""
    def run(n):
        intake(queue, [good(skill=f"t-{n}")], job=f"job-{n}")
    threads = [threading.Thread(target=run, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    q = IntentQueue()
    assert q.load().bad_lines == 0
    assert sorted(i.job_id for i in q.list()) == sorted(f"job-{n}" for n in range(8))


def test_unknown_source_is_refused(queue):
    """Only reflector, learn and marker intents exist."""
    with pytest.raises(ValueError):
        queue.intake("job-1", "s", "robot", [good()], WINDOW, None, 3)


STALL = 5.0  # how long a stalled writer waits before giving up (bounds a failing test's run)


@pytest.fixture
def stalled_fsync(monkeypatch):
    """`os.fsync` as the intent log calls it stalls in any thread but this test's own until
    `release` is set; `entered` says a writer is inside it."""
    real = files_mod.os.fsync
    me = threading.current_thread()
    entered, release = threading.Event(), threading.Event()

    def fsync(fd):
        if threading.current_thread() is not me:
            entered.set()
            release.wait(STALL)
        return real(fd)

    monkeypatch.setattr(files_mod.os, "fsync", fsync)
    yield entered, release
    release.set()


def test_readers_are_not_blocked_by_a_writer_in_fsync(queue, stalled_fsync):
    """The event loop's reads (list, counts, get, needs_compaction) return while a worker's
    update is stuck in its fsync, and show the old state: the update is not visible until it is
    durable. Once the fsync finishes, the update is visible."""
    entered, release = stalled_fsync
    [i] = intake(queue, [good()])
    done, result = threading.Event(), {}

    def writer():
        result["intent"] = queue.update(i.id, "landed")
        done.set()

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        assert entered.wait(STALL), "the writer never reached its fsync"
        # the fsync is held until `release`: reads that return at all did not wait for it
        listed, counts, got = queue.list(), queue.counts(), queue.get(i.id)
        queue.needs_compaction()
        assert not done.is_set(), "the reads waited for the writer's fsync"
        assert [x.status for x in listed] == ["queued"] and got.status == "queued"
        assert counts["queued"] == 1 and counts["landed"] == 0
    finally:
        release.set()
        t.join(STALL)
    assert done.is_set() and result["intent"].status == "landed"
    assert queue.get(i.id).status == "landed" and queue.counts()["landed"] == 1


def test_intake_is_invisible_to_readers_until_durable(queue, stalled_fsync):
    """A new intent shows up in reads only after its append is fsynced; reads made while the
    intake is in its fsync return at once with the earlier intents."""
    entered, release = stalled_fsync
    [a] = intake(queue, [good()])
    out = {}
    t = threading.Thread(target=lambda: out.setdefault(
        "b", intake(queue, [good(skill="second-skill")], job="job-2")), daemon=True)
    t.start()
    try:
        assert entered.wait(STALL)
        assert [x.id for x in queue.list()] == [a.id]
        assert queue.counts()["queued"] == 1
        assert t.is_alive()
    finally:
        release.set()
        t.join(STALL)
    [b] = out["b"]
    assert [x.id for x in queue.list()] == [a.id, b.id]


def test_judging_holds_no_lock(queue):
    """Redaction and evidence matching run outside the writer lock: while one intake is in the
    middle of judging, another thread's update lands and reads return."""
    [a] = intake(queue, [good()])
    judging, go = threading.Event(), threading.Event()

    def slow_redactor(text):
        if not go.is_set():
            judging.set()
            go.wait(STALL)
            go.set()
        return text

    out = {}
    t = threading.Thread(target=lambda: out.setdefault("b", intake(
        queue, [good(skill="slow-skill")], job="job-2", redactor=Hooked(slow_redactor))), daemon=True)
    t.start()
    try:
        assert judging.wait(STALL)
        assert queue.update(a.id, "held").status == "held"
        assert [x.id for x in queue.list()] == [a.id]
        assert t.is_alive(), "the update waited for the other intake's judging"
    finally:
        go.set()
        t.join(STALL)
    [b] = out["b"]
    assert b.status == "queued"
    q = IntentQueue()
    q.load()
    assert [(x.id, x.status) for x in q.list()] == [(a.id, "held"), (b.id, "queued")]


def test_concurrent_reintake_of_one_job_records_it_once(queue):
    """Two workers judging the same job at the same time (a retried job racing its first run):
    one appends, the other returns the intents the first recorded; the file holds one record."""
    barrier = threading.Barrier(2, timeout=STALL)
    local = threading.local()

    def meet_once(text):
        if not getattr(local, "met", False):
            local.met = True
            barrier.wait()  # both threads are judging at once
        return text

    results, errors = [], []

    def run():
        try:
            results.append(intake(queue, [good(), good(skill="x-skill")], redactor=Hooked(meet_once)))
        except threading.BrokenBarrierError as e:  # the two never judged at the same time
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(STALL * 2)
    assert not errors
    assert len(results) == 2 and results[0] == results[1] and len(results[0]) == 2
    assert len(queue.list()) == 2
    with open(intents_file(), "rb") as f:
        assert len(f.read().splitlines()) == 2


@pytest.mark.parametrize("cut_back", [True, False], ids=["cut-back", "cannot-cut-back"])
def test_an_intake_a_full_disk_cuts_short_loses_no_queued_intent(queue, monkeypatch, cut_back):
    """An intake whose append the disk cuts short raises and publishes nothing; the partial
    line is cut off, or, if even that fails, the next intake starts on a line of its own: every
    intent reported queued is read back after a reload (the damage, if any, quarantined)."""
    [first] = intake(queue, [good()], job="job-1")
    fill_disk_midway(monkeypatch, lambda: intake(queue, [good(skill="b-skill")], job="job-2"),
                     cut_back=cut_back)
    assert [i.job_id for i in queue.list()] == ["job-1"]
    [second] = intake(queue, [good(skill="b-skill")], job="job-2")
    [third] = intake(queue, [good(skill="c-skill")], job="job-3")
    again = IntentQueue()
    report = again.load()
    assert [i.id for i in again.list()] == [first.id, second.id, third.id]
    assert all(i.status == "queued" for i in again.list())
    assert (report.quarantined is None) is cut_back  # a partial line left is kept for inspection


def test_a_full_disk_mid_intake_in_the_daemon_loses_no_intent(home, monkeypatch):
    """Through the real daemon: the file size limit is set just past the intent file while a
    job's intake appends to it (a disk filling up mid-append). The append fails part-way, is
    cut back (no partial line left), the job waits and is retried once there is room, without
    the failure counting as a model attempt; after a kill -9 every intent of every job is read
    back and nothing was set aside."""
    project = home["tmp"] / "proj"
    project.mkdir()
    slug_dir = home["claude"] / "projects" / paths.project_slug(str(project))
    slug_dir.mkdir(parents=True)
    quote = "always run `make lint` before committing"
    big = "Run `make lint` first.\n" + "Then read what it says, line by line. " * 300

    def reply(sid: str) -> dict:
        return tool_reply({"proposals": [good(skill=f"{sid}-{n}-skill", evidence=quote, body=big)
                                         for n in range(3)]})

    with FakeAnthropic() as fake:
        env = {"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": fake.base_url,
               "AUTOHARNESS_REFLECT_EVERY": "1", "AUTOHARNESS_WATCH": "0",
               "AUTOHARNESS_PROMOTER_MODE": "review", "AUTOHARNESS_REFLECTOR_BACKOFF_BASE_S": "0.05",
               "AUTOHARNESS_PERSIST_INTERVAL_S": "0.2"}
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        d = Daemon(home["home"])

        def job(sid: str) -> None:
            t = slug_dir / f"{sid}.jsonl"
            t.write_text(json.dumps({"type": "user", "message": {"role": "user",
                                                                  "content": f"no, {quote}"}}) + "\n")
            os.utime(t, (time.time() - 10, time.time() - 10))  # settled
            fake.default = reply(sid)
            base = {"session_id": sid, "transcript_path": str(t), "cwd": str(project)}
            hook(dict(base, hook_event_name="PreToolUse", tool_name="Bash"))
            hook(dict(base, hook_event_name="Stop"))

        def done() -> int:
            return d.status()["jobs"]["done"]

        try:
            job("s1")
            wait_for(lambda: done() == 1, timeout=60, what="the first job")
            size = os.path.getsize(intents_file())
            room = size + 2000  # less than an intake: the limit bites the intents file
            assert os.path.getsize(paths.journal_file()) < room // 2
            resource.prlimit(d.proc.pid, resource.RLIMIT_FSIZE, (room, resource.RLIM_INFINITY))
            job("s2")
            wait_for(lambda: "intents" in ((d.status()["jobs"]["last_error"] or {}).get("error")
                                           or ""), timeout=60, what="the intake refused")
            data = open(intents_file(), "rb").read()  # cut back: no partial line left
            assert data.endswith(b"\n") and all(json.loads(x) for x in data.splitlines())
            assert len(data) < room
            resource.prlimit(d.proc.pid, resource.RLIMIT_FSIZE,
                             (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            wait_for(lambda: done() == 2, timeout=60, what="the second job, retried")
            job("s3")
            wait_for(lambda: done() == 3, timeout=60, what="the third job")
        finally:
            d.kill9()
        d = Daemon(home["home"])
        try:
            st = d.status()
            assert st["persistence"]["quarantined"] == []
            sessions = sorted(i["session_id"] for i in json.loads(
                ctl("queue", "list", "--json").stdout))
            assert sessions == ["s1"] * 3 + ["s2"] * 3 + ["s3"] * 3
        finally:
            d.stop()
    snap = json.loads((home["home"] / "state" / "snapshot.json").read_text())
    assert all(j.get("attempts", 0) == 0 for j in snap["jobs"].values())
