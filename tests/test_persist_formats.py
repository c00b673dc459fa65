"""Old state files still load: every on-disk format, as the daemon wrote it before its
persistence became one package (tests/fixtures/formats, see its README), loads with today's code
into what the old code loaded from the same bytes. And every file set aside, whatever part of
the daemon found it unreadable, is in the one quarantine `status` and `doctor` show."""

import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import msgspec
import pytest

from claude_autoharness.daemon.book import Book
from claude_autoharness.daemon.intents import IntentQueue
from claude_autoharness.daemon.learnings import state as ls
from claude_autoharness.daemon.persist import dirs, quarantine
from claude_autoharness.daemon.persist import state as st
from claude_autoharness.daemon.persist.promoter import StaleMark
from claude_autoharness.daemon.promote import records
from claude_autoharness.daemon.promote.statedir import StateDir
from claude_autoharness.daemon.reflect import batchstore
from claude_autoharness.daemon.reflected import ReflectedRecords
from claude_autoharness.daemon.reportlog import ReportLog
from claude_autoharness.protocol import paths
from harness import Daemon, ctl, wait_for

FORMATS = Path(__file__).parent / "fixtures" / "formats"
T0 = 1_790_000_000.0


def expected(*parts: str):
    return json.loads(FORMATS.joinpath(*parts).read_text())


def install_state(skip: str = "", replace: dict[str, bytes] | None = None) -> None:
    """The fixture's snapshots and journal into the state dir, as the old daemon left them."""
    paths.make_private_dirs(paths.state_dir())
    for f in (FORMATS / "state").iterdir():
        if f.name.startswith("expected") or f.name == skip:
            continue
        dest = os.path.join(paths.state_dir(), f.name)
        if replace and f.name in replace:
            Path(dest).write_bytes(replace[f.name])
        else:
            shutil.copyfile(f, dest)


def loaded_book() -> Book:
    book = Book(clock=lambda: T0 + 100)
    book.load()
    return book


def test_the_journal_fixture_holds_every_record_kind():
    """The fixture exercises each kind of the journal's union, the legacy ones included: a kind
    added later needs a fixture of its own."""
    ops = set()
    for f in (FORMATS / "state").glob("journal*.jsonl"):
        ops |= {json.loads(line)["op"] for line in f.read_text().splitlines() if line.strip()}
    kinds = {t.__struct_config__.tag for t in st.Record.__args__}
    assert ops == kinds == {"event", "calls", "job", "parts", "forget", "session", "carry",
                            "turn"}


def test_the_old_snapshot_and_journal_load_as_before(home):
    """Newest snapshot + the journal after it: the same state, ids and no quarantine."""
    install_state()
    book = loaded_book()
    want = expected("state", "expected.json")
    assert msgspec.to_builtins(book.state) == want["state"]
    assert list(book.seen) == want["seen"]
    assert quarantine.files() == []


@pytest.mark.parametrize("newest", ["missing", "corrupt"])
def test_every_old_record_kind_replays_as_before(home, newest):
    """Without a readable newest snapshot the previous one and every journal segment since it
    are replayed: each record kind (the legacy single-`job`, `session`, `carry` and `turn`
    records too) gives the state the old code gave. A corrupt newest snapshot is quarantined."""
    if newest == "missing":
        install_state(skip="snapshot.json")
    else:
        install_state(replace={"snapshot.json": b'{"schema": 1, "sessions": {'})
    book = loaded_book()
    want = expected("state", "expected-from-prev.json")
    assert msgspec.to_builtins(book.state) == want["state"]
    assert list(book.seen) == want["seen"]
    assert book.state.turns.projects == {"/proj/a": 1, "/proj/b": 1}  # the legacy turn counted
    assert {"j-legacy", "j-carry"} <= set(book.state.jobs)
    assert {"s-legacy", "s-carry"} <= set(book.state.sessions)
    aside = [os.path.basename(p) for p in quarantine.files()]
    assert aside == [] if newest == "missing" else (
        len(aside) == 1 and aside[0].startswith("snapshot.json."))


