"""Only transcripts are read: a path is used only when it resolves to a regular file under the
transcript roots, and is opened without following a final symlink and without blocking.

Hostile files are real: a FIFO, a symlink to a file outside the projects dir, a directory,
`/dev/zero` and a Unix socket.
"""

import json
import os
import socket
import threading

import pytest

from claude_autoharness.daemon.capture.packet import build_packet
from claude_autoharness.daemon.capture.source import (
    TranscriptRefused,
    open_regular,
    resolve,
    transcript_roots,
)
from claude_autoharness.daemon.watcher import TranscriptIndex, TranscriptWatcher
from claude_autoharness.protocol.config import CaptureConfig
from conftest import REAL
from fake_anthropic import FakeAnthropic, tool_reply
from harness import Daemon, ctl, hook, wait_for

SECRET_LINE = '{"type":"user","message":{"content":"root:$6$not-a-transcript-secret"}}\n'


def _hostile_tree(home) -> dict:
    """Under projects/p: a FIFO, a symlink to an outside file, a directory, a symlink to
    /dev/zero, a socket, and one real transcript."""
    proj = home["claude"] / "projects" / "p"
    proj.mkdir()
    outside = home["tmp"] / "shadow"
    outside.write_text(SECRET_LINE)
    files = {"fifo": proj / "fifo.jsonl", "outside": proj / "outside.jsonl",
             "dir": proj / "dir.jsonl", "zero": proj / "zero.jsonl", "sock": proj / "s.jsonl",
             "real": proj / "real.jsonl"}
    os.mkfifo(files["fifo"])
    files["outside"].symlink_to(outside)
    files["dir"].mkdir()
    files["zero"].symlink_to("/dev/zero")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(files["sock"]))
    srv.close()
    files["real"].write_bytes((REAL / "spotter/short.jsonl").read_bytes())
    return files


def test_only_regular_files_under_the_roots_are_opened(home):
    """`resolve` refuses a FIFO, a symlink leaving the roots, a directory, /dev/zero (direct or
    by symlink) and a socket with a reason; `open_regular` never blocks on a FIFO and never
    follows a final symlink; a real transcript resolves and opens."""
    files = _hostile_tree(home)
    roots = transcript_roots()
    reasons = {}
    for name in ("fifo", "outside", "dir", "zero", "sock"):
        with pytest.raises(TranscriptRefused) as e:
            resolve(files[name], roots)
        reasons[name] = e.value.reason
    assert "FIFO" in reasons["fifo"]
    assert "outside the transcript roots" in reasons["outside"]
    assert "directory" in reasons["dir"]
    assert "outside the transcript roots" in reasons["zero"]
    assert "socket" in reasons["sock"]
    with pytest.raises(TranscriptRefused, match="outside"):
        resolve("/dev/zero", roots)
    # the open itself: a FIFO with no writer would block a plain open forever
    with pytest.raises(TranscriptRefused, match="FIFO"):
        open_regular(files["fifo"])
    with pytest.raises(TranscriptRefused, match="character device"):
        open_regular("/dev/zero")
    with pytest.raises(TranscriptRefused, match="symlink"):
        open_regular(files["outside"])
    with pytest.raises(TranscriptRefused, match="directory"):
        open_regular(files["dir"])
    real = resolve(files["real"], roots)
    os.close(open_regular(real))
    # the packet builder reads through the same open: a FIFO path fails, it does not hang
    with pytest.raises(TranscriptRefused):
        build_packet(files["fifo"], 0, CaptureConfig(), _NoRedact())


def test_a_configured_root_is_allowed(home):
    """A directory named in `capture.transcript_roots` is a root too; its siblings are not."""
    extra = home["tmp"] / "more"
    extra.mkdir()
    t = extra / "t.jsonl"
    t.write_text(SECRET_LINE)
    assert resolve(t, transcript_roots([str(extra)])) == os.path.realpath(t)
    with pytest.raises(TranscriptRefused):
        resolve(t, transcript_roots())


