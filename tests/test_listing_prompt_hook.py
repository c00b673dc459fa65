"""The reminder on UserPromptSubmit through the real daemon and the real hook client: a
prompt that matches a live learned skill gets an additionalContext naming it, once per
session; one that matches nothing, a hand-written skill (unless turned on) and a daemon with
reminders off give nothing; the ledger records each reminder."""

import json

from claude_autoharness.daemon.reportlog import ReportLog
from harness import Daemon, event, hook
from listing_support import hand_written
from promote_support import BODY, seed

LEARNED = "Use when running the database migrations: run them on a copy first."
OWN = "Use when deploying the frontend bundle: purge the CDN cache afterwards."


def prompt(project, sid, text):
    ev = event("UserPromptSubmit", sid, cwd=str(project), prompt=text)
    out = hook(ev).stdout.decode().strip()
    return json.loads(out)["hookSpecificOutput"]["additionalContext"] if out else None


def setup(short_tmp):
    project = short_tmp / "proj"
    project.mkdir()
    seed(project, "migrate-first", LEARNED, BODY)
    hand_written(project / ".claude" / "skills", "deploy-frontend", OWN)
    return project


def test_matching_prompt_is_reminded_once_per_session(home, short_tmp):
    project = setup(short_tmp)
    d = Daemon(home["home"])
    try:
        hook(event("SessionStart", "s1", source="startup", cwd=str(project)))
        ctx = prompt(project, "s1", "please run the migrations on the staging database")
        assert ctx and "`migrate-first`" in ctx and "Skill tool" in ctx and len(ctx) <= 600
        assert prompt(project, "s1", "run the database migrations again") is None  # once
        assert prompt(project, "s1", "hello there, how are you") is None
        assert prompt(project, "s1", "deploying the frontend bundle now") is None  # hand-written
        ctx2 = prompt(project, "s2", "the database migrations: run them")  # another session
        assert ctx2 and "`migrate-first`" in ctx2
        d.stop()
        recs = list(ReportLog().records("reminder"))
        assert [(r["session"], r["skills"]) for r in recs] == [
            ("s1", ["project/migrate-first"]), ("s2", ["project/migrate-first"])]
    finally:
        d.stop()


def test_hand_written_only_when_turned_on_and_off_switch(home, short_tmp):
    project = setup(short_tmp)
    d = Daemon(home["home"], env={"AUTOHARNESS_LISTING_REMIND_HAND_WRITTEN": "true"})
    try:
        ctx = prompt(project, "s1", "deploying the frontend bundle now")
        assert ctx and "`deploy-frontend`" in ctx
    finally:
        d.stop()
    d = Daemon(home["home"], env={"AUTOHARNESS_LISTING_REMINDERS": "false"})
    try:
        assert prompt(project, "s3", "please run the migrations on the staging database") is None
    finally:
        d.stop()


def test_prompt_hook_imports_stay_in_budget(home, short_tmp):
    """A prompt that matches nothing costs the hook no import beyond the PreToolUse path's
    (no json, msgspec, anyio, structlog, socket); only one with a reminder to print imports
    json, to print it."""
    import subprocess
    import sys

    from harness import HOOK

    project = setup(short_tmp)
    d = Daemon(home["home"])

    def imported(text: str) -> set[str]:
        data = json.dumps(event("UserPromptSubmit", "imp", cwd=str(project), prompt=text)).encode()
        r = subprocess.run([sys.executable, "-X", "importtime", HOOK], input=data,
                           capture_output=True, timeout=60)
        return {line.split("|")[-1].strip().split(".")[0]
                for line in r.stderr.decode().splitlines() if line.startswith("import time:")}

    try:
        quiet = imported("write a haiku about autumn")
        loud = imported("please run the migrations on the staging database")
    finally:
        d.stop()
    for name in ("json", "msgspec", "anyio", "structlog", "socket"):
        assert name not in quiet, name
    assert "json" in loud and "msgspec" not in loud
