"""Reads cannot escape the transcript roots, whatever changes on disk while they run.

Every component beneath a root is opened without following a link, the file is re-checked
after the open (regular, ours, one link), and directories are listed only through the same
walk. Through the real daemon (its `capture` request, its jobs, its SessionStart catch-up),
the real hook and the fake Anthropic server.
"""

import json
import os
import threading

import pytest

from claude_autoharness.client import conn
from claude_autoharness.daemon.capture.source import (
    TranscriptRefused,
    list_transcripts,
    open_transcript,
    transcript_roots,
)
from claude_autoharness.protocol import messages as m
from fake_anthropic import FakeAnthropic, tool_reply
from harness import Daemon, ctl, event, hook, wait_for
from other_user import other_user  # noqa: F401 (a fixture)

INSIDE = '{"type":"user","message":{"content":"inside-transcript-line"}}\n'
OUTSIDE = '{"type":"user","message":{"content":"OUTSIDE-FILE-CONTENT"}}\n'
READS = 3_000


def _trees(home) -> tuple:
    """projects/p/t.jsonl (a transcript) and an outside dir holding its own t.jsonl."""
    proj = home["claude"] / "projects" / "p"
    proj.mkdir()
    (proj / "t.jsonl").write_text(INSIDE * 3)
    outside = home["tmp"] / "outside"
    outside.mkdir()
    (outside / "t.jsonl").write_text(OUTSIDE * 3)
    os.chmod(outside / "t.jsonl", 0o600)
    return proj, outside


def test_a_parent_swapped_for_a_symlink_during_reads_never_leads_outside(home, monkeypatch):
    """A thread swaps projects/p for a symlink to an outside directory, and back, as fast as
    it can while the daemon answers 3,000 `capture` requests for projects/p/t.jsonl: not one
    answer holds the outside file; each is the transcript or a refusal."""
    proj, outside = _trees(home)
    monkeypatch.setenv("AUTOHARNESS_WATCH", "0")
    d = Daemon(home["home"])
    stop = threading.Event()
    swaps = [0]

    def swap():
        aside = proj.with_name("p.real")
        while not stop.is_set():
            os.rename(proj, aside)
            os.symlink(outside, proj)
            os.unlink(proj)
            os.rename(aside, proj)
            swaps[0] += 1

    path = str(proj / "t.jsonl")
    req = m.Capture(transcript_path=path, start=0)
    # steady states first: the real directory reads, the symlinked one is refused
    assert "inside-transcript-line" in conn.call(req, sock_path=d.sock)["window"]
    os.rename(proj, proj.with_name("p.real"))
    os.symlink(outside, proj)
    with pytest.raises(conn.DaemonError, match="outside the transcript roots"):
        conn.call(req, sock_path=d.sock)
    os.unlink(proj)
    os.rename(proj.with_name("p.real"), proj)
    t = threading.Thread(target=swap, daemon=True)
    seen = {"inside": 0, "outside": 0, "refused": 0}
    try:
        t.start()
        for _ in range(READS):
            try:
                window = conn.call(req, sock_path=d.sock, timeout=60)["window"]
            except conn.DaemonError as e:
                assert e.code in ("refused", "io"), e
                seen["refused"] += 1
                continue
            seen["outside" if "OUTSIDE-FILE-CONTENT" in window else "inside"] += 1
    finally:
        stop.set()
        t.join(30)
        d.stop()
    assert seen["outside"] == 0, seen
    assert sum(seen.values()) == READS and swaps[0] > 0, (seen, swaps)


def test_the_walk_refuses_a_link_on_the_way_at_any_moment(home):
    """The same race one level down, in-process: 3,000 opens while the parent is swapped,
    none of them opens the outside file."""
    proj, outside = _trees(home)
    roots = transcript_roots()
    stop = threading.Event()

    def swap():
        aside = proj.with_name("p.real")
        while not stop.is_set():
            os.rename(proj, aside)
            os.symlink(outside, proj)
            os.unlink(proj)
            os.rename(aside, proj)

    t = threading.Thread(target=swap, daemon=True)
    out = 0
    t.start()
    try:
        for _ in range(READS):
            try:
                fd = open_transcript(proj / "t.jsonl", roots)
            except (TranscriptRefused, FileNotFoundError):
                continue
            with open(fd, "rb") as f:
                out += b"OUTSIDE" in f.read()
    finally:
        stop.set()
        t.join(30)
    assert out == 0


