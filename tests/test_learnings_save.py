"""Marker state and saving: journal, wiki, doc drafts, marker intents."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from claude_autoharness.daemon.capture.redact import Redactor
from claude_autoharness.daemon.learnings import markers as mk
from claude_autoharness.daemon.learnings import save as sv
from claude_autoharness.daemon.learnings import state as st
from claude_autoharness.daemon.learnings.report import session_start_report
from claude_autoharness.daemon.persist import quarantine
from claude_autoharness.daemon.proposals import check_shape
from conftest import REAL, copy_corpus
from marker_support import (
    REAL_A,
    REAL_B,
    REAL_C,
    REAL_D,
    REAL_E,
    assistant,
    fixture_bytes,
    marker,
    text_blocks,
)

SLUG = "-home-u-app"
NOW = 1_800_000_000.0


def tree(root: Path) -> dict[str, str]:
    """Every file under root with the sha256 of its content."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def journal_text(project: Path) -> str:
    """All journal pages (the day a marker lands on is local time, so it varies by zone)."""
    return "".join(p.read_text() for p in sorted((project / ".claude/journal").glob("*.md")))


def fixture_markers():
    return mk.extract_markers(fixture_bytes(), source=f"/x/{SLUG}/s1.jsonl")


class Queue:
    """A stand-in for the durable intent queue that, like it, ignores a known intent id."""

    def __init__(self):
        self.intents = {}
        self.calls = 0

    def __call__(self, intent):
        self.calls += 1
        self.intents.setdefault(intent.id, intent)


@pytest.fixture
def project(short_tmp):
    root = short_tmp / "proj"
    (root / "src").mkdir(parents=True)
    (root / "README.md").write_text("# app\n")
    return root


def clean_run(home, project):
    q = Queue()
    sv.save_markers(str(project), fixture_markers(), st.LearningState(SLUG), queue_intent=q,
                    now=NOW)
    return tree(project), q


# -- state ------------------------------------------------------------------------------------

def test_record_caps_fifo_and_moves_forward_only():
    """Processed ids are deduplicated and FIFO-capped at 5,000 (oldest dropped);
    last_processed_at never moves backwards."""
    s = st.record(st.ProjectState(), [f"{i:016x}" for i in range(5_100)], 100.0)
    assert len(s.processed_ids) == st.MAX_PROCESSED == 5_000
    assert s.processed_ids[0] == f"{100:016x}" and s.processed_ids[-1] == f"{5_099:016x}"
    s2 = st.record(s, [f"{5_099:016x}", "ffffffffffffffff"], 50.0)
    assert s2.last_processed_at == 100.0
    assert s2.processed_ids[-1] == "ffffffffffffffff" and len(s2.processed_ids) == 5_000
    assert st.record(s2, [], 200.0).last_processed_at == 200.0


def test_state_file_is_private_and_atomic(home):
    """The state lives under the state dir, 0600, and a write leaves no temp file behind."""
    ls = st.LearningState(SLUG)
    ls.record(["a" * 16], NOW)
    path = Path(st.state_file(SLUG))
    assert path.is_relative_to(Path(os.environ["AUTOHARNESS_HOME"]))
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".tmp-")] == []
    assert st.LearningState(SLUG).processed_ids == {"a" * 16}


def test_corrupt_state_is_quarantined_not_fatal(home):
    """A corrupt state file is quarantined (where status and doctor show it) and the project
    starts empty (a re-report)."""
    path = Path(st.state_file(SLUG))
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert st.load(SLUG) == st.ProjectState()
    assert not path.exists()
    [aside] = quarantine.files()
    assert os.path.basename(aside).startswith(path.name) and Path(aside).read_text() == "{not json"


