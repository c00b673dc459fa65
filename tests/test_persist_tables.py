"""The snapshot's tables of other parts (the watcher's offsets and index, the markers found, the
capture counters) are typed: written as they change and read back the same, in the shapes the
daemon has written them; one not of its type is set aside, never loaded as truth."""

import json
import os
from pathlib import Path

import msgspec

from claude_autoharness.daemon.book import Book
from claude_autoharness.daemon.learnings.markers import Marker
from claude_autoharness.daemon.persist import quarantine
from claude_autoharness.daemon.persist import state as st
from claude_autoharness.daemon.persist.checksum import seal
from claude_autoharness.protocol import paths

T0 = 1_790_000_000.0
MARKER = {"id": "m1", "topic": "auth", "kind": "decision", "body": "b.", "transcript": "/p/a.jsonl"}
# the tables as the daemon wrote them before they were typed (plain dicts with a version)
UNTYPED = {
    "watcher": {"tails": {"v": 1, "files": {"/p/a.jsonl": [100, 7]}},
                "index": {"v": 1, "bytes_indexed": 100, "last_event_at": T0,
                          "entries": {"/p/a.jsonl": [100, 7, T0 - 5, T0, 100]}}},
    "markers": {"version": 1, "projects": {"-p": [MARKER]}},
    "capture": {"windows_cut": 2, "bytes_dropped": 0, "fallbacks": 0, "bookkeeping_records": 0,
                "bookkeeping_bytes": 0, "bytes_digest_only": 3, "bytes_unseen": 1,
                "redactions": {"email": 1}, "refused": 1,
                "last_refused": {"path": "/dev/zero", "reason": "not a file", "at": T0},
                "seen": {"s1": {"windows": 2, "bytes": 40}}},
}
# a parts record of the same time: a second transcript read, its version leaf and a marker
UNTYPED_PARTS = {"seq": 1, "op": "parts", "at": T0, "set": [
    [["watcher", "tails", "files", "/p/b.jsonl"], [5, 8]], [["watcher", "tails", "v"], 1],
    [["markers", "projects", "-q"], [{**MARKER, "id": "m2"}]], [["capture", "windows_cut"], 3]]}


def write(name: str, data: bytes) -> None:
    paths.make_private_dirs(paths.state_dir())
    Path(paths.state_dir(), name).write_bytes(data)


def line(rec: dict) -> bytes:
    return seal(json.dumps(rec, separators=(",", ":")).encode()) + b"\n"


def loaded() -> Book:
    book = Book(clock=lambda: T0 + 100)
    book.load()
    return book


def test_the_untyped_tables_an_older_version_wrote_load_typed(home):
    """A snapshot and a journal of the plain-dict tables load into the typed ones, every
    value kept (their version fields ignored), and nothing is set aside."""
    write("snapshot.json", json.dumps({"schema": 1, **UNTYPED}).encode())
    write("journal.jsonl", json.dumps(UNTYPED_PARTS).encode() + b"\n")
    state = loaded().state
    assert state.watcher.tails.files == {"/p/a.jsonl": st.Tail(100, 7), "/p/b.jsonl": st.Tail(5, 8)}
    assert state.watcher.index == st.Index(100, T0, {"/p/a.jsonl": st.Transcript(
        100, 7, T0 - 5, T0, 100)})
    assert state.markers.projects == {"-p": [Marker(**MARKER)],
                                      "-q": [Marker(**{**MARKER, "id": "m2"})]}
    assert msgspec.to_builtins(state.capture) == {**UNTYPED["capture"], "windows_cut": 3}
    assert quarantine.files() == []


def test_the_typed_tables_journaled_as_they_change_replay_exactly(home):
    """The tables a book copies in are journaled as their changed leaves (a transcript's
    offset, one project's markers) and replayed into the same typed values."""
    paths.make_private_dirs(paths.state_dir())
    tables = {"watcher": st.Watcher(), "markers": st.Markers()}
    book = Book(clock=lambda: T0, tables=lambda: tables)
    book.load()
    book.open()
    book.persist_now()
    tables["watcher"] = msgspec.convert(UNTYPED["watcher"], st.Watcher)
    tables["markers"] = st.Markers({"-p": [Marker(**MARKER)]})
    book.state.capture = msgspec.convert(UNTYPED["capture"], st.Capture)
    book.persist_now(snapshot=False)
    tables["watcher"].tails.files["/p/a.jsonl"] = st.Tail(200, 7)
    book.persist_now(snapshot=False)
    book.close()
    journal = Path(paths.journal_file()).read_bytes()
    assert b'[["watcher","tails","files","/p/a.jsonl"],[200,7]]' in journal.splitlines()[-1]
    again = loaded().state
    assert again.watcher == tables["watcher"] and again.markers == tables["markers"]
    assert again.capture == msgspec.convert(UNTYPED["capture"], st.Capture)


def test_an_ill_typed_table_in_a_sealed_snapshot_is_set_aside(home):
    """A snapshot whose seal holds but whose watcher table is not of its type (a row that is a
    string) is quarantined, not half-loaded: the state starts from what else there is."""
    bad = {"schema": 1, "journal_seq": 4, "tokens": {"total": 9},
           "watcher": {"tails": {"files": {"/p/a.jsonl": "garbage"}}}}
    write("snapshot.json", seal(json.dumps(bad, separators=(",", ":")).encode()))
    state = loaded().state
    assert state.tokens == {} and state.watcher == st.Watcher()
    assert [os.path.basename(p).startswith("snapshot.json.") for p in quarantine.files()] == [True]


def test_an_ill_typed_value_in_a_sealed_parts_record_is_set_aside(home):
    """A parts record whose seal holds but one of whose values is not of the type its path has
    (a token count that is a string, a marker without its fields) is not loaded: the line is
    damage, its journal copied to the quarantine; the records around it load."""
    good = {"seq": 1, "op": "parts", "at": T0, "set": [[["tokens", "total"], 5]]}
    bads = [{"seq": 2, "op": "parts", "at": T0, "set": [[["tokens", "total"], "lots"]]},
            {"seq": 3, "op": "parts", "at": T0, "set": [[["markers", "projects", "-p"], [{}]]]}]
    later = {"seq": 4, "op": "parts", "at": T0, "set": [[["jobs_done"], 2]]}
    write("journal.jsonl", b"".join(line(r) for r in [good, *bads, later]))
    book = loaded()
    assert book.state.tokens == {"total": 5} and book.state.jobs_done == 2
    assert book.state.markers == st.Markers()
    assert book.journal.damaged == 2
    assert [os.path.basename(p).startswith("journal.jsonl.") for p in quarantine.files()] == [True]
