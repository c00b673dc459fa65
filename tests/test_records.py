"""The promoter's stored records load through their schemas: fixtures written by today's
promoter (a create, an update and an archive) still read back, and records not of our shape
are treated as absent."""

import json
import os
import shutil

import pytest

from claude_autoharness.daemon.promote import records
from conftest import REPO

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
    assert records.archive_meta_ok(_fixture("archive-meta.json"))
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
def test_archive_meta_not_of_our_shape_is_refused(change):
    meta = _fixture("archive-meta.json")
    change(meta)
    assert not records.archive_meta_ok(meta)


def test_provenance_needs_a_landing():
    """A provenance file with no landing, or one with a mistyped landing, proves nothing."""
    prov = json.loads((FIXTURES / "provenance.json").read_bytes())
    assert records.parse_provenance(json.dumps({**prov, "landings": []}).encode()) is None
    bad = {**prov, "landings": [{**prov["landings"][0], "at": True}]}
    assert records.parse_provenance(json.dumps(bad).encode()) is None
    assert records.parse_provenance(b"\xff not json") is None


def test_append_history_is_idempotent_and_keeps_a_corrupt_file(tmp_path):
    """Replaying a landing adds nothing; an unreadable history is set aside, not lost."""
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
    assert os.path.exists(f"{path}.corrupt-new-landing")
    assert [e["landing"] for e in records.read_history(str(tmp_path), target)] == ["new-landing"]