def test_the_old_intent_file_loads_as_before(home):
    paths.make_private_dirs(paths.state_dir())
    shutil.copyfile(FORMATS / "intents" / "intents.jsonl", paths.intents_file())
    q = IntentQueue()
    report = q.load()
    want = expected("intents", "expected.json")
    assert report.bad_lines == 0 and report.problems == []
    assert msgspec.to_builtins(q.list()) == want["intents"]
    assert msgspec.to_builtins(q.verdicts()) == want["verdicts"]
    assert q.counts() == want["counts"]
    q.compact()  # rewritten in today's format: the same queue
    again = IntentQueue()
    again.load()
    assert msgspec.to_builtins(again.list()) == want["intents"]
    assert msgspec.to_builtins(again.verdicts()) == want["verdicts"]


def test_the_old_batch_journal_loads_as_before(home):
    paths.make_private_dirs(paths.state_dir())
    shutil.copyfile(FORMATS / "batches" / "batches.json", batchstore.journal_path())
    j = batchstore.load()
    assert msgspec.to_builtins(j) == expected("batches", "expected.json")
    assert j.creating is not None and j.creating.items == ["b4"]


def test_the_old_learnings_state_loads(home):
    path = ls.state_file("-proj-a")
    os.makedirs(os.path.dirname(path), mode=0o700)
    shutil.copyfile(FORMATS / "learnings" / "-proj-a.json", path)
    assert ls.load("-proj-a") == ls.ProjectState(last_processed_at=T0, processed_ids=["m1", "m2"],
                                                 queued_intents=["m3"])


def test_the_old_promoter_records_load(home, tmp_path):
    history = json.loads((FORMATS / "records" / "history.json").read_text())
    target = history["target"]
    os.makedirs(os.path.dirname(records.history_path(str(tmp_path), target)))
    shutil.copyfile(FORMATS / "records" / "history.json",
                    records.history_path(str(tmp_path), target))
    assert [(e["landing"], e["version"]) for e in records.read_history(str(tmp_path), target)] \
        == [("1790000000000-aaaa", 1), ("1790000001000-bbbb", 2)]
    pending = (FORMATS / "records" / "pending-write.json").read_bytes()
    assert type(records.read_landing(pending)) is records.WriteLanding
    assert records.parse_provenance((FORMATS / "records" / "provenance.json").read_bytes())


def test_the_old_promoter_count_files_load_typed_and_a_foreign_one_is_quarantined(home,
                                                                                   tmp_path):
    """The promoter's count files as older versions wrote them (plain JSON maps) load as the
    typed maps, and are written back the same way; one not of its type reads as empty and
    goes into the one quarantine instead of being half-trusted."""
    for name in ("uses.json", "lifecycle.json", "synced-counts.json", "stale.json"):
        shutil.copyfile(FORMATS / "records" / name, tmp_path / name)
    sd = StateDir(str(tmp_path))
    flaky = "/proj/a/.claude/skills/flaky"
    assert (sd.uses(), sd.stamps()) == ({flaky: 4}, {flaky: 12})
    assert sd.synced_counts() == {"/home/u/.claude/skills/tidy":
                                  {"helped": 1, "turns": 9, "uses": 2}}
    assert sd.stale() == {flaky: StaleMark(since=3, missing=["src/gone.py"])}
    sd.set_stale(sd.stale())
    assert json.loads((tmp_path / "stale.json").read_bytes()) == expected("records", "stale.json")
    (tmp_path / "uses.json").write_text('{"' + flaky + '": "four"}')
    assert sd.uses() == {} and not (tmp_path / "uses.json").exists()
    [kept] = quarantine.files()
    assert os.path.basename(kept).startswith("uses.json.")