def test_watcher_skips_fifos_sockets_devices_and_escaping_symlinks(home):
    """The watcher's catch-up over a tree holding hostile files finishes, reads only the real
    transcript, and records why each other file was skipped."""
    files = _hostile_tree(home)
    index = TranscriptIndex()
    w = TranscriptWatcher(home["claude"] / "projects", [index], roots=transcript_roots())
    done = threading.Event()
    t = threading.Thread(target=lambda: ([w.scan_until_done(p) for p in w.transcripts()],
                                         done.set()), daemon=True)
    t.start()
    assert done.wait(60), "the watcher's scan hung on a hostile file"
    assert list(index.entries) == [str(files["real"])]
    assert set(w.refused) >= {str(files[n]) for n in ("fifo", "outside", "zero", "sock")}
    for name in ("fifo", "outside", "zero", "sock"):  # the scan of a named path refuses too
        assert w.scan_path(files[name]) is False
    assert list(index.entries) == [str(files["real"])]
    assert len(w.refused) >= 4


def test_daemon_reads_nothing_outside_and_shows_why(home, monkeypatch):
    """Through the real daemon: events naming a symlink to a file outside the projects dir
    still count; the job that would read it fails with a refusal, nothing reaches the model,
    and `status --json` shows the reason. `capture` of a FIFO, a directory and /dev/zero
    answers with a refusal instead of hanging."""
    files = _hostile_tree(home)
    with FakeAnthropic() as fake:
        fake.push(tool_reply({"proposals": []}))
        for k, v in {"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key",
                     "ANTHROPIC_BASE_URL": fake.base_url, "AUTOHARNESS_REFLECT_EVERY": "2",
                     "AUTOHARNESS_WATCH": "0"}.items():
            monkeypatch.setenv(k, v)
        d = Daemon(home["home"])
        try:
            ev = {"session_id": "s-hostile", "cwd": str(home["tmp"]),
                  "transcript_path": str(files["outside"])}
            for _ in range(2):
                hook(dict(ev, hook_event_name="PreToolUse", tool_name="Bash",
                          tool_input={"command": "ls"}))
            hook(dict(ev, hook_event_name="Stop"))
            st = wait_for(lambda: (s := d.status())["jobs"]["failed"] and s, what="refused job")
            assert st["events"]["by_kind"]["PreToolUse"] == 2  # the events still counted
            assert "transcript refused" in st["jobs"]["last_error"]["error"]
            assert st["capture"]["refused"] == 1
            assert "outside the transcript roots" in st["capture"]["last_refused"]["reason"]
            assert fake.messages_requests == []  # nothing was sent anywhere
            for name, why in (("fifo", "FIFO"), ("dir", "directory"), ("zero", "outside"),
                              ("outside", "outside")):
                r = ctl("capture", "--transcript", str(files[name]), "--json", timeout=60)
                assert r.returncode == 1 and why in r.stderr, (name, r.stderr)
                assert "root:$6$" not in r.stdout + r.stderr
            r = ctl("capture", "--transcript", "/dev/zero", timeout=60)
            assert r.returncode == 1 and "outside" in r.stderr
            assert d.status()["capture"]["refused"] == 6
            assert "transcript refused" in d.output()
        finally:
            d.stop()


def test_daemon_watcher_counts_what_it_skips(home, monkeypatch):
    """The daemon's own watcher over a projects dir holding a FIFO, a socket, /dev/zero and a
    symlink leaving the root keeps running, indexes the real transcript only, and counts
    the skipped files in `status --json`."""
    files = _hostile_tree(home)
    d = Daemon(home["home"])
    try:
        st = wait_for(lambda: (s := d.status())["watcher"]["refused"] >= 4 and s,
                      what="the watcher's refusals")
        assert st["watcher"]["transcripts"] == 1
        assert d.proc.poll() is None
        assert "transcript_refused" in d.output()
        assert str(files["fifo"]) in d.output()
    finally:
        d.stop()


def test_offline_capture_refuses_too(home):
    """`autoharnessctl capture --transcript` with no daemon refuses the same files itself."""
    files = _hostile_tree(home)
    for name in ("fifo", "outside", "dir"):
        r = ctl("capture", "--transcript", str(files[name]), timeout=60)
        assert r.returncode == 1 and "not reading" in r.stderr, (name, r.stderr)
        assert "Traceback" not in r.stderr
    r = ctl("capture", "--transcript", str(files["real"]), "--json", timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kept_records"] > 0


class _NoRedact:
    def redact_bytes(self, data):
        return data, {}

    def redact(self, text):
        return text, {}
