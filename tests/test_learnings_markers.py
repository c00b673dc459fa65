"""Marker extraction and the incremental marker indexer."""

import hashlib
import json

import msgspec
import pytest

from claude_autoharness.daemon.learnings import markers as mk
from claude_autoharness.daemon.persist import state as st
from conftest import REAL, copy_corpus
from marker_support import (
    REAL_A,
    SHORT,
    _is_assistant_text,
    _template,
    assistant,
    fixture_bytes,
    fixture_lines,
    marker,
    text_blocks,
)


def test_fixture_yields_exactly_the_real_markers():
    """Only assistant text counts: quotes in tool results/inputs, user turns, thinking, summaries
    and sidechains, prose without a closing tag, topic-less/ellipsis/uppercase/spaced/spec-text
    markers and a marker split over two blocks are all skipped; two markers in one block and a
    legacy plain-string assistant message are found."""
    found = mk.extract_markers(fixture_bytes(), source="/p/t.jsonl")
    assert [(m.topic, m.kind, m.doc_impact) for m in found] == [
        ("auth-refresh", "decision", "readme"),
        ("legacy-strings", "discovery", "none"),
        ("retry-backoff", "pattern", "docs"),
        ("no-global-state", "anti-pattern", "none"),
        ("v1.2-config", "convention", "breaking"),
    ]
    assert found[0].body == "7-day JWT refresh chosen because we want long sessions."
    assert found[0].raw == REAL_A
    assert {m.transcript for m in found} == {"/p/t.jsonl"}
    assert [m.timestamp for m in found][1:3] == ["2026-02-10T21:13:00.000Z",
                                                 "2026-02-10T21:14:00.000Z"]
    assert found[0].session_id == _template(_is_assistant_text)["sessionId"]


def test_marker_id_is_sha256_of_topic_kind_body():
    """A marker's id is the first 16 hex chars of sha256 over `topic|kind|body` (atl's id)."""
    m = mk.extract_markers(fixture_bytes())[0]
    want = hashlib.sha256(f"{m.topic}|{m.kind}|{m.body}".encode()).hexdigest()[:16]
    assert m.id == want and len(m.id) == 16 and m.alt_id == ""


def test_multiline_body_and_field_variants():
    """A body may span lines; `doc_impact` is accepted for `doc-impact`; unknown keys are ignored;
    a multi-line body also carries atl's first-line id so atl's processed ids still match."""
    text = ("<!-- learning\ntopic: cache-keys\nowner: me\nkind: discovery\ndoc_impact: docs\n"
            "body: Keys include the tenant.\n  Otherwise tenants saw each other's data.\n-->")
    (m,) = mk.markers_in_text(text)
    assert m.doc_impact == "docs"
    assert m.body == "Keys include the tenant.\nOtherwise tenants saw each other's data."
    assert m.alt_id == mk.marker_id("cache-keys", "discovery", "Keys include the tenant.")


def test_line_without_prefix_is_never_json_decoded(monkeypatch):
    """The byte prefilter runs before any JSON parsing: only lines holding `<!-- learning` are
    decoded, each once even with several markers in it."""
    calls = []
    real = mk.main_assistant
    monkeypatch.setattr(mk, "main_assistant", lambda b: calls.append(b) or real(b))
    data = SHORT.read_bytes() + fixture_bytes() + SHORT.read_bytes()
    mk.extract_markers(data)
    assert len(calls) == sum(1 for line in data.split(b"\n") if mk.PREFIX in line)
    assert all(mk.PREFIX in c for c in calls)


def test_real_corpus_has_no_markers():
    """The real transcripts hold no markers: nothing is invented from real-world records."""
    files = sorted(REAL.rglob("*.jsonl"))
    assert files
    for f in files:
        assert mk.scan_file(str(f)) == []


