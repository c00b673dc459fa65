"""What the CLI says to a person: `learn` outside any session says so and queues nothing; plain
`status` gives each failed job's reason; `queue show` and `skills show` print for people (dates,
text) and JSON with `--json`; counts are pluralised ("1 turn"); a state dir of mode 000 or a file
where it belongs is named with its mode and a fix that works."""

import json
import os
import stat

from claude_autoharness.client.verbs import queue, skills, status
from claude_autoharness.protocol import replies as r
from claude_autoharness.protocol.words import plural, when
from fake_anthropic import FakeAnthropic, error_reply
from harness import Daemon, ctl, hook, pre_tool, wait_for
from status_support import healthy_status


def test_learn_outside_any_session_says_so_and_queues_nothing(home):
    d = Daemon(home["home"])
    try:
        out = ctl("learn", "always run the linter")
        assert out.returncode == 1 and "no session to learn from" in out.stderr, out.stderr
        assert "--session" in out.stderr and "nothing was queued" in out.stderr
        out = ctl("learn", "--session", "sess-unknown", "always run the linter")
        assert out.returncode == 1 and "no session sess-unknown" in out.stderr, out.stderr
        st = d.status()
        assert st["jobs"]["pending"] == 0 and st["jobs"]["by_kind"] == {}, st["jobs"]
        hook(pre_tool("sess-here"))  # with a session it queues, as before
        out = ctl("learn", "always run the linter")
        assert out.returncode == 0 and "session sess-here" in out.stdout, out.stderr
    finally:
        d.stop()


def test_status_gives_each_failed_jobs_reason(home, monkeypatch):
    """Two sessions whose reflections fail for good (the API refuses the key): plain `status`
    lists each failed job with its session and the reason."""
    with FakeAnthropic() as fake:
        fake.push(*[error_reply(401) for _ in range(4)])
        project = home["tmp"] / "proj"
        project.mkdir()
        t = home["tmp"] / "t.jsonl"
        t.write_text(json.dumps({"type": "user", "message": {"role": "user",
                                                               "content": "hi"}}) + "\n")
        for k, v in {"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": fake.base_url,
                     "AUTOHARNESS_REFLECTOR_MAX_ATTEMPTS": "1",
                     "AUTOHARNESS_CAPTURE_TRANSCRIPT_ROOTS": str(home["tmp"])}.items():
            monkeypatch.setenv(k, v)
        d = Daemon(home["home"])
        try:
            for sid in ("sess-a", "sess-b"):
                hook(pre_tool(sid, transcript_path=str(t), cwd=str(project)))
                assert ctl("flush", sid).returncode == 0
            wait_for(lambda: d.status()["jobs"]["failed"] == 2, timeout=60, what="two failures")
            out = ctl("status").stdout
        finally:
            d.stop()
    failed = [line for line in out.splitlines() if line.strip().startswith("failed ")]
    assert len(failed) == 2, out
    for sid in ("sess-a", "sess-b"):
        line = next(x for x in failed if sid in x)
        assert "401" in line or "auth" in line.lower(), line


def test_status_text_counts_and_failures_read_as_words():
    st = healthy_status(jobs=r.JobCounts(failed=7, recent_failures=[
        r.FailedJob(job="j1", kind="flush", session_id="s1", error="the API said no",
                    finished_at=100.0)]), library=r.LibraryInfo(turns=r.LibraryTurns(user=1)))
    text = status.format_status(st, now=130.0)
    assert "failed flush job j1, session s1 (30s ago): the API said no" in text
    assert "6 earlier failures not shown" in text
    assert "1 turn" in text and "1 turns" not in text
    line = skills.format_skill_line(r.SkillInfo(name="x", layer="user", path="/p",
                                                owner="autoharness", turns=1))
    assert "1 turn " in line and "turns" not in line
    assert plural(1, "turn") == "1 turn" and plural(2, "turn") == "2 turns"