def write_atl(home, projects, flat=False):
    path = Path(home["claude"]) / "state" / "learning-capture-state.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(projects if flat else {"projects": projects}))
    return path


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def test_atl_state_honoured_and_never_written(home, project):
    """atl's processed ids and lastProcessedAt (Go RFC3339 with nanoseconds) seed the state on
    first use, its markers are not re-reported, and atl's file is never written."""
    ms = fixture_markers()
    atl = write_atl(home, {SLUG: {"lastProcessedAt": "2026-05-02T14:00:31.123456789Z",
                                  "processedMarkers": [ms[0].id, ms[1].id]},
                           "-other": {"lastProcessedAt": "0001-01-01T00:00:00Z"}})
    before = digest(atl)
    ls = st.LearningState(SLUG)
    assert ls.processed_ids == {ms[0].id, ms[1].id}
    assert ls.last_processed_at == pytest.approx(1777730431.123456)
    assert st.LearningState("-other").last_processed_at == 0.0
    ix = mk.MarkerIndexer()
    ix.feed(f"/x/{SLUG}/s1.jsonl", 0, fixture_bytes())
    assert [m.id for m in ix.unprocessed(SLUG, ls.processed_ids)] == [m.id for m in ms[2:]]
    sv.save_markers(str(project), ms, ls, queue_intent=Queue(), now=NOW)
    assert digest(atl) == before
    ours = st.load(SLUG)
    assert set(ours.processed_ids) == {m.id for m in ms}
    assert ours.last_processed_at == NOW  # forward from atl's 2026-05 timestamp
    assert digest(atl) == before


def test_atl_flat_shape_and_garbage_are_lenient(home):
    """A flat `{slug: {...}}` atl file is read too; unreadable atl files are ignored."""
    write_atl(home, {SLUG: {"processed_ids": ["b" * 16], "last_processed_at": 5}}, flat=True)
    assert st.LearningState(SLUG).processed_ids == {"b" * 16}
    write_atl(home, {SLUG: {"processedMarkers": "nope", "lastProcessedAt": "yesterday"}})
    assert st.load(SLUG) == st.ProjectState()
    write_atl(home, ["x"], flat=True)
    assert st.load(SLUG) == st.ProjectState()


def test_state_only_changes_on_save(home, project):
    """Scanning, indexing, reporting and loading state write nothing; a dry run neither;
    only a real save records the markers."""
    state_root = Path(os.environ["AUTOHARNESS_HOME"])
    before = tree(state_root)
    ix = mk.MarkerIndexer()
    ix.feed(f"/x/{SLUG}/s1.jsonl", 0, fixture_bytes())
    ls = st.LearningState(SLUG)
    assert session_start_report(ix.unprocessed(SLUG, ls.processed_ids))
    sv.save_markers(str(project), ix.markers(SLUG), ls, queue_intent=Queue(), dry_run=True,
                    now=NOW)
    assert tree(state_root) == before
    sv.save_markers(str(project), ix.markers(SLUG), ls, queue_intent=Queue(), now=NOW)
    assert tree(state_root) != before
    assert session_start_report(ix.unprocessed(SLUG, st.LearningState(SLUG).processed_ids)) == ""


# -- save -------------------------------------------------------------------------------------

def test_save_writes_journal_wiki_drafts_and_intents(home, project):
    """One journal entry per marker, a wiki page per topic, drafts for doc-impact ≠ none
    (breaking flags CHANGELOG/migration), well-shaped `marker` intents for the four lesson kinds
    with the marker text as evidence, and nothing outside `.claude/`."""
    outside = tree(project)
    q = Queue()
    ms = fixture_markers()
    res = sv.save_markers(str(project), ms, st.LearningState(SLUG), queue_intent=q, now=NOW)
    after = tree(project)
    assert {k: v for k, v in after.items() if not k.startswith(".claude/")} == outside
    assert res.saved == [m.id for m in ms]
    journal = journal_text(project)
    for m in ms:
        assert journal.count(f"id={m.id}") == 1 and m.body in journal
    assert sorted(res.wiki) == sorted(f".claude/wiki/{m.topic}.md" for m in ms)
    assert sorted(Path(d).name for d in res.drafts) == sorted(
        f"{m.topic}-{m.id}.md" for m in ms if m.doc_impact != "none")
    breaking = (project / f".claude/doc-drafts/v1.2-config-{ms[4].id}.md").read_text()
    assert "CHANGELOG" in breaking and "migration" in breaking
    readme_draft = project / f".claude/doc-drafts/auth-refresh-{ms[0].id}.md"
    assert "CHANGELOG" not in readme_draft.read_text()
    kinds = {m.id: m for m in ms}
    assert sorted(q.intents) == sorted(f"marker-{m.id}" for m in ms if m.kind in sv.INTENT_KINDS)
    for intent in q.intents.values():
        m = kinds[intent.id.removeprefix("marker-")]
        assert intent.source == "marker" and intent.status == "queued"
        assert intent.proposal.evidence == m.raw  # the marker exactly as the agent wrote it
        assert m.raw in (REAL_A, REAL_B, REAL_C, REAL_D, REAL_E)
        assert intent.proposal.layer == "project" and intent.proposal.action == "create"
        assert check_shape(intent.proposal) == []
        assert intent.project_root == str(project)
    assert set(st.load(SLUG).processed_ids) == {m.id for m in ms}