def test_symlinked_directory_owner_and_links_are_each_refused(home, other_user):  # noqa: F811
    """A directory link leading outside, a file of another user, and a file with a second
    (hard) link are refused with their reason; a `../` directory is not listed. A link that
    leads back inside is read at its real path, itself walked link-free."""
    proj, outside = _trees(home)
    roots = transcript_roots()
    inner = home["claude"] / "projects" / "q"
    inner.symlink_to(proj)  # resolves inside, but is a link: the walk follows none
    (home["claude"] / "projects" / "o").symlink_to(outside)
    with pytest.raises(TranscriptRefused, match="outside the transcript roots"):
        open_transcript(home["claude"] / "projects" / "o" / "t.jsonl", roots)
    os.close(open_transcript(inner / "t.jsonl", roots))  # its real path is walked, link-free
    theirs = proj / "theirs.jsonl"
    theirs.write_text(INSIDE)
    os.chown(theirs, other_user.uid, other_user.gid)
    with pytest.raises(TranscriptRefused, match=f"owned by uid {other_user.uid}"):
        open_transcript(theirs, roots)
    os.link(outside / "t.jsonl", proj / "linked.jsonl")
    with pytest.raises(TranscriptRefused, match="2 hard links"):
        open_transcript(proj / "linked.jsonl", roots)
    with pytest.raises(TranscriptRefused, match="outside"):
        list_transcripts(proj / ".." / ".." / ".." / "outside", roots)


def test_a_hard_link_to_an_outside_file_is_not_sent_to_the_model(home, monkeypatch):
    """projects/p/h.jsonl is a hard link to a file outside: the job that would read it is
    refused (the reason names the links), nothing reaches the model, and `capture` refuses
    it too."""
    proj, outside = _trees(home)
    link = proj / "h.jsonl"
    os.link(outside / "t.jsonl", link)
    with FakeAnthropic() as fake:
        fake.push(tool_reply({"proposals": []}))
        for k, v in {"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key",
                     "ANTHROPIC_BASE_URL": fake.base_url, "AUTOHARNESS_REFLECT_EVERY": "2",
                     "AUTOHARNESS_WATCH": "0"}.items():
            monkeypatch.setenv(k, v)
        d = Daemon(home["home"])
        try:
            ev = {"session_id": "s-link", "cwd": str(home["tmp"]), "transcript_path": str(link)}
            for _ in range(2):
                hook(dict(ev, hook_event_name="PreToolUse", tool_name="Bash",
                          tool_input={"command": "ls"}))
            hook(dict(ev, hook_event_name="Stop"))
            st = wait_for(lambda: (s := d.status())["jobs"]["failed"] and s, what="refused job")
            assert "hard links" in st["capture"]["last_refused"]["reason"]
            assert fake.messages_requests == []
            r = ctl("capture", "--transcript", str(link), "--json", timeout=60)
            assert r.returncode == 1 and "hard links" in r.stderr
            assert "OUTSIDE-FILE-CONTENT" not in r.stdout + d.output()
        finally:
            d.stop()


def test_a_dotdot_transcript_path_lists_and_logs_nothing_outside(home, monkeypatch):
    """SessionStart names `projects/p/../../../elsewhere/x.jsonl`: the daemon's catch-up of
    that "project directory" lists nothing there, so no name of a file in it reaches the log
    or `status`; the events still count."""
    proj, _ = _trees(home)
    elsewhere = home["tmp"] / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "name-that-must-not-leak.jsonl").write_text(OUTSIDE)
    (elsewhere / "another-private-name.jsonl").write_text(OUTSIDE)
    dotdot = str(proj / ".." / ".." / ".." / "elsewhere" / "x.jsonl")
    assert os.path.abspath(dotdot) == str(elsewhere / "x.jsonl")
    d = Daemon(home["home"])
    try:
        r = hook(event("SessionStart", sid="s-dots", source="startup", cwd=str(home["tmp"]),
                       transcript_path=dotdot))
        assert r.returncode == 0
        hook(event("PreToolUse", sid="s-dots", tool_name="Bash", tool_input={"command": "ls"},
                   transcript_path=dotdot))
        st = wait_for(lambda: (s := d.status())["events"]["by_kind"].get("PreToolUse") and s,
                      what="the events counted")
        said = d.output() + json.dumps(st)
        assert "name-that-must-not-leak" not in said
        assert "another-private-name" not in said
    finally:
        d.stop()
    assert "name-that-must-not-leak" not in d.output()
