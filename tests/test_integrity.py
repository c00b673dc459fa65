"""Nothing corrupts in silence: every journal line and every snapshot is sealed with a
checksum and checked on load. A damaged record is never loaded as truth: it is set aside in
the quarantine, which `status` and `doctor` name. Lines an older version wrote (no checksum)
load as legacy, once: the next snapshot writes what they hold sealed."""

import json
import os
import shutil
from pathlib import Path

import pytest

from claude_autoharness.daemon.book import Book
from claude_autoharness.daemon.intents import IntentQueue
from claude_autoharness.daemon.persist import quarantine
from claude_autoharness.daemon.persist.checksum import check
from claude_autoharness.protocol import paths
from harness import Daemon, ctl, frame, pre_tool, send_raw

FORMATS = Path(__file__).parent / "fixtures" / "formats"
ENV = {"AUTOHARNESS_PERSIST_INTERVAL_S": "3600", "AUTOHARNESS_WATCH": "0"}


def envelope(payload: dict, eid: str) -> bytes:
    return b'{"type":"hook","v":1,"id":"%s","ts":1.0,"payload":%b}' % (
        eid.encode(), json.dumps(payload).encode())


def edit_last_count(data: bytes) -> bytes:
    at = data.rindex(b'"calls_hook":200')
    return data[:at] + b'"calls_hook":900' + data[at + len(b'"calls_hook":200'):]


def flip_a_byte_of_the_last_record(data: bytes) -> bytes:
    start = data.rindex(b"\n", 0, len(data) - 1) + 1
    at = (start + len(data)) // 2
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]


def quarantine_check() -> dict:
    r = ctl("doctor", "--json")
    return {c["name"]: c for c in json.loads(r.stdout)["checks"]}["quarantine"]


@pytest.mark.parametrize("damage", [edit_last_count, flip_a_byte_of_the_last_record],
                         ids=["edited-count", "flipped-byte"])
def test_a_journal_record_damaged_after_a_kill9_is_set_aside_not_loaded(home, damage):
    """200 calls acknowledged, a kill -9, then the journal's last record changed on disk (its
    `calls_hook` of 200 made 900, or one byte flipped): the restarted daemon does not load it
    (the session has the 199 calls of the record before), copies the journal into the
    quarantine, and `status` and `doctor` name it. The snapshot that start writes leaves the
    damaged segment behind: after another kill -9 the next start neither reads it nor sets it
    aside again."""
    d = Daemon(home["home"], env=ENV)
    for i in range(200):
        reply = send_raw(d.sock, frame(envelope(pre_tool("s-200", tool_use_id=f"toolu_{i:04d}"),
                                                f"{i:032x}")))
        assert b'"type":"hook_reply"' in reply
    d.kill9()
    journal = Path(paths.journal_file())
    journal.write_bytes(damage(journal.read_bytes()))
    d = Daemon(home["home"], env=ENV)
    try:
        st = d.status()
        s = next(s for s in st["sessions"] if s["session_id"] == "s-200")
        assert s["calls"]["hook"] == 199 and s["activity"] == 199
        aside = st["persistence"]["quarantined"]
        assert [os.path.basename(p).split(".jsonl.")[0] for p in aside] == ["journal"]
        check = quarantine_check()
        assert check["ok"] is False and "journal.jsonl" in check["detail"]
    finally:
        d.kill9()  # no snapshot at stop: only the one that start wrote
    d = Daemon(home["home"], env=ENV)
    try:
        st = d.status()
        assert st["persistence"]["quarantined"] == aside
        assert next(s for s in st["sessions"] if s["session_id"] == "s-200")["activity"] == 199
    finally:
        d.stop()


def test_an_old_journal_loads_as_legacy_and_the_next_snapshot_seals_it(home):
    """The unsealed journal and snapshots an older version wrote load whole, nothing set
    aside; the daemon's first persist writes a sealed snapshot covering them, and from then on
    an unsealed line after a sealed one is damage, not legacy."""
    paths.make_private_dirs(paths.state_dir())
    for f in (FORMATS / "state").iterdir():
        if not f.name.startswith("expected"):
            shutil.copyfile(f, os.path.join(paths.state_dir(), f.name))
    book = Book(clock=lambda: 1_790_000_100.0)
    book.load()
    assert book.journal.legacy > 0 and book.journal.damaged == 0 and quarantine.files() == []
    before = json.loads(Path(paths.snapshot_file()).read_bytes())
    book.open()
    book.persist_now(snapshot=False)  # what the daemon does at start
    book.record_event("e" * 32, "PreToolUse", session=None, jobs=[], calls=[])
    book.close()
    sealed = Path(paths.snapshot_file()).read_bytes()
    assert check(sealed) is True and json.loads(sealed)["journal_seq"] > before["journal_seq"]
    legacy_line = (FORMATS / "state" / "journal.jsonl").read_bytes().splitlines()[-1]
    with open(paths.journal_file(), "ab") as f:  # sealed lines are there: this one is damage
        f.write(legacy_line + b"\n")
    again = Book(clock=lambda: 1_790_000_200.0)
    again.load()
    assert again.journal.damaged == 1 and len(quarantine.files()) == 1


def test_a_snapshot_whose_checksum_fails_is_set_aside_and_the_previous_one_read(home):
    """A digit changed in the sealed snapshot: it is quarantined, never loaded; the previous
    snapshot and the journal since it give the state as it was."""
    paths.make_private_dirs(paths.state_dir())
    book = Book(clock=lambda: 1_790_000_000.0)
    book.load()
    book.open()
    book.record_event("e" * 32, "PreToolUse", session=None, jobs=[], calls=[])
    book.persist_now()
    for _ in range(41):
        book.event_duplicate()
    book.persist_now()  # the newest snapshot, the first kept as the previous one
    book.close()
    snap = Path(paths.snapshot_file())
    data = snap.read_bytes()
    assert b'"duplicates":41' in data and check(data) is True
    snap.write_bytes(data.replace(b'"duplicates":41', b'"duplicates":91'))
    again = Book(clock=lambda: 1_790_000_100.0)
    again.load()
    assert again.state.events.duplicates == 41  # the journal's parts record, not the edit
    assert again.seen_before("e" * 32)
    assert [os.path.basename(p).startswith("snapshot.json.") for p in quarantine.files()] == [True]


def test_an_intent_record_whose_checksum_fails_is_set_aside(home):
    """The intent queue's lines are sealed too: one edited on disk is not loaded, the file
    is quarantined and rewritten from the lines that hold."""
    paths.make_private_dirs(paths.state_dir())
    shutil.copyfile(FORMATS / "intents" / "intents.jsonl", paths.intents_file())
    q = IntentQueue()
    q.load()
    q.compact()  # rewritten sealed
    lines = Path(paths.intents_file()).read_bytes().splitlines()
    assert lines and all(check(line) for line in lines)
    first = json.loads(lines[0])
    edited = lines[0].replace(first["key"].encode(), b"f" * len(first["key"]))
    Path(paths.intents_file()).write_bytes(b"\n".join([edited, *lines[1:]]) + b"\n")
    again = IntentQueue()
    report = again.load()
    assert report.bad_lines == 1 and "checksum" in report.problems[0]
    assert report.quarantined and len(quarantine.files()) == 1