def test_save_is_idempotent(home, project):
    """Saving twice gives the same files; even with the state lost, anchors keep the journal,
    wiki and drafts free of duplicates."""
    first, q = clean_run(home, project)
    res = sv.save_markers(str(project), fixture_markers(), st.LearningState(SLUG),
                          queue_intent=q, now=NOW + 86_400)
    assert res.saved == [] and len(res.skipped) == 5
    assert tree(project) == first
    os.unlink(st.state_file(SLUG))
    sv.save_markers(str(project), fixture_markers(), st.LearningState(SLUG), queue_intent=q,
                    now=NOW + 2 * 86_400)
    assert tree(project) == first


def test_dry_run_reports_the_plan_and_writes_nothing(home, project):
    """--dry-run writes and queues nothing but names exactly what a real save would do."""
    before = tree(project)
    q = Queue()
    dry = sv.save_markers(str(project), fixture_markers(), st.LearningState(SLUG),
                          queue_intent=q, dry_run=True, now=NOW)
    assert tree(project) == before and q.calls == 0 and not Path(st.state_file(SLUG)).exists()
    real = sv.save_markers(str(project), fixture_markers(), st.LearningState(SLUG),
                           queue_intent=q, now=NOW)
    assert msgspec.structs.replace(dry, dry_run=False) == real


class Crash(Exception):
    pass


def fail_on(k, real, calls):
    """`real`, except that its k-th call (0-based) raises Crash."""
    def wrapper(*a, **kw):
        calls.append(1)
        if len(calls) == k + 1:
            raise Crash()
        return real(*a, **kw)
    return wrapper


def save_with_crash(root, where, k, queue):
    """Run one save whose k-th file write / queue call / state update raises; return calls."""
    calls = []
    real_write, real_record = sv._write, st.LearningState.record
    if where == "write":
        sv._write = fail_on(k, real_write, calls)
    elif where == "queue":
        queue = fail_on(k, queue, calls)
    else:
        st.LearningState.record = fail_on(k, real_record, calls)
    try:
        sv.save_markers(str(root), fixture_markers(), st.LearningState(SLUG),
                        queue_intent=queue, now=NOW)
    finally:
        sv._write, st.LearningState.record = real_write, real_record
    return calls