def test_the_old_reflected_keys_and_report_ledger_load(home):
    paths.make_private_dirs(paths.state_dir())
    shutil.copyfile(FORMATS / "misc" / "reflected-records.bin", paths.reflected_file())
    shutil.copyfile(FORMATS / "misc" / "report.jsonl", paths.report_log_file())
    rr = ReflectedRecords()
    rr.load()
    assert len(rr) == 3 and all(u in rr for u in ("u-1", "u-2", "u-3")) and "u-4" not in rr
    log = ReportLog()
    assert [r["k"] for r in log.records()] == ["usage", "context"]
    log.append("context", session="s-two", chars=5)  # appends after the old records
    assert [r.get("session") for r in log.records("context")] == ["s-one", "s-two"]


def test_a_snapshot_of_session_rows_loads_its_sessions_whole(home):
    """Snapshots keep sessions as rows, their fields' values in order without names: one so
    written loads every field back (a field put anywhere but at the end of `Session` would
    misread it, and this fails)."""
    paths.make_private_dirs(paths.state_dir())
    shutil.copyfile(FORMATS / "rows" / "snapshot.json", paths.snapshot_file())
    book = loaded_book()
    assert msgspec.to_builtins(book.state.sessions) == expected("rows", "expected.json")["sessions"]
    assert quarantine.files() == []


def test_a_sealed_report_ledger_reads_every_kind(home):
    """The ledger's typed, sealed records, one of each kind, read back whole."""
    paths.make_private_dirs(paths.state_dir())
    shutil.copyfile(FORMATS / "misc" / "report-sealed.jsonl", paths.report_log_file())
    recs = list(ReportLog().records())
    assert [r["k"] for r in recs] == ["usage", "context", "use", "reminder", "calls"]
    assert (recs[0]["input_tokens"], recs[2]["turn"], recs[3]["skills"], recs[4]["total"]) == (
        10, 3, ["user/x"], 4)
    assert quarantine.files() == []


def test_every_file_set_aside_shows_in_status_and_doctor(home):
    """A corrupt snapshot, intent file, batch journal, pending landing record and spool record,
    each found by a different part of the daemon at start, all land in the one quarantine:
    `status` lists every one and `doctor` fails its quarantine check naming them; moved out of
    the quarantine, they are gone from both."""
    state = home["home"] / "state"
    state.mkdir(mode=0o700)
    (state / "snapshot.json").write_bytes(b"\x00garbage")
    (state / "intents.jsonl").write_bytes(b'{"op": "add", "key"\n')
    (state / "batches.json").write_bytes(b'{"items": [')
    pending = state / "promote" / "pending"
    pending.mkdir(parents=True, mode=0o700)
    (pending / "1796104026341-7b648e42.json").write_bytes(b'{"op": "move"}')
    spool = state / "spool"
    spool.mkdir(mode=0o700)
    (spool / f"{1:020d}.{'1' * 32}").write_bytes(b"not a record")
    names = ("snapshot.json.", "intents.jsonl.", "batches.json.", "1796104026341-7b648e42.json.",
             f"{1:020d}.{'1' * 32}.")
    d = Daemon(home["home"])
    try:
        q = wait_for(lambda: (q := d.status()["persistence"]["quarantined"]) and len(q) >= 5
                     and q, what="five files quarantined")  # the spool replays after start
        shown = sorted(os.path.basename(p) for p in q)
        assert len(shown) == len(names), shown
        assert all(any(s.startswith(n) for s in shown) for n in names), shown
        assert all(os.path.dirname(p) == paths.quarantine_dir() for p in q)
        r = ctl("doctor", "--json")
        check = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["quarantine"]
        assert r.returncode != 0 and check["ok"] is False
        assert "5 corrupt files" in check["detail"] and paths.quarantine_dir() in check["fix"]
        for p in q:  # the operator has looked at them
            os.unlink(p)
        assert d.status()["persistence"]["quarantined"] == []
        r = ctl("doctor", "--json")
        assert {c["name"]: c for c in json.loads(r.stdout)["checks"]}["quarantine"]["ok"]
    finally:
        d.stop()


