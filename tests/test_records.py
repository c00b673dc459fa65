"""The promoter's stored records load through their schemas: fixtures written by today's
promoter (a create, an update and an archive; landing records in flight) still read back, and
records not of our shape are treated as absent."""

import json
import os
import shutil

import msgspec
import pytest

from claude_autoharness.daemon.persist import quarantine
from claude_autoharness.daemon.promote import records
from conftest import REPO
from promote_support import tree_digest

FIXTURES = REPO / "tests" / "fixtures" / "records"


def _fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def _install_history(state, data: dict) -> str:
    path = records.history_path(str(state), data["target"])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    shutil.copyfile(FIXTURES / "history.json", path)
    return data["target"]


def test_todays_history_loads_in_order(tmp_path):
    """A history file as the promoter writes it today reads back whole: three versions, every
    key kept (also those no reader relies on)."""
    data = _fixture("history.json")
    target = _install_history(tmp_path, data)
    entries = records.read_history(str(tmp_path), target)
    assert [(e["version"], e["action"]) for e in entries] == [(1, "create"), (2, "update"),
                                                            (3, "archive")]
    assert entries == data["entries"]  # dicts as written, extra keys included


def test_todays_archive_meta_and_provenance_load():
    """An archive's meta.json and a landed skill's provenance as written today pass."""
    assert records.read_json(str(FIXTURES / "archive-meta.json"), records.ArchiveMeta) == \
        _fixture("archive-meta.json")
    prov = (FIXTURES / "provenance.json").read_bytes()
    assert records.parse_provenance(prov) == json.loads(prov)


@pytest.mark.parametrize("change", [
    lambda e: e.update(version=True),       # a bool is not a version
    lambda e: e.update(version="2"),
    lambda e: e.pop("landing"),
    lambda e: e.update(files={"SKILL.md": 1}),
])
def test_a_history_not_of_our_shape_is_absent(tmp_path, change):
    """One malformed entry makes the whole file unreadable: it is never half-trusted."""
    data = _fixture("history.json")
    change(data["entries"][1])
    path = records.history_path(str(tmp_path), data["target"])
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        json.dump(data, f)
    assert records.read_history(str(tmp_path), data["target"]) == []
    assert records.read_history(str(tmp_path), data["target"] + "-other") == []


@pytest.mark.parametrize("change", [
    lambda m: m.update(layer="team"), lambda m: m.update(archived_at="now"),
    lambda m: m.update(version=1.5), lambda m: m.pop("path"),
])
def test_archive_meta_not_of_our_shape_is_refused(change, tmp_path):
    meta = _fixture("archive-meta.json")
    change(meta)
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    assert records.read_json(str(tmp_path / "meta.json"), records.ArchiveMeta) is None


def test_provenance_needs_a_landing():
    """A provenance file with no landing, or one with a mistyped landing, proves nothing."""
    prov = json.loads((FIXTURES / "provenance.json").read_bytes())
    assert records.parse_provenance(json.dumps({**prov, "landings": []}).encode()) is None
    bad = {**prov, "landings": [{**prov["landings"][0], "at": True}]}
    assert records.parse_provenance(json.dumps(bad).encode()) is None
    assert records.parse_provenance(b"\xff not json") is None


def test_append_history_is_idempotent_and_keeps_a_corrupt_file(home, tmp_path):
    """Replaying a landing adds nothing; an unreadable history is quarantined (where status
    and doctor show it), not lost."""
    data = _fixture("history.json")
    target = _install_history(tmp_path, data)

    def write(path, blob):
        with open(path, "wb") as f:
            f.write(blob)

    records.append_history(str(tmp_path), data["entries"][0], write=write)
    assert len(records.read_history(str(tmp_path), target)) == 3
    path = records.history_path(str(tmp_path), target)
    with open(path, "w") as f:
        f.write("{torn")
    entry = {**data["entries"][0], "landing": "new-landing"}
    records.append_history(str(tmp_path), entry, write=write)
    [aside] = quarantine.files()
    assert os.path.basename(aside).startswith(os.path.basename(path))
    assert open(aside).read() == "{torn"
    assert [e["landing"] for e in records.read_history(str(tmp_path), target)] == ["new-landing"]


@pytest.mark.parametrize("name, kind", [("pending-write.json", records.WriteLanding),
                                        ("pending-archive.json", records.ArchiveLanding)])
def test_todays_pending_landings_load(name, kind):
    """A landing record in flight as today's promoter writes it (here: an update and an
    archive, each caught by a crash before it was applied) is of our shape, as its kind."""
    rec = _fixture(name)
    assert type(records.read_landing(json.dumps(rec).encode())) is kind
    assert type(msgspec.convert(rec, records.Landing, strict=True)) is kind


@pytest.mark.parametrize("change", [
    lambda r: r.update(op="move"),
    lambda r: r.pop("history"),
    lambda r: r["writes"].append({"path": "x"}),
    lambda r: r["writes"][0].__setitem__(1, None),   # a write without its new blob
    lambda r: r.update(created_dir="no"),
    lambda r: r["history"].update(version="2"),
    lambda r: r.update(id="another-landing"),        # not the record its file name says
])
def test_a_pending_landing_not_of_our_shape_is_set_aside(env, change):
    """recover() replays only records of our shape: any other is quarantined for the
    operator (where status and doctor show it), never half-applied, and the skill tree is left
    as it was."""
    rec = _fixture("pending-write.json")
    change(rec)
    pending = os.path.join(env["pr"].state, "pending")
    path = os.path.join(pending, "1796104026341-7b648e42.json")
    with open(path, "w") as f:
        json.dump(rec, f)
    before = tree_digest(*env["trees"])
    assert env["pr"].recover() == []
    assert os.listdir(pending) == []
    [aside] = quarantine.files()
    assert os.path.basename(aside).startswith("1796104026341-7b648e42.json.")
    assert tree_digest(*env["trees"]) == before