@pytest.mark.parametrize("where", ["write", "queue", "state"])
def test_crash_at_every_step_then_rerun_completes_without_duplicates(home, short_tmp,
                                                                      monkeypatch, where):
    """A save that dies at any file write, in the intent queue or in the state update leaves
    the markers reported, and a rerun completes it: the same files as a clean save, each intent
    handed to the queue once, the markers recorded."""
    monkeypatch.setenv("AUTOHARNESS_HOME", str(short_tmp / "h-clean"))
    (short_tmp / "clean").mkdir()
    expected, clean_q = clean_run(home, short_tmp / "clean")
    monkeypatch.setenv("AUTOHARNESS_HOME", str(short_tmp / "h-count"))
    (short_tmp / "count").mkdir()
    steps = len(save_with_crash(short_tmp / "count", where, 10_000, Queue()))
    assert steps >= {"write": 9, "queue": 3, "state": 1}[where]
    for k in range(steps):
        monkeypatch.setenv("AUTOHARNESS_HOME", str(short_tmp / f"h-{k}"))
        root = short_tmp / f"p-{k}"
        root.mkdir()
        q = Queue()
        with pytest.raises(Crash):
            save_with_crash(root, where, k, q)
        assert st.LearningState(SLUG).processed_ids == frozenset()  # still reported
        sv.save_markers(str(root), fixture_markers(), st.LearningState(SLUG), queue_intent=q,
                        now=NOW)
        assert tree(root) == expected, (where, k)
        assert sorted(q.intents) == sorted(clean_q.intents)
        # (a queue call that raised never reached the queue)
        assert q.calls == len(clean_q.intents), "an intent was handed to the queue twice"
        assert st.LearningState(SLUG).processed_ids == {m.id for m in fixture_markers()}


CHILD = """
import os, signal, sys, json
from claude_autoharness.daemon.learnings import markers as mk, save as sv, state as st
kill_at = int(sys.argv[3])
n = [0]
real = sv._write
def write(p, t):
    n[0] += 1
    if n[0] == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
    real(p, t)
sv._write = write
def queue(intent):
    with open(sys.argv[4], "a") as f:
        f.write(intent.id + "\\n"); f.flush(); os.fsync(f.fileno())
ms = mk.scan_file(sys.argv[2])
sv.save_markers(sys.argv[1], ms, st.LearningState(sys.argv[5]), queue_intent=queue, now=1.8e9)
"""


@pytest.mark.parametrize("kill_at", [1, 3, 6])
def test_killed_process_mid_save_then_rerun(home, project, short_tmp, kill_at):
    """A save process killed (SIGKILL) between two writes leaves no torn file; a rerun
    completes the save without duplicate entries and the markers are then no longer reported."""
    slug_dir = home["claude"] / "projects" / SLUG
    slug_dir.mkdir()
    transcript = copy_corpus("spotter/short.jsonl", slug_dir)
    with open(transcript, "ab") as f:
        f.write(fixture_bytes())
    log = short_tmp / "queued.txt"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(project), str(transcript),
                           str(kill_at), str(log), SLUG], capture_output=True)
    assert proc.returncode == -9, proc.stderr.decode()
    assert session_start_report(mk.scan_file(str(transcript)))  # still reported
    ls = st.LearningState(SLUG)
    assert ls.processed_ids == frozenset()
    def queue(intent):
        with log.open("a") as f:
            f.write(intent.id + "\n")

    sv.save_markers(str(project), mk.scan_file(str(transcript)), ls, queue_intent=queue, now=NOW)
    journal = journal_text(project)
    for m in fixture_markers():
        assert journal.count(f"id={m.id}") == 1
        assert (project / f".claude/wiki/{m.topic}.md").read_text().count(f"id={m.id}") == 1
    queued = log.read_text().split()
    assert sorted(set(queued)) == sorted(queued)  # killed before any intent: each once
    assert len(queued) == 3
    ix = mk.MarkerIndexer()
    ix.feed(str(transcript), 0, transcript.read_bytes())
    assert ix.unprocessed(SLUG, st.LearningState(SLUG).processed_ids) == []