def test_no_state_file_is_written_into_a_state_dir_swapped_since_start(home, monkeypatch):
    """Every writer of the state dir re-checks it is still the one pinned at start: the
    reflected records and the report ledger (appends, as the journal's) and the documents
    (a learnings state, the batch journal) refuse a directory put in its place, naming it."""
    monkeypatch.setattr(dirs, "_pinned", {})  # this test's pin only
    state = paths.state_dir()
    dirs.ensure_private_dir(state)
    dirs.pin_dir(state)
    os.rename(state, state + ".moved")
    os.mkdir(state, 0o700)  # ours and private, but not the directory the daemon checked
    writes = {
        "reflected": lambda: ReflectedRecords().add(["u-1"]),
        "report": lambda: ReportLog().append("context", session="s", chars=1),
        "batches": lambda: batchstore.save(batchstore.Journal()),
        "learnings": lambda: ls.save("-proj-a", ls.ProjectState()),
    }
    for what, write in writes.items():
        with pytest.raises(dirs.StateDirMoved, match="moved or replaced"):
            write()
        assert not [n for n in os.listdir(state) if not os.path.isdir(os.path.join(state, n))], what


def test_two_files_of_one_name_set_aside_at_once_are_both_kept(home, tmp_path, monkeypatch):
    """The same name set aside twice within a second (a journal copied twice, two runs of a
    check) gets a counter: neither copy replaces the other."""
    # one second for the quarantine's clock (only its own: the log keeps the real time)
    monkeypatch.setattr(quarantine, "time", SimpleNamespace(strftime=lambda fmt: "20260101T000000"))
    f = tmp_path / "journal.jsonl"
    f.write_bytes(b"first")
    a = quarantine.set_aside(str(f), copy=True)
    f.write_bytes(b"second")
    b = quarantine.set_aside(str(f))
    assert a != b and not f.exists()
    assert sorted(Path(p).read_bytes() for p in quarantine.files()) == [b"first", b"second"]
    assert os.stat(a).st_mode & 0o777 == 0o600  # a copy is private like the state it holds


def test_an_old_failed_landing_set_aside_in_place_is_adopted_into_the_quarantine(home):
    """Older versions renamed a landing that could neither finish nor roll back to
    `<landing>.json.failed` beside the pending records: at start it moves into the quarantine,
    where status and doctor show it, and it is never replayed."""
    paths.make_private_dirs(paths.state_dir())
    pending = Path(paths.state_dir()) / "promote" / "pending"
    pending.mkdir(parents=True, mode=0o700)
    old = FORMATS / "records" / "1790000002000-cccc.json.failed"
    shutil.copyfile(old, pending / old.name)
    d = Daemon(home["home"])
    try:
        [shown] = d.status()["persistence"]["quarantined"]
        r = ctl("doctor", "--json")
    finally:
        d.stop()
    assert os.path.basename(shown).startswith(old.name + ".")
    assert Path(shown).read_bytes() == old.read_bytes() and os.listdir(pending) == []
    check = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["quarantine"]
    assert check["ok"] is False and "1 corrupt file" in check["detail"]


def test_files_older_versions_set_aside_in_place_are_adopted_at_start(home):
    """Older versions renamed a corrupt batch journal, learnings state, skill history or
    pending landing record in place (`.json.corrupt…`): at start they move into the quarantine,
    so status shows them as well; files of other names are left where they are."""
    state = Path(paths.state_dir())
    legacy = [state / "batches.json.corrupt-1790000000",
              state / "learnings" / "-proj-a.json.corrupt",
              state / "promote" / "history" / ("ab" * 16 + ".json.corrupt-1790000000000-aaaa"),
              state / "promote" / "pending" / "1796104026341-7b648e42.json.corrupt"]
    for f in legacy:
        f.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        f.write_bytes(b"{torn " + f.name.encode())
    kept = state / "learnings" / "-proj-b.json"
    kept.write_bytes(b'{"processed_ids": []}')
    d = Daemon(home["home"])
    try:
        shown = d.status()["persistence"]["quarantined"]
    finally:
        d.stop()
    assert sorted(Path(p).read_bytes() for p in shown) == sorted(
        b"{torn " + f.name.encode() for f in legacy)
    assert not any(f.exists() for f in legacy) and kept.exists()
