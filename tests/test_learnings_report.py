"""The marker report: SessionStart text, single-transcript listing, --json, offline scan."""

import json
import os

from claude_autoharness.daemon.learnings import markers as mk
from claude_autoharness.daemon.learnings import report as rp
from conftest import copy_corpus
from marker_support import assistant, fixture_bytes, marker, text_blocks


def m(topic, kind, doc="none", transcript="/p/a.jsonl", body=None):
    body = body or f"{topic} because reasons."
    return mk.Marker(id=mk.marker_id(topic, kind, body), topic=topic, kind=kind, doc_impact=doc,
                     body=body, transcript=transcript)


SEVEN = [m("a1", "decision", "readme"), m("a2", "decision"), m("a3", "pattern", "docs"),
         m("a4", "bug-fix", transcript="/p/b.jsonl"), m("a5", "decision", "both"),
         m("a6", "discovery", transcript="/p/b.jsonl"), m("a7", "pattern")]


def test_session_start_report_format():
    """The SessionStart text is exactly the specified one: counts, kinds alphabetical, doc drafts,
    the command to run."""
    assert rp.session_start_report(SEVEN) == (
        "🧠 learning-capture: 7 unprocessed markers across 2 transcripts\n"
        "  by kind: 1 bug-fix, 3 decision, 1 discovery, 2 pattern\n"
        "  3 markers require doc drafts (README / doc site)\n"
        "→ Run: /save-learnings")


def test_report_is_silent_without_markers():
    """No unprocessed markers → no text at all (nothing injected at SessionStart)."""
    assert rp.session_start_report([]) == ""
    assert rp.transcript_listing([]) == ""


def test_report_singular_no_doc_line_and_dedup():
    """One marker reads in the singular; no doc-draft line when none needs a draft; the same
    marker seen twice counts once."""
    one = m("solo", "convention")
    assert rp.session_start_report([one, one]) == (
        "🧠 learning-capture: 1 unprocessed marker across 1 transcript\n"
        "  by kind: 1 convention\n"
        "→ Run: /save-learnings")
    two = [one, m("doc", "decision", "breaking")]
    assert "  1 marker requires doc drafts (README / doc site)" in rp.session_start_report(two)


def test_transcript_listing_lists_each_marker():
    """Single-transcript mode lists `[kind] topic (doc-impact: x)` per marker, in order."""
    text = rp.transcript_listing(mk.extract_markers(fixture_bytes(), source="/p/t.jsonl"))
    lines = text.splitlines()
    assert lines[0] == "🧠 learning-capture: 5 unprocessed markers across 1 transcript"
    assert lines[1:6] == ["  [decision] auth-refresh (doc-impact: readme)",
                          "  [discovery] legacy-strings (doc-impact: none)",
                          "  [pattern] retry-backoff (doc-impact: docs)",
                          "  [anti-pattern] no-global-state (doc-impact: none)",
                          "  [convention] v1.2-config (doc-impact: breaking)"]
    assert lines[-1] == "→ Run: /save-learnings"


def test_report_json_shape():
    """--json: counts, transcripts, kinds, doc drafts and the markers as plain data."""
    out = json.loads(json.dumps(rp.report_json(SEVEN)))
    assert out["unprocessed"] == 7 and out["doc_drafts"] == 3
    assert out["transcripts"] == ["/p/a.jsonl", "/p/b.jsonl"]
    assert out["by_kind"] == {"bug-fix": 1, "decision": 3, "discovery": 1, "pattern": 2}
    assert set(out["markers"][0]) == {"id", "topic", "kind", "doc_impact", "body", "timestamp",
                                      "transcript", "session_id"}
    assert rp.report_json([]) == {"unprocessed": 0, "transcripts": [], "by_kind": {},
                                  "doc_drafts": 0, "markers": []}


def test_status_json_counts(home):
    """status --json learnings: markers seen, unprocessed, projects with unprocessed markers."""
    ix = mk.MarkerIndexer()
    ix.feed(str(home["claude"] / "projects" / "-a" / "s.jsonl"), 0, fixture_bytes())
    ix.feed(str(home["claude"] / "projects" / "-b" / "s.jsonl"), 0, fixture_bytes())
    done = {m.id for m in ix.markers("-b")}
    out = rp.status_json(ix, lambda slug: done if slug == "-b" else set())
    assert out == {"markers_seen": 10, "unprocessed": 5, "projects": 1}


def _transcript(dirpath, name, mtime, *texts):
    p = dirpath / name
    p.write_text("".join(json.dumps(assistant(text_blocks(t))) + "\n" for t in texts))
    os.utime(p, (mtime, mtime))
    return p


def test_scan_previous_transcripts_cutoff_and_order(home, short_tmp):
    """Offline scan: transcripts modified after the last save (first use: the look-back) are
    read oldest first; older ones, subagent files and processed markers are left out."""
    now = 1_800_000_000.0
    d = home["claude"] / "projects" / "-p"
    d.mkdir()
    _transcript(d, "old.jsonl", now - 10 * 86_400, marker("too-old", "decision", "x."))
    _transcript(d, "b.jsonl", now - 60, marker("second", "pattern", "y."),
                marker("shared", "decision", "s."))
    _transcript(d, "a.jsonl", now - 3_600, marker("first", "discovery", "z."),
                marker("shared", "decision", "s."))
    (d / "a" / "subagents").mkdir(parents=True)
    _transcript(d / "a" / "subagents", "agent-1.jsonl", now, marker("sub", "decision", "q."))
    copy_corpus("spotter/short.jsonl", d)
    os.utime(d / "short.jsonl", (now - 30, now - 30))
    assert [os.path.basename(p) for p in rp.previous_transcripts(str(d), 0, 7, now=now)] == [
        "a.jsonl", "b.jsonl", "short.jsonl"]
    found = rp.scan_previous_transcripts(str(d), 0, 7, now=now)
    assert [x.topic for x in found] == ["first", "shared", "second"]
    assert found[1].transcript.endswith("a.jsonl")
    assert [x.topic for x in rp.scan_previous_transcripts(str(d), now - 100, 7, now=now)] == [
        "second", "shared"]
    assert [x.topic for x in rp.scan_previous_transcripts(
        str(d), 0, 30, now=now, processed_ids={found[0].id})] == ["too-old", "shared", "second"]
    assert rp.scan_previous_transcripts(str(short_tmp / "missing"), 0, 7, now=now) == []
