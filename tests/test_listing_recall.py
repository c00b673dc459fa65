"""Recall split through the real daemon: sessions where a learned skill was reminded of and
loaded, reminded and not loaded, loaded without a reminder; the report shows recall with and
without a reminder, and as Claude Code lists the skill (with its description, by name only)."""

import json

from claude_autoharness.daemon.reportdata import ReportLog
from harness import Daemon, ctl, event, hook, wait_for
from promote_support import BODY, seed

LEARNED = "Use when running the database migrations: run them on a copy first."
MATCH = "please run the migrations on the staging database"


def split(project):
    r = ctl("report", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    [row] = [s for s in rep["skills"] if s["name"] == "migrate-first"]
    return rep["recall_split"], row["recall"]


def test_recall_with_and_without_reminders(home, short_tmp):
    project = short_tmp / "proj"
    project.mkdir()
    seed(project, "migrate-first", LEARNED, BODY)
    d = Daemon(home["home"])
    cwd = str(project)
    try:
        for sid, remind, load in (("s1", True, True), ("s2", True, False), ("s3", False, True)):
            hook(event("SessionStart", sid, source="startup", cwd=cwd))
            if remind:
                out = hook(event("UserPromptSubmit", sid, cwd=cwd, prompt=MATCH)).stdout
                assert b"migrate-first" in out
            if load:
                hook(event("PreToolUse", sid, cwd=cwd, tool_name="Skill",
                           tool_input={"skill": "migrate-first"}, tool_use_id=f"toolu_{sid}"))
            hook(event("Stop", sid, cwd=cwd))  # a turn of the project: the report knows it
        wait_for(lambda: len(list(ReportLog().records("use"))) == 2, what="two loads recorded")
        sp, row = split(project)
        assert sp["reminded"] == {"skills": 0, "situations": 2, "loaded": 1, "share": 0.5}
        assert sp["not_reminded"] == {"skills": 0, "situations": 1, "loaded": 1, "share": 1.0}
        assert sp["listed_full"]["situations"] == 3 and sp["listed_full"]["skills"] == 1
        assert sp["name_only"]["situations"] == 0
        assert row == {"reminded": 2, "reminded_loaded": 1, "unreminded": 1,
                       "unreminded_loaded": 1, "listed": True}
        (home["claude"] / "settings.json").write_text(
            json.dumps({"env": {"SLASH_COMMAND_TOOL_CHAR_BUDGET": "10"}}))
        sp, row = split(project)  # a listing over budget: the skill is listed by name only
        assert row["listed"] is False and sp["name_only"]["loaded"] == 2
        text = ctl("report").stdout
        assert "reminded                 1 of 2 (50%)" in text
        assert "listed by name only      2 of 3" in text
    finally:
        d.stop()