def test_show_verbs_print_for_people_and_json_with_the_flag():
    """`queue show` and `skills show` text: dates (not epoch floats), the proposal's text on
    lines of its own; `--json` is the daemon's reply as it was."""
    intent = r.Intent(id="i1", source="learn", created_at=1_764_583_200.5, session_id="s1",
                      proposal=r.Proposal(action="create", skill="run-tests", reason="why",
                                          body="line one\nline two"),
                      status="rejected", findings=[r.Finding(family="safe", code="x",
                                                             message="bad thing")])
    text = queue.format_intent(intent)
    assert "1764583200" not in text and when(1_764_583_200.5) in text
    assert "create run-tests" in text and "    line two" in text and "bad thing" in text
    view = r.SkillView(info=r.SkillInfo(name="run-tests", layer="project", path="/p/SKILL.md",
                                        owner="autoharness", version=2, created=1_764_583_200.0),
                       skill_md="---\nname: run-tests\n---\nRun them.\n", files=["SKILL.md"],
                       landings=[{"version": 2, "action": "patch", "at": 1_764_583_260.0,
                                  "source": "flush", "reason": "it broke"}])
    text = skills.format_skill_view(view)
    assert "v2 patch " + when(1_764_583_260.0) in text and "it broke" in text
    line = skills.landing_line({"version": 3, "action": "update", "at": 1_764_583_200.0,
                                "source": "learn", "reason": "asked"})
    assert line == f"v3 update {when(1_764_583_200.0)}, source learn: asked"
    assert text.rstrip().endswith("Run them.") and "1764583" not in text


def test_skills_show_from_a_daemon_prints_text_and_json_with_the_flag(home):
    """A hand-written skill in the user's library: `skills show` prints its row, path and
    SKILL.md as text; `--json` prints the reply."""
    skill = home["claude"] / "skills" / "my-notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: my-notes\ndescription: mine\n---\nBe kind.\n")
    d = Daemon(home["home"])
    try:
        out = ctl("skills", "show", "my-notes", "--project", str(home["tmp"]))
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("my-notes") and "Be kind." in out.stdout, out.stdout
        assert f"path: {skill}" in out.stdout and "{" not in out.stdout, out.stdout
        out = ctl("skills", "show", "my-notes", "--project", str(home["tmp"]), "--json")
        assert json.loads(out.stdout)["info"]["name"] == "my-notes"
    finally:
        d.stop()


def test_a_state_dir_of_mode_000_is_named_with_a_fix_that_works(home):
    """The daemon refuses with the path, its mode and `chmod 700 PATH`; doctor says the same;
    running that fix lets the daemon start."""
    state = home["home"] / "state"
    state.mkdir(mode=0o700)
    os.chmod(state, 0)
    d = Daemon(home["home"], wait=False)
    assert d.proc.wait(timeout=60) == 1
    err = d.output()
    d.log.close()
    assert f"{state} has mode 000" in err and f"`chmod 700 {state}`" in err, err
    checks = {c["name"]: c for c in json.loads(ctl("doctor", "--json").stdout)["checks"]}
    assert not checks["state"]["ok"] and "mode 000" in checks["state"]["detail"]
    fix = checks["state"]["fix"]
    assert fix == f"`chmod 700 {state}`", fix
    os.chmod(state, 0o700)  # the fix, as given
    d = Daemon(home["home"])
    try:
        assert d.status()["pid"]
    finally:
        d.stop()


def test_a_file_where_the_state_dir_belongs_is_named_with_its_mode(home):
    state = home["home"] / "state"
    state.write_text("")
    os.chmod(state, 0o644)
    r = ctl("start", "--timeout", "30")
    assert r.returncode == 1 and f"{state} is a file (mode 644)" in r.stderr, r.stderr
    assert f"mv {state} {state}.old" in r.stderr
    checks = {c["name"]: c for c in json.loads(ctl("doctor", "--json").stdout)["checks"]}
    assert "mode 644" in checks["state"]["detail"]
    os.rename(state, f"{state}.old")  # the fix, as given
    d = Daemon(home["home"])
    try:
        assert stat.S_ISDIR(os.stat(state).st_mode)
    finally:
        d.stop()


def test_messages_send_people_to_docs_they_have():
    """An installed package (pipx, a wheel) has no docs/ folder: no message of the code names
    a `docs/...` file; they give the online address, which is pyproject's Documentation."""
    import ast
    import re
    import tomllib

    from claude_autoharness.protocol.words import DOCS_URL, doc
    from conftest import REPO

    urls = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["urls"]
    assert DOCS_URL.replace("/blob/", "/tree/") == urls["Documentation"]
    found = []
    for folder in ("client", "daemon", "protocol"):
        for path in (REPO / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                          if isinstance(n, ast.Module | ast.FunctionDef | ast.ClassDef)
                          and n.body and isinstance(n.body[0], ast.Expr)}
            for node in ast.walk(tree):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                        and id(node) not in docstrings
                        and re.search(r"(?<![/\w])docs/\w+\.md", node.value)):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert found == []
    assert doc("privacy.md") == f"{DOCS_URL}/privacy.md"
