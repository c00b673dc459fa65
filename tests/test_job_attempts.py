"""A job's attempts count model calls only: crashes while it waits for its transcript to settle
resume it and never fail it."""

import json
import os
import threading
import time
from functools import partial

import msgspec

from claude_autoharness.daemon.persist.state import Snapshot, unpacked
from claude_autoharness.protocol import paths
from fake_anthropic import FakeAnthropic, error_reply, hang, tool_reply
from harness import Daemon, hook, wait_for


def job_running(d: Daemon) -> bool:
    return d.status()["jobs"]["running"] == 1


def test_five_crashes_while_a_job_waits_for_the_transcript_do_not_fail_it(home, monkeypatch):
    """kill -9 five times while a job waits for its transcript to settle: it is resumed each
    time, makes one model call once the transcript is quiet, and is done with no attempt
    counted (attempts count model calls answered with an error) and five interruptions."""
    project = home["tmp"] / "proj"
    project.mkdir()
    t = home["claude"] / "projects" / paths.project_slug(str(project)) / "busy.jsonl"
    t.parent.mkdir(parents=True)
    t.write_text(json.dumps({"type": "user", "message": {"role": "user", "content": "hi"}}) + "\n")
    busy = threading.Event()
    busy.set()

    def keep_writing():  # a transcript that never settles while `busy` is set
        while busy.is_set():
            os.utime(t)
            time.sleep(0.05)

    toucher = threading.Thread(target=keep_writing, daemon=True)
    toucher.start()
    with FakeAnthropic() as fake:
        fake.push(tool_reply({"proposals": []}))
        for k, v in {"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": fake.base_url,
                     "AUTOHARNESS_REFLECT_EVERY": "1", "AUTOHARNESS_WATCH": "0"}.items():
            monkeypatch.setenv(k, v)
        d = Daemon(home["home"])
        base = {"session_id": "busy", "transcript_path": str(t), "cwd": str(project)}
        hook(dict(base, hook_event_name="PreToolUse", tool_name="Bash"))
        hook(dict(base, hook_event_name="Stop"))
        try:
            for _ in range(5):
                wait_for(partial(job_running, d), what="job settling")
                d.kill9()
                d = Daemon(home["home"])
            assert fake.messages_requests == []
            busy.clear()
            toucher.join()
            wait_for(lambda: d.status()["jobs"]["done"] == 1, timeout=60, what="job done")
            assert d.status()["jobs"]["failed"] == 0 and len(fake.messages_requests) == 1
        finally:
            d.stop()
    snap = json.loads((home["home"] / "state" / "snapshot.json").read_text())
    [job] = snap["jobs"].values()
    assert job["status"] == "done" and job.get("attempts", 0) == 0 and job["interrupted"] == 5


def test_five_kills_during_the_model_call_resume_the_job_and_count_answered_errors(
        home, monkeypatch):
    """A session's last job (its SessionEnd tail) whose model call is in flight when the daemon
    is killed -9, five times (the fake server holds each request), with one call answered 500
    in between: it is resumed every time, parked with the reason once interrupted more than the
    bound, and done once the server answers, with attempts = 1 (the one answered error) and
    the session's tail reflected (the window ends at the transcript's end)."""
    project = home["tmp"] / "proj"
    project.mkdir()
    t = home["claude"] / "projects" / paths.project_slug(str(project)) / "tail.jsonl"
    t.parent.mkdir(parents=True)
    t.write_text(json.dumps({"type": "user", "message": {"role": "user",
                                                          "content": "the tail to reflect"}}) + "\n")
    os.utime(t, (time.time() - 10, time.time() - 10))  # settled
    with FakeAnthropic() as fake:
        fake.push(hang(), hang(), error_reply(500), hang(), hang(), hang(),
                  tool_reply({"proposals": []}))
        for k, v in {"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": fake.base_url,
                     "AUTOHARNESS_WATCH": "0", "AUTOHARNESS_REFLECTOR_BACKOFF_BASE_S": "0.05"}.items():
            monkeypatch.setenv(k, v)
        d = Daemon(home["home"])
        base = {"session_id": "tail", "transcript_path": str(t), "cwd": str(project)}
        hook(dict(base, hook_event_name="PreToolUse", tool_name="Bash"))
        hook(dict(base, hook_event_name="SessionEnd", reason="exit"))
        try:
            for n, calls in enumerate((1, 2, 4, 5, 6), 1):  # the third call is answered 500
                wait_for(lambda c=calls: len(fake.messages_requests) == c, timeout=60,
                         what=f"model call {calls} in flight")
                d.kill9()
                d = Daemon(home["home"])
                if n > 3:  # past the bound: parked, and said so
                    err = d.status()["jobs"]["last_error"]["error"]
                    assert f"interrupted {n} times" in err and "parked" in err
            wait_for(lambda: d.status()["jobs"]["done"] == 1, timeout=60, what="job done")
            st = d.status()
            assert st["jobs"]["failed"] == 0 and len(fake.messages_requests) == 7
            assert all("the tail to reflect" in r.body.decode() for r in fake.messages_requests)
        finally:
            d.stop()
    snap = json.loads((home["home"] / "state" / "snapshot.json").read_text())
    [job] = snap["jobs"].values()
    assert (job["kind"], job["status"]) == ("session_end", "done")
    assert job["attempts"] == 1 and job["interrupted"] == 5
    sessions = unpacked(msgspec.json.decode((home["home"] / "state" / "snapshot.json")
                                            .read_bytes(), type=Snapshot)).sessions
    assert job["window_end"] == t.stat().st_size == sessions["tail"].watermark