def test_growing_transcript_marker_reported_once_then_not_after_save(home, project):
    """A marker appended to a growing real transcript is found by the indexer from the new
    bytes only, reported once, and not reported again after it is saved."""
    slug_dir = home["claude"] / "projects" / SLUG
    slug_dir.mkdir()
    t = copy_corpus("claude-code-viewer/1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl", slug_dir)
    ix = mk.MarkerIndexer()
    ix.feed(str(t), 0, t.read_bytes())
    assert ix.unprocessed(SLUG, st.LearningState(SLUG).processed_ids) == []
    offset = t.stat().st_size
    line = (json.dumps(assistant(text_blocks("ok " + marker("late-lesson", "bug-fix",
                                                               "Off-by-one in paging.")))) + "\n")
    with open(t, "a") as f:
        f.write(line)
    with open(t, "rb") as f:
        f.seek(offset)
        new = f.read()
    assert ix.feed(str(t), offset, new) == 1
    report = session_start_report(ix.unprocessed(SLUG, st.LearningState(SLUG).processed_ids))
    assert report.startswith("🧠 learning-capture: 1 unprocessed marker across 1 transcript")
    sv.save_markers(str(project), ix.unprocessed(SLUG, st.LearningState(SLUG).processed_ids),
                    st.LearningState(SLUG), queue_intent=Queue(), now=NOW)
    assert ix.feed(str(t), 0, t.read_bytes()) == 0
    assert session_start_report(ix.unprocessed(SLUG, st.LearningState(SLUG).processed_ids)) == ""


def test_wiki_is_replace_style_with_history_newest_first(home, project):
    """The wiki page's current truth is the newest body; older bodies stay below, newest first,
    also when an older marker is saved later."""
    def m(body, ts):
        return mk.extract_markers((json.dumps(assistant(text_blocks(marker(
            "db-pool", "decision", body)), ts=ts)) + "\n").encode())[0]
    ls = st.LearningState(SLUG)
    sv.save_markers(str(project), [m("Pool of 10.", "2026-01-02T00:00:00Z")], ls,
                    queue_intent=None, now=NOW)
    sv.save_markers(str(project), [m("Pool of 20: load grew.", "2026-01-03T00:00:00Z"),
                                   m("Pool of 5 at first.", "2026-01-01T00:00:00Z")], ls,
                    queue_intent=None, now=NOW)
    page = (project / ".claude/wiki/db-pool.md").read_text()
    head, history = page.split("## History")
    assert "Pool of 20: load grew." in head and "Pool of 10." not in head
    order = [history.index(b) for b in ("Pool of 20", "Pool of 10", "Pool of 5")]
    assert order == sorted(order)


def test_intents_patch_an_existing_skill_and_chain_within_a_run(home, project):
    """For an existing project skill the intent is a patch whose `old` occurs once in SKILL.md;
    a second lesson on the same topic in one run patches the text the first leaves; a lesson
    already in the skill is not proposed again."""
    skill = project / ".claude/skills/retry-backoff/SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: retry-backoff\ndescription: Retries.\n---\n"
                     "# Retries\n\nUse them.\n")
    text = skill.read_text()
    ms = [mk.markers_in_text(marker("retry-backoff", "pattern", b), timestamp=ts)[0]
          for b, ts in (("Jitter the delay.", "2026-01-01T00:00:00Z"),
                        ("Cap at 5 tries.", "2026-01-02T00:00:00Z"))]
    q = Queue()
    sv.save_markers(str(project), ms, st.LearningState(SLUG), queue_intent=q, now=NOW)
    p1, p2 = (q.intents[f"marker-{m.id}"].proposal for m in ms)
    assert p1.action == p2.action == "patch" and text.count(p1.old) == 1
    after_first = text.replace(p1.old, p1.new, 1)
    assert after_first.count(p2.old) == 1 and "Jitter the delay." in after_first
    skill.write_text(after_first.replace(p2.old, p2.new, 1))
    again = mk.markers_in_text(marker("retry-backoff", "pattern", "Cap at 5 tries.  "))
    assert again[0].id == ms[1].id  # same lesson (body is stripped)
    q2 = Queue()
    os.unlink(st.state_file(SLUG))
    sv.save_markers(str(project), [ms[1]], st.LearningState(SLUG), queue_intent=q2, now=NOW)
    assert q2.calls == 0


def test_save_refuses_to_write_outside_dot_claude(home, project, short_tmp):
    """A `.claude/wiki` that is a symlink out of the project is refused, not followed."""
    elsewhere = short_tmp / "elsewhere"
    elsewhere.mkdir()
    (project / ".claude").mkdir()
    (project / ".claude" / "wiki").symlink_to(elsewhere)
    with pytest.raises(ValueError):
        sv.save_markers(str(project), fixture_markers(), st.LearningState(SLUG),
                        queue_intent=None, now=NOW)
    assert list(elsewhere.iterdir()) == []
    assert not Path(st.state_file(SLUG)).exists()


