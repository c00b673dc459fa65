"""What autoharness says about Claude Code's skill listing: `status`, `doctor`, `report`
(text, JSON, page) and the SessionStart context name the learned skills listed by name only,
why, and the fix — through the real daemon, the real hook client and the CLI."""

import json
import subprocess
import time

from claude_autoharness.protocol import paths
from harness import CTL, Daemon, ctl, event, hook
from listing_support import hand_written, words
from promote_support import BODY, seed


def over_budget(home, project):
    """Three never-used learned skills and a used hand-written one in a 6,500-character budget
    (Claude Code's own entries take about 6,200): the learned ones lose their descriptions."""
    settings = home["claude"] / "settings.json"
    settings.write_text(json.dumps({"env": {"SLASH_COMMAND_TOOL_CHAR_BUDGET": "6500"}}))
    (home["claude"] / ".claude.json").write_text(json.dumps(
        {"skillUsage": {"own-notes": {"usageCount": 4, "lastUsedAt": time.time() * 1000}}}))
    hand_written(project / ".claude" / "skills", "own-notes", words("own-notes", 300))
    for name in ("check-logs", "quote-paths", "pin-versions"):
        seed(project, name, words(name, 200), BODY)


def test_status_doctor_report_and_session_start_say_it(home, short_tmp):
    """Over budget, each surface names the learned skills shown by name only ("listing X of
    6,500 characters; 3 learned skills never used are shown by name only") and the fix."""
    project = short_tmp / "proj"
    project.mkdir()
    over_budget(home, project)
    d = Daemon(home["home"])
    try:
        r = ctl_in(project, "status")
        assert "3 learned skills never used are shown by name only" in r.stdout, r.stdout
        assert "of 6,500 characters" in r.stdout and "skillListingBudgetFraction" in r.stdout
        st = json.loads(ctl_in(project, "status", "--json").stdout)
        assert sorted(st["listing"]["autoharness_name_only"]) == [
            "check-logs", "pin-versions", "quote-paths"]
        listing = ctl("skills", "listing", "--project", str(project)).stdout
        assert listing.splitlines()[0] == st["listing"]["text"]
        assert "check-logs" in listing and "name only" in listing and "fix: " in listing
        doc = json.loads(ctl("doctor", "--json", "--project", str(project)).stdout)
        [c] = [c for c in doc["checks"] if c["name"] == "listing"]
        assert c["warning"] and "by name only" in c["detail"] and "/skills" in c["fix"]
        rep = ctl_in(project, "report").stdout
        assert "Claude Code's listing here: listing" in rep and "by name only" in rep
        page = project / "r.html"
        ctl_in(project, "report", "--html", str(page))
        assert "<li>check-logs</li>" in page.read_text()
        sid = "sess-listing"
        tdir = home["claude"] / "projects" / paths.project_slug(str(project))
        tdir.mkdir(parents=True)
        (tdir / f"{sid}.jsonl").write_text("")
        out = hook(event("SessionStart", sid, source="startup", cwd=str(project),
                         transcript_path=str(tdir / f"{sid}.jsonl"))).stdout
        ctx = json.loads(out)["hookSpecificOutput"]["additionalContext"]
        assert "appear by name only" in ctx and "check-logs" in ctx and "Skill tool" in ctx
    finally:
        d.stop()


def test_nothing_said_when_it_fits(home, short_tmp):
    """Within the budget: status says every skill is listed whole; doctor's check passes
    without a fix."""
    project = short_tmp / "proj"
    project.mkdir()
    seed(project, "check-logs", words("check-logs", 200), BODY)
    r = ctl("doctor", "--json", "--project", str(project))
    [c] = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "listing"]
    assert not c["warning"] and "listed with its description" in c["detail"]


def ctl_in(project, *args) -> subprocess.CompletedProcess:
    """The CLI run from inside `project`: the verbs that predict the listing take the
    project from their working directory."""
    return subprocess.run([CTL, *args], capture_output=True, text=True, timeout=60, cwd=project)