def test_scan_file_leaves_a_half_written_line(tmp_path):
    """A last line without its newline is still being written: it is not read yet."""
    lines = fixture_lines()
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:-5])
    assert "v1.2-config" not in [m.topic for m in mk.scan_file(str(p))]
    p.write_text("\n".join(lines) + "\n")
    assert "v1.2-config" in [m.topic for m in mk.scan_file(str(p))]


def test_malformed_candidate_line_is_skipped():
    """A broken JSON line that holds the prefix is skipped, never an error."""
    data = b'{"message": {"role": "assistant", "content": "<!-- learning\n' + fixture_bytes()
    assert len(mk.extract_markers(data)) == 5


def test_slug_for_top_level_and_subagent_transcripts(home):
    """The project slug is the transcript's directory under projects/, also for subagents."""
    proj = home["claude"] / "projects" / "-home-u-app"
    assert mk.slug_for(str(proj / "s1.jsonl")) == "-home-u-app"
    assert mk.slug_for(str(proj / "s1" / "subagents" / "agent-a1.jsonl")) == "-home-u-app"


def test_indexer_incremental_feeds_match_a_whole_scan(home):
    """Fed as a growing file in line-aligned pieces, the indexer finds what one scan finds,
    each id once, and re-fed bytes add nothing."""
    proj = home["claude"] / "projects" / "-home-u-app"
    proj.mkdir()
    path = str(proj / "s1.jsonl")
    data = SHORT.read_bytes() + fixture_bytes()
    ix = mk.MarkerIndexer()
    offset = 0
    for piece in data.splitlines(keepends=True):
        ix.feed(path, offset, piece)
        offset += len(piece)
    assert [m.id for m in ix.markers("-home-u-app")] == [m.id for m in mk.extract_markers(data)]
    assert ix.feed(path, 0, data) == 0
    assert ix.unprocessed("-home-u-app", set()) == ix.markers("-home-u-app")


def test_indexer_reset_forgets_a_rewritten_file(home):
    """After `reset(path)` a rewritten transcript's vanished markers are gone; re-feeding finds
    the surviving ones; other transcripts are untouched."""
    proj = home["claude"] / "projects" / "-p"
    a, b = str(proj / "a.jsonl"), str(proj / "b.jsonl")
    ix = mk.MarkerIndexer()
    ix.feed(a, 0, fixture_bytes())
    ix.feed(b, 0, (json.dumps(assistant(text_blocks(marker("only-b", "decision", "b.")))) + "\n")
            .encode())
    ix.reset(a)
    assert [m.topic for m in ix.markers("-p")] == ["only-b"]
    ix.feed(a, 0, (fixture_lines()[0] + "\n").encode())
    assert sorted(m.topic for m in ix.markers("-p")) == ["auth-refresh", "only-b"]


def test_indexer_state_round_trip_and_garbage(home):
    """`to_state()` through the snapshot's typed `Markers` table is what `restore()` takes
    back; an ill-typed table does not decode (never half-loaded), an older one's `files`
    table of offsets is ignored."""
    ix = mk.MarkerIndexer()
    ix.feed(str(home["claude"] / "projects" / "-p" / "a.jsonl"), 0, fixture_bytes())
    table = msgspec.json.decode(msgspec.json.encode(st.Markers(ix.to_state())), type=st.Markers)
    again = mk.MarkerIndexer()
    again.restore(table.projects)
    assert again.markers("-p") == ix.markers("-p")
    assert again.slugs() == ["-p"]
    for junk in ([], {"projects": 3}, {"projects": {"-p": [{"id": 1}]}}, {"projects": {"-q": "x"}}):
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(junk, st.Markers)
    assert msgspec.convert({"files": {"/m/x": {"offset": 12}}}, st.Markers) == st.Markers()


def test_unprocessed_honours_ids_and_atl_first_line_ids():
    """`unprocessed` hides markers whose id, or atl-compatible first-line id, is processed."""
    ix = mk.MarkerIndexer()
    text = marker("multi", "decision", "first line.\nsecond line.")
    ix.feed("/x/-p/a.jsonl", 0, fixture_bytes() + (json.dumps(assistant(text_blocks(text)))
                                                   + "\n").encode())
    ms = ix.markers("-p")
    multi = ms[-1]
    assert multi.alt_id
    left = ix.unprocessed("-p", {ms[0].id, multi.alt_id})
    assert [m.id for m in left] == [m.id for m in ms[1:-1]]