def test_real_transcript_with_markers_end_to_end(home, project):
    """Markers appended to a copy of a long real transcript are saved once each."""
    slug_dir = home["claude"] / "projects" / SLUG
    slug_dir.mkdir()
    t = copy_corpus("spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl", slug_dir)
    with open(t, "ab") as f:
        f.write(fixture_bytes())
    res = sv.save_markers(str(project), mk.scan_file(str(t)), st.LearningState(SLUG),
                          queue_intent=Queue(), now=NOW)
    assert len(res.saved) == 5
    assert (REAL / "spotter" / t.name).stat().st_size < t.stat().st_size


def test_partial_save_can_keep_the_cutoff(home, project):
    """`advance_time=False` (a save limited to some transcripts) records the ids but leaves
    last_processed_at, so the offline scan still finds the other transcripts' markers."""
    ls = st.LearningState(SLUG)
    sv.save_markers(str(project), fixture_markers()[:2], ls, queue_intent=None, now=NOW,
                    advance_time=False)
    after = st.load(SLUG)
    assert after.last_processed_at == 0.0 and len(after.processed_ids) == 2


# -- review fixes: redaction, real intent ids, a symlinked .claude ------------------------------

GH_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def secret_markers():
    """A pattern marker with a token in its body and a breaking decision with a key in it."""
    text = (marker("token-setup", "pattern", f"Export GITHUB_TOKEN={GH_TOKEN} before pushing.")
            + "\n" + marker("aws-keys", "decision", "Rotated AKIA" + "Z7QX2LMN4PR8TV6W today.",
                            "breaking"))
    return mk.markers_in_text(text, timestamp="2026-03-01T10:00:00Z", transcript="/x/s.jsonl")


def all_text(root: Path) -> str:
    return "".join(p.read_text() for p in root.rglob("*") if p.is_file())


def test_marker_secrets_are_redacted_before_anything_is_written(home, project):
    """Marker bodies holding a secret reach the journal, wiki, doc drafts and the intent
    redacted (`[REDACTED:<kind>]`), while ids stay those of the marker as written: the state
    records them and a second save finds nothing to do."""
    ms = secret_markers()
    q = Queue()
    res = sv.save_markers(str(project), ms, st.LearningState(SLUG), queue_intent=q, now=NOW)
    written = all_text(project / ".claude")
    assert GH_TOKEN not in written and "Z7QX2LMN4PR8TV6W" not in written
    assert "[REDACTED:github_token]" in written and "[REDACTED:aws_access_key]" in written
    assert res.drafts and res.journal and len(res.wiki) == 2
    (intent,) = q.intents.values()
    for text in (intent.proposal.evidence, intent.proposal.body, intent.proposal.description):
        assert GH_TOKEN not in text
    assert "[REDACTED:github_token]" in intent.proposal.evidence
    assert intent.id == f"marker-{ms[0].id}"
    assert set(st.load(SLUG).processed_ids) == {m.id for m in ms}  # original ids
    before = tree(project)
    again = sv.save_markers(str(project), ms, st.LearningState(SLUG), queue_intent=q, now=NOW)
    assert again.saved == [] and tree(project) == before


def test_save_markers_uses_the_given_redactor(home, project):
    """A configured redactor (here with one extra rule) is what redacts the marker text."""
    ms = mk.markers_in_text(marker("codename", "decision", "Project Bluebird ships in May."))
    sv.save_markers(str(project), ms, st.LearningState(SLUG), queue_intent=None, now=NOW,
                    redactor=Redactor([{"kind": "codename", "pattern": "Bluebird"}]))
    text = all_text(project / ".claude")
    assert "Bluebird" not in text and "[REDACTED:codename]" in text


