"""`autoharnessctl report` through real processes: the funnel, recall, context and model cost
and the per-skill rows, from what the daemon stores; what it records for them survives kill -9;
archive causes and feedback written by other versions are read when present."""

import json
import os
from pathlib import Path

import pytest

from claude_autoharness.daemon import pricing
from claude_autoharness.daemon.persist import quarantine
from claude_autoharness.daemon.persist.checksum import check
from claude_autoharness.daemon.promote.land import Promoter
from claude_autoharness.daemon.promote.lifecycle import Decision
from claude_autoharness.daemon.reportlog import ReportLog
from claude_autoharness.protocol import paths
from claude_autoharness.protocol.config import PromoterConfig
from fake_anthropic import DEFAULT_USAGE, FakeAnthropic, tool_reply
from fake_claude import install, result
from harness import Daemon, ctl, hook, wait_for
from pipeline_support import QUOTE, proposal
from promote_support import seed
from report_support import Env

DESCRIPTION = proposal()["description"]


@pytest.fixture
def fake():
    with FakeAnthropic() as f:
        yield f


def report(*args) -> dict:
    r = ctl("report", "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def stable(rep: dict) -> dict:
    """The report without the fields that move with the clock."""
    return {k: v for k, v in rep.items() if k not in ("generated_at", "since")}


def test_report_funnel_cost_recall_context_and_skills(home, fake, monkeypatch):
    """One reflection proposing a grounded skill and an unattributable one: the report counts
    one reflection, two proposals, one landing, one rejection by its reason; the tokens are the
    fake server's usage, priced at the configured model's list price, per job and per 100
    main-session tool calls; the landed skill's listing line is the context cost; a load of it
    makes the project layer's recall 1 of 1; the SessionStart context sent is measured; and a
    kill -9 changes none of it."""
    fake.push(tool_reply({"proposals": [
        proposal(), proposal(skill="made-up", evidence="words the session never said")]}))
    # no snapshot before the kill: what the report counts must be in the journal and ledger
    monkeypatch.setenv("AUTOHARNESS_PERSIST_INTERVAL_S", "3600")
    e = Env(home, fake, monkeypatch)
    try:
        e.work(n=4)  # four main-session tool calls, then the threshold Stop
        wait_for(lambda: e.status()["intents"].get("landed") == 1
                 and e.status()["intents"].get("rejected") == 1, timeout=60, what="intake")
        hook(e.ev("PreToolUse", tool_name="Skill", tool_input={"skill": "check-server-start"}))
        out = hook(e.ev("SessionStart", source="startup")).stdout.decode()
        sent = len(json.loads(out)["hookSpecificOutput"]["additionalContext"])
        rep = wait_for(lambda: (lambda x: x if x["recall"]["layers"].get("project", {})
                                .get("loaded") else None)(report()), what="recall")
        f = rep["funnel"]
        assert (f["reflections"], f["proposals"], f["landed"], f["rejected"]) == (
            {"period": 1, "today": 1}, {"period": 2, "today": 2}, {"period": 1, "today": 1},
            {"period": 1, "today": 1})
        assert f["rejected_by_reason"] == {"unattributable": {"period": 1, "today": 1}}
        assert f["archived"]["period"] == 0 and f["held"]["period"] == 0
        c = rep["cost"]
        tokens = {"input_uncached": DEFAULT_USAGE["input_tokens"],
                  "cache_write": DEFAULT_USAGE["cache_creation_input_tokens"],
                  "cache_read": DEFAULT_USAGE["cache_read_input_tokens"],
                  "output": DEFAULT_USAGE["output_tokens"]}
        assert c["tokens"] == tokens and c["per_job"] == tokens
        assert (c["calls"], c["jobs"], c["tool_calls"], c["model"]) == (
            1, 1, 5, "claude-haiku-4-5")  # four Bash calls and the Skill call
        assert c["per_100_tool_calls"] == {k: v * 20 for k, v in tokens.items()}
        usd = pricing.cost_usd("claude-haiku-4-5", tokens)
        assert usd and c["usd"] == pytest.approx(usd) and c["usd_per_job"] == pytest.approx(usd)
        line = f"- check-server-start: {DESCRIPTION}\n"
        cx = rep["context"]
        assert cx["layers"]["project"] == {"skills": 1, "chars": len(line),
                                           "autoharness_skills": 1,
                                           "autoharness_chars": len(line)}
        assert cx["total_chars"] == len(line)
        assert cx["session_start"] == {"sent": 1, "mean_chars": sent, "max_chars": sent}
        assert rep["recall"]["layers"] == {"project": {"live": 1, "loaded": 1, "share": 1.0}}
        [row] = rep["skills"]
        assert (row["name"], row["layer"], row["owner"], row["stage"], row["uses"]) == (
            "check-server-start", "project", "autoharness", "probation", 1)
        # no verdicts recorded: none shown, or zero where a version always lists the counts
        assert row["landed_at"] and not any((row["feedback"] or {}).values())
        assert not any(rep["feedback"].values())
        today = rep["library"][-1]
        assert (today["project"], today["landed"], today["archived"]) == (1, 1, 0)
        assert QUOTE not in json.dumps(rep)  # figures only, no transcript text
        text = ctl("report").stdout
        assert "rejected          1 (1 today)" in text and "unattributable" in text
        assert rep["headline"]["state"] == "learning"
        assert text.splitlines()[0] == ("learning: 1 reflection in the last 30 days, 1 landed, "
                                        "1 live autoharness skill")
        assert text.splitlines()[1] == "next: see what it learned: `autoharnessctl skills list`"

        e.daemon.kill9()
        e.daemon = Daemon(home["home"])
        assert stable(report()) == stable(rep)
    finally:
        e.daemon.stop()


def test_report_reads_archive_causes_and_restores(home, monkeypatch):
    """Archives by cause come from the promoter's history (a lifecycle `dormant` one, and a
    cause this version never writes, `harmful`, read as it is); a restore is counted; the
    library's size per day follows landings, archives and the restore."""
    project = home["tmp"] / "proj"
    (project / ".claude" / "skills").mkdir(parents=True)
    seed(project, "alpha-skill", "Use when the build cache is stale: wipe it and rebuild.",
         "Wipe `build/` and rebuild.")
    seed(project, "beta-skill", "Use when a migration fails: roll back, then rerun.",
         "Roll back, then rerun.")
    pr = Promoter(PromoterConfig())
    for name, why in (("alpha-skill", "dormant"), ("beta-skill", "harmful")):
        out = pr.retire(Decision(name=name, layer="project", scope=str(project), reason=why,
                                 uses=0, turns=9),
                        str(project))
        assert out.status == "landed", out.findings
    d = Daemon(home["home"])
    try:
        r = ctl("skills", "restore", "alpha-skill", "--project", str(project))
        assert r.returncode == 0, r.stdout + r.stderr
        # the daemon knows a project from its turns or intents: give it one turn there
        sid = "sess-report-2"
        hook({"session_id": sid, "hook_event_name": "Stop", "cwd": str(project),
              "transcript_path": str(home["claude"] / "projects" / f"{sid}.jsonl")})
        rep = wait_for(lambda: (lambda x: x if x["skills"] else None)(report()), what="rows")
        f = rep["funnel"]
        assert f["archived_by_cause"] == {"dormant": {"period": 1, "today": 1},
                                          "harmful": {"period": 1, "today": 1}}
        assert f["archived"]["period"] == 2 and f["restored"]["period"] == 1
        names = {(s["name"], s["status"]): s for s in rep["skills"]}
        assert names[("beta-skill", "archived")]["reason"] == "harmful"
        assert names[("alpha-skill", "live")]["stage"] == "probation"
        sizes = [(day["project"], day["landed"], day["archived"]) for day in rep["library"]]
        assert sizes[-1] == (1, 2, 2)  # two landed, two archived, one restored today
    finally:
        d.stop()


def test_a_skill_row_carries_its_verdicts_and_stale_paths():
    """A skill's report row carries the verdict counts and stale paths the promoter lists for
    it."""
    from claude_autoharness.daemon import reportdata
    from claude_autoharness.protocol import replies as r

    info = r.SkillInfo(name="x", layer="user", path="/n", owner="autoharness",
                       feedback=r.FeedbackCounts(helped=1, missed=3), stale=["docs/api.md"])
    row = reportdata.skill_row(info, None)
    assert row.feedback == {"helped": 1, "ignored": 0, "harmful": 0, "missed": 3}
    assert row.stale == ["docs/api.md"]


def test_claude_backend_usage_is_recorded_with_the_job(home, monkeypatch):
    """The claude backend's usage (the `claude -p` JSON result's) is recorded per call in the
    ledger with the job's id and counted by the report like the SDK's."""
    usage = {"input_tokens": 10, "output_tokens": 50, "cache_creation_input_tokens": 300,
             "cache_read_input_tokens": 2000}
    fc = install(home["tmp"] / "bin", home["tmp"] / "fake-state",
                 [{"result": result({"proposals": []}, usage=usage)}])
    monkeypatch.setenv("PATH", fc.path_env()["PATH"])
    monkeypatch.setenv("AUTOHARNESS_REFLECTOR_BACKEND", "claude")

    class NoApi:
        base_url = "http://127.0.0.1:9"

    e = Env(home, NoApi, monkeypatch)
    try:
        e.work()
        wait_for(lambda: e.status()["jobs"]["done"] == 1, timeout=60, what="job")
        [rec] = list(ReportLog().records("usage"))
        job = next(iter(e.status()["jobs"]["by_kind"]))
        assert (rec["backend"], rec["job_kind"], rec["batch"]) == ("claude", job, False)
        assert (rec["input_tokens"], rec["cache_creation"], rec["cache_read"],
                rec["output_tokens"]) == (10, 300, 2000, 50)
        c = report()["cost"]
        assert c["tokens"] == {"input_uncached": 10, "cache_write": 300, "cache_read": 2000,
                               "output": 50} and c["jobs"] == 1
    finally:
        e.daemon.stop()


def test_ledger_skips_torn_lines_and_counts_a_call_once(home):
    """A torn last line is skipped and the next record starts on its own line; the ledger is
    set aside in the quarantine (once) and rewritten without it; a usage record written twice
    for the same call (results read again after a restart) counts once."""
    path = paths.report_log_file()
    log = ReportLog(path)
    u = {"input_tokens": 5, "output_tokens": 1}
    log.usage(job="j1", attempt=1, kind="threshold", backend="anthropic", model="m", usage=u)
    with open(path, "ab") as f:
        f.write(b'{"k":"usage","at":1,"job":"torn')
    log.usage(job="j1", attempt=1, kind="threshold", backend="anthropic", model="m", usage=u)
    log.usage(job="j1", attempt=2, kind="threshold", backend="anthropic", model="m", usage=u)
    log.append("context", chars=12)
    assert [(x["job"], x["attempt"]) for x in log.records("usage")] == [("j1", 1), ("j1", 2)]
    assert [x["chars"] for x in log.records("context")] == [12]
    [aside] = quarantine.files()
    assert b'"job":"torn' in Path(aside).read_bytes()
    assert b"torn" not in Path(path).read_bytes() and check(Path(path).read_bytes().split()[0])
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"


def test_batch_items_are_priced_at_the_batch_price(home, fake, monkeypatch):
    """`replay --batch`: each item's usage is recorded as a batch item and priced at half the
    list price; each item is one reflection."""
    project = home["tmp"] / "proj"
    project.mkdir()
    backlog = home["tmp"] / "backlog"
    backlog.mkdir()
    for k in range(2):
        recs = [{"type": "user", "cwd": str(project), "sessionId": f"s{k}",
                 "message": {"role": "user", "content": f"item {k}: nothing to learn here"}},
                {"type": "assistant", "cwd": str(project), "sessionId": f"s{k}",
                 "message": {"role": "assistant", "content": [{"type": "text", "text": "Ok."}]}}]
        (backlog / f"t{k}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    fake.route = lambda params: tool_reply({"proposals": []})
    for k, v in {"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key",
                 "ANTHROPIC_BASE_URL": fake.base_url, "AUTOHARNESS_REFLECTOR_BATCH_POLL_S": "0.05",
                 "AUTOHARNESS_REFLECTOR_BATCH_POLL_MAX_S": "0.2"}.items():
        monkeypatch.setenv(k, v)
    d = Daemon(home["home"])
    try:
        r = ctl("replay", "--batch", str(backlog), "--project", str(project), "--wait", "60")
        assert r.returncode == 0, r.stderr
        wait_for(lambda: d.status()["batches"]["items"].get("done") == 2, what="2 items")
        rep = report()
        c = rep["cost"]
        tokens = {"input_uncached": DEFAULT_USAGE["input_tokens"],
                  "cache_write": DEFAULT_USAGE["cache_creation_input_tokens"],
                  "cache_read": DEFAULT_USAGE["cache_read_input_tokens"],
                  "output": DEFAULT_USAGE["output_tokens"]}
        assert (c["calls"], c["batch_items"], c["jobs"]) == (2, 2, 2)
        full = pricing.cost_usd("claude-haiku-4-5", tokens)
        assert c["usd"] == pytest.approx(2 * full * pricing.BATCH)
        assert rep["funnel"]["reflections"]["period"] == 2
    finally:
        d.stop()


def test_ledger_compaction_keeps_recent_records(short_tmp, monkeypatch):
    """Past its size bound the ledger keeps only the records of the last KEEP_S."""
    from claude_autoharness.daemon import reportlog

    now = [1_000_000_000.0]
    log = ReportLog(str(short_tmp / "report.jsonl"), clock=lambda: now[0])
    log.append("context", chars=1)
    now[0] += reportlog.KEEP_S + 10
    log.append("context", chars=2)
    assert not log.compact()  # under the bound: untouched
    monkeypatch.setattr(reportlog, "MAX_BYTES", 10)
    assert log.compact()
    assert [r["chars"] for r in log.records("context")] == [2]