@pytest.mark.parametrize("topic", ["a", "auth-refresh", "v1.2-config", "x9.y-z"])
def test_valid_topics(topic):
    """Kebab-case topics (with dot separators) are accepted."""
    assert mk.markers_in_text(marker(topic, "decision", "because."))


def test_marker_struct_is_msgspec_round_trippable():
    """Markers cross the RPC boundary as plain data."""
    m = mk.extract_markers(fixture_bytes())[0]
    assert msgspec.convert(msgspec.to_builtins(m), mk.Marker) == m


def test_copy_corpus_transcript_with_appended_marker(short_tmp):
    """A real transcript with one marker appended yields exactly that marker via scan_file."""
    p = copy_corpus("claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl", short_tmp)
    with open(p, "a") as f:
        f.write(fixture_lines()[0] + "\n")
    assert [m.topic for m in mk.scan_file(str(p))] == ["auth-refresh"]


def test_scan_range_resumes_at_complete_lines(home):
    """`scan_range` reads a transcript on disk up to its last complete line and returns that
    offset; resuming there after the file grew finds only the new marker."""
    proj = home["claude"] / "projects" / "-p"
    proj.mkdir()
    p = copy_corpus("spotter/short.jsonl", proj)
    lines = fixture_lines()
    with open(p, "a") as f:
        f.write(lines[0] + "\n" + lines[-1][:40])
    found, end = mk.scan_range(str(p))
    assert end == p.stat().st_size - 40
    assert [m.topic for m in found] == ["auth-refresh"]
    with open(p, "a") as f:
        f.write(lines[-1][40:] + "\n")
    found, end = mk.scan_range(str(p), end)
    assert end == p.stat().st_size
    assert [m.topic for m in found] == ["v1.2-config"]
    assert mk.scan_range(str(p), end) == ([], p.stat().st_size)


@pytest.mark.parametrize("chunk", [7, 64, 1000, 1 << 20])
def test_scan_file_is_independent_of_read_chunking(tmp_path, monkeypatch, chunk):
    """However the file is cut into reads, scanning finds what one whole-buffer pass finds,
    including markers on lines that straddle read boundaries."""
    data = SHORT.read_bytes() + fixture_bytes() + SHORT.read_bytes() + fixture_bytes()
    p = tmp_path / "t.jsonl"
    p.write_bytes(data)
    monkeypatch.setattr(mk, "READ_CHUNK", chunk)
    found, end = mk.scan_range(str(p))
    assert end == len(data)
    assert found == mk.extract_markers(data, source=str(p))
    half = data.index(b"\n", len(data) // 2) + 1
    first, mid = mk.scan_range(str(p))[0], mk.scan_range(str(p), half)
    assert mid[1] == len(data)
    assert [m.id for m in mid[0]] == [m.id for m in mk.extract_markers(data[half:])]
    assert len(first) == 10


def test_over_long_line_is_skipped_not_buffered(tmp_path, monkeypatch):
    """A line longer than MAX_LINE (huge tool output) is dropped without being held whole;
    the lines after it are still scanned."""
    monkeypatch.setattr(mk, "READ_CHUNK", 64)
    monkeypatch.setattr(mk, "MAX_LINE", 4_000)
    huge = json.dumps(assistant(text_blocks("x" * 9_000 + REAL_A))) + "\n"
    p = tmp_path / "t.jsonl"
    p.write_bytes(huge.encode() + fixture_bytes())
    assert mk.extract_markers(huge.encode())  # the long line does hold a marker...
    assert mk.scan_file(str(p)) == mk.extract_markers(fixture_bytes(), source=str(p))  # ...skipped