def write_project_transcript(home, project, text):
    from claude_autoharness.protocol import paths

    slug = paths.project_slug(str(project))
    d = home["claude"] / "projects" / slug
    d.mkdir(parents=True, exist_ok=True)
    t = d / "s-review.jsonl"
    t.write_text(json.dumps(assistant(text_blocks("ok " + text))) + "\n")
    return slug


def test_save_project_reports_the_queue_ids_and_redacts_at_intake(home, project):
    """`save_project` reports the ids the intent queue stored (not `marker-<id>`), the intent
    built from a secret-bearing marker is queued redacted (not rejected), and the redactor given
    to `save_project` also judges the intents at the queue's door."""
    from claude_autoharness.daemon.capture.redact import default_redactor
    from claude_autoharness.daemon.intents import IntentQueue
    from claude_autoharness.daemon.learnings import service

    write_project_transcript(home, project, marker(
        "token-setup", "pattern", f"Export GITHUB_TOKEN={GH_TOKEN} before pushing.") + "\n"
        + marker("retry-backoff", "convention", "Retries use jittered backoff."))
    queue = IntentQueue()
    queue.load()
    seen = []
    default = default_redactor()

    class Spy:  # the packaged rules, noting each text they are asked about
        pii_kinds = default.pii_kinds

        def redact(self, text):
            seen.append(text)
            return default.redact(text)

        def find(self, text, **kw):
            seen.append(text)
            return default.find(text, **kw)

    res = service.save_project(str(project), None, queue, lookback_days=30, redactor=Spy())
    stored = queue.list()
    assert sorted(res.intents) == sorted(i.id for i in stored) and len(stored) == 2
    assert all(i.startswith("i-") for i in res.intents)
    assert [i.status for i in stored] == ["queued", "queued"]
    assert all(GH_TOKEN not in i.proposal.evidence for i in stored)
    assert any(s.startswith("Use when working on") for s in seen)  # intake used it too
    assert GH_TOKEN not in all_text(project / ".claude")


def test_save_markers_reports_ids_returned_by_the_callback(home, project):
    """A queue callback returning the stored id(s) is what `LearningsSaved.intents` reports; one
    returning None reports the intent's own `marker-<id>`."""
    ms = fixture_markers()
    res = sv.save_markers(str(project), ms, st.LearningState(SLUG),
                          queue_intent=lambda intent: ["i-" + intent.id[-16:]], now=NOW)
    assert sorted(res.intents) == sorted(f"i-{m.id}" for m in ms if m.kind in sv.INTENT_KINDS)
    other = project.parent / "p2"
    other.mkdir()
    res = sv.save_markers(str(other), ms, st.LearningState("-other"), queue_intent=Queue(),
                          now=NOW)
    assert sorted(res.intents) == sorted(f"marker-{m.id}" for m in ms
                                         if m.kind in sv.INTENT_KINDS)


def test_save_refuses_a_dot_claude_symlinked_out_of_the_project(home, project, short_tmp):
    """A `<project>/.claude` that is itself a symlink leading outside the project is refused
    with a clear error: nothing is written there and no marker is recorded as saved."""
    elsewhere = short_tmp / "elsewhere"
    elsewhere.mkdir()
    (project / ".claude").symlink_to(elsewhere)
    with pytest.raises(ValueError, match="outside the project"):
        sv.save_markers(str(project), fixture_markers(), st.LearningState(SLUG),
                        queue_intent=None, now=NOW)
    assert list(elsewhere.iterdir()) == []
    assert not Path(st.state_file(SLUG)).exists()


def test_save_accepts_a_dot_claude_symlinked_inside_the_project(home, project):
    """A `.claude` symlink that resolves inside the project (e.g. to a tracked dir) is fine."""
    (project / "dot-claude").mkdir()
    (project / ".claude").symlink_to(project / "dot-claude")
    res = sv.save_markers(str(project), fixture_markers(), st.LearningState(SLUG),
                          queue_intent=None, now=NOW)
    assert res.journal and list((project / "dot-claude" / "journal").glob("*.md"))
