"""A new user's first steps, as they go wrong on a fresh machine: the package runs by name, no
command waits silently on a terminal, a missing reflector backend is said wherever jobs wait,
the service verbs undo each other without a user manager, doctor survives a broken state dir
and names the fix, broken pipes end quietly, errors read as words, rejected events are logged
with their reason, and `install --remove` gives back the settings file byte for byte."""

import json
import os
import pty
import shutil
import subprocess
import sys
from importlib import metadata

import pytest

from claude_autoharness.client import checks
from claude_autoharness.client import ctl as ctlmod
from claude_autoharness.client.verbs import queue
from claude_autoharness.protocol import words
from claude_autoharness.protocol.paths import project_slug
from claude_autoharness.protocol.replies import Finding, Intent, Proposal
from conftest import REAL, REPO
from harness import BIN, CTL, HOOK, Daemon, ctl, event, hook, pre_tool, wait_for


def on_terminal(argv, timeout=60, env=None):
    """Run `argv` with a real terminal on stdin (nothing typed); a command that waits for input
    would hit the timeout and fail the test."""
    leader, follower = pty.openpty()
    try:
        return subprocess.run(argv, stdin=follower, capture_output=True, text=True,
                              timeout=timeout, env=env or dict(os.environ))
    finally:
        os.close(follower)
        os.close(leader)


def into_closed_pipe(argv, env=None):
    """Run `argv` with stdout a pipe nobody reads (as `... | head -0` leaves it)."""
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run(argv, stdout=w, stderr=subprocess.PIPE, text=True, timeout=60,
                              env=env or dict(os.environ))
    finally:
        os.close(w)


# ---- the package ------------------------------------------------------------------------------


def test_python_m_package_runs_the_cli(home):
    """`python -m claude_autoharness` is autoharnessctl: same help, same verbs, same errors."""
    r = subprocess.run([sys.executable, "-m", "claude_autoharness", "--help"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "autoharnessctl" in r.stdout and "doctor" in r.stdout and "status" in r.stdout
    r = subprocess.run([sys.executable, "-m", "claude_autoharness", "status"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "not running" in r.stderr and "Traceback" not in r.stderr


def test_license_file_and_project_urls():
    """The MIT licence declared in the metadata is in a LICENSE file, shipped in the
    distribution; the metadata names the project's URLs."""
    assert (REPO / "LICENSE").read_text().startswith("MIT License")
    meta = metadata.metadata("claude-autoharness")
    assert meta["License"] == "MIT"
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Source", "Issues"} <= set(urls)
    assert all(u.startswith("https://") for u in urls.values())
    shipped = [f for f in metadata.files("claude-autoharness") or [] if f.name == "LICENSE"]
    assert shipped and shipped[0].read_text().startswith("MIT License")


def test_no_message_installs_the_unrelated_package():
    """Every `pip install`/`pipx install`/`uv tool install` in the code, manifests and docs
    names claude-autoharness: the bare name `autoharness` is another project."""
    import re

    bad = re.compile(r"(?:pip|pipx|uv tool|uv pip) install (?:-[-\w]+ )*autoharness\b(?!-)")
    hits = []
    for root in ("client", "daemon", "protocol", "hooks", ".claude-plugin", "commands", "docs"):
        for dirpath, _, files in os.walk(REPO / root):
            for f in files:
                p = os.path.join(dirpath, f)
                try:
                    text = open(p, encoding="utf-8").read()
                except (UnicodeDecodeError, OSError):
                    continue
                hits += [f"{p}: {m.group(0)}" for m in bad.finditer(text)]
    for f in ("README.md", "CONTRIBUTING.md", "pyproject.toml"):
        if (REPO / f).exists():
            hits += [f"{f}: {m.group(0)}" for m in bad.finditer((REPO / f).read_text())]
    assert not hits


# ---- terminals and pipes ------------------------------------------------------------------------


def test_bare_ctl_prints_help():
    """`autoharnessctl` alone prints its help (every verb), not an argparse error."""
    r = ctl()
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: autoharnessctl")
    for verb in ("status", "install", "doctor", "service", "learnings"):
        assert verb in r.stdout
    assert "first steps:" in r.stdout and "COMMAND --help" in r.stdout


def _verb_groups() -> dict[str, list[str]]:
    """Every verb that takes a subcommand (`queue list`, `learnings save`...): its choices."""
    import argparse

    groups = {}
    top = ctlmod.build_parser()
    verbs = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    for name, sp in verbs.choices.items():
        for a in sp._actions:
            if a.choices and not a.option_strings:
                groups[name] = list(a.choices)
    return groups


def test_bare_verb_group_prints_its_help(home):
    """A verb that takes a subcommand, given none (`autoharnessctl queue`), prints its own help
    listing every subcommand and exits 0 like bare `autoharnessctl`, not an argparse error."""
    groups = _verb_groups()
    assert {"queue", "skills", "learnings", "service"} <= set(groups)
    for verb, subs in groups.items():
        r = ctl(verb)
        assert (r.returncode, r.stderr) == (0, ""), (verb, r.stderr)
        assert r.stdout.startswith(f"usage: autoharnessctl {verb}"), (verb, r.stdout)
        assert [s for s in subs if s not in r.stdout] == [], (verb, r.stdout)


def _all_parsers():
    """(name, parser) for every verb and sub-verb of autoharnessctl."""
    import argparse

    out, todo = [], [("autoharnessctl", ctlmod.build_parser())]
    while todo:
        name, p = todo.pop()
        out.append((name, p))
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                todo += [(f"{name} {n}", sp) for n, sp in a.choices.items()]
    return out


def test_every_argument_says_what_it_is_for():
    """In every verb's --help each argument and option has a help line, an option with a
    default value says the default, and a subcommand positional explains each choice."""
    import argparse

    missing, no_default, unexplained = [], [], []
    for name, p in _all_parsers():
        for a in p._actions:
            if isinstance(a, (argparse._HelpAction, argparse._VersionAction,
                              argparse._SubParsersAction)):
                continue
            what = f"{name} {a.option_strings or a.dest}"
            if not a.help or a.help == argparse.SUPPRESS:
                missing.append(what)
                continue
            if (a.option_strings and a.default not in (None, False, argparse.SUPPRESS)
                    and "default" not in a.help):
                no_default.append(what)
            if a.choices and not a.option_strings:
                unexplained += [f"{what}: {c}" for c in a.choices if f"{c}" not in a.help]
    assert (missing, no_default, unexplained) == ([], [], [])


def test_a_missing_name_or_id_says_where_to_find_one(home):
    """`skills show` without a NAME and `queue show` without an ID fail (a usage error: 2)
    saying which listing gives one."""
    for argv, listing in ((["skills", "show"], "autoharnessctl skills list"),
                          (["skills", "revert"], "autoharnessctl skills list"),
                          (["queue", "show"], "autoharnessctl queue list")):
        r = ctl(*argv)
        assert r.returncode == 2 and listing in r.stderr, (argv, r.stderr)  # a usage error


def test_hook_help_and_terminal_never_wait(home):
    """`autoharness-hook --help` prints its usage; run on a terminal with no input it says what
    it is for instead of waiting for JSON; both exit 0 and report nothing to anyone."""
    r = subprocess.run([HOOK, "--help"], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and r.stdout.startswith("usage: autoharness-hook")
    assert "autoharnessctl install" in r.stdout
    r = on_terminal([HOOK])
    assert r.returncode == 0 and r.stdout.startswith("usage: autoharness-hook")
    assert not (home["home"] / "state" / "spool").exists()


def test_learnings_report_on_a_terminal_reports_the_project(home, short_tmp):
    """`learnings report` with no mode on a terminal does not wait for hook JSON: it says so and
    reports this project's transcripts, as --previous-transcripts does."""
    project = short_tmp / "proj"
    project.mkdir()
    r = on_terminal([CTL, "learnings", "report", "--project", str(project)])
    assert r.returncode == 0, r.stderr
    assert "no hook input on stdin" in r.stderr
    via_flag = ctl("learnings", "report", "--previous-transcripts", "--project", str(project))
    assert r.stdout == via_flag.stdout


def test_learn_from_stdin_on_a_terminal_prompts(home):
    """`learn -` typed at a terminal says what it waits for, then queues what was typed."""
    d = Daemon(home["home"])
    hook(pre_tool("sess-tty"))  # learn needs a session to learn from
    leader, follower = pty.openpty()
    try:
        p = subprocess.Popen([CTL, "learn", "-"], stdin=follower, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        os.write(leader, b"always read the first error\n\x04")
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert "type the lesson, then Ctrl-D" in err and "queued learn job" in out
    finally:
        os.close(follower)
        os.close(leader)
        d.stop()


def test_learnings_report_names_a_missing_transcript(home, short_tmp):
    """A --transcript-path that does not exist is named in words, exit 1, no raw errno."""
    r = ctl("learnings", "report", "--transcript-path", str(short_tmp / "nope.jsonl"))
    assert r.returncode == 1
    assert f"no such transcript: {short_tmp / 'nope.jsonl'}" in r.stderr
    assert "Errno" not in r.stderr and "Traceback" not in r.stderr


def test_broken_pipes_end_quietly(home, short_tmp):
    """`status`, `capture` and `learnings rule` into a closed pipe: no traceback on stderr."""
    t = home["claude"] / "projects" / "t.jsonl"  # transcripts are read only under the roots
    shutil.copyfile(REAL / "spotter/short.jsonl", t)
    d = Daemon(home["home"])
    try:
        for args in (["status"], ["capture", "--transcript", str(t)], ["learnings", "rule"]):
            r = into_closed_pipe([CTL, *args])
            assert r.returncode != 0, args  # the output did not all arrive
            assert r.stderr == "", (args, r.stderr)
    finally:
        d.stop()


# ---- the daemon's answers in words ---------------------------------------------------------------


def test_flush_of_an_unknown_session_fails(home):
    """`flush nosuchsession` names the session and exits 1."""
    d = Daemon(home["home"])
    try:
        r = ctl("flush", "nosuchsession")
        assert r.returncode == 1
        assert "unknown session: nosuchsession" in r.stderr
    finally:
        d.stop()


def test_rejected_events_are_logged_with_their_reason(home):
    """Events the daemon will not act on are counted and each is logged with why: a payload
    that is not a hook event, and a session id it will not key state on."""
    d = Daemon(home["home"])
    try:
        hook(b"[1, 2, 3]")
        hook(event("PreToolUse", sid="../../etc"))
        wait_for(lambda: d.status()["events"]["rejected"] == 2, what="two rejections")
        records = [json.loads(line) for line in d.output().splitlines()
                   if line.startswith("{") and "rejected" in line]
        reasons = [r["reason"] for r in records if r.get("event") == "event rejected"]
        assert any(r.startswith("not a hook event") for r in reasons), reasons
        assert any("invalid session id '../../etc'" in r for r in reasons), reasons
    finally:
        d.stop()


def test_errors_read_as_words():
    """Promoter findings print their message with the code after it, never the code alone."""
    f = Finding(family="shape", code="no_version", message="rev has no version 99")
    assert words.finding_text(f) == "rev has no version 99 (shape/no_version)"
    line = queue.intent_line(Intent(
        id="i1", status="rejected", source="reflector", created_at=0.0, findings=[f],
        proposal=Proposal(action="create", skill="x", layer="user")))
    assert "rev has no version 99" in line
    assert words.finding_text(Finding(family="safe", code="secret")) == "safe: secret"


def test_counts_agree_with_their_nouns():
    """1 event, 2 events, 0 events."""
    assert [words.plural(n, "event") for n in (0, 1, 2)] == ["0 events", "1 event", "2 events"]


@pytest.fixture
def no_backend(home, monkeypatch):
    """A daemon with no reflector backend at all (auto, no API key, no `claude` on PATH) and a
    session in a project with a real transcript and enough work for a job."""
    monkeypatch.setenv("PATH", str(BIN))
    monkeypatch.setenv("AUTOHARNESS_REFLECT_EVERY", "2")
    project = home["tmp"] / "proj"
    project.mkdir()
    slug = home["claude"] / "projects" / project_slug(str(project))
    slug.mkdir(parents=True)
    transcript = slug / "sess-nb.jsonl"
    shutil.copyfile(REAL / "spotter/short.jsonl", transcript)
    d = Daemon(home["home"])
    fields = {"transcript_path": str(transcript), "cwd": str(project)}
    yield {"daemon": d, "project": project, "fields": fields}
    d.stop()


def test_missing_backend_is_said_wherever_jobs_wait(no_backend):
    """No backend: `flush` and `learn` warn that their job will wait and why, `status` shows
    it, `doctor` fails the jobs check with the reason, and `replay` says the jobs have not run
    (exit 1) instead of "the reflector proposed nothing"."""
    f = no_backend["fields"]
    r = ctl("status")
    assert "no reflector backend" in r.stdout and "jobs will wait" in r.stdout
    hook(pre_tool("sess-nb", **f))
    r = ctl("flush", "sess-nb")
    assert r.returncode == 0, r.stderr
    assert "queued" in r.stdout and "no reflector backend" in r.stderr
    r = ctl("learn", "--session", "sess-nb", "always read the server's first error")
    assert r.returncode == 0 and "no reflector backend" in r.stderr
    r = ctl("status")
    assert "WAITING" in r.stdout and "no reflector backend" in r.stdout
    r = ctl("doctor", "--json", "--project", str(no_backend["project"]))
    jobs = next(c for c in json.loads(r.stdout)["checks"] if c["name"] == "jobs")
    assert not jobs["ok"] and "no reflector backend" in jobs["detail"]
    r = ctl("replay", str(REAL / "spotter/short.jsonl"), "--project", str(no_backend["project"]),
            "--wait", "120")
    assert r.returncode == 1
    assert "no reflector backend" in r.stderr and "proposed nothing" not in r.stdout


# ---- service, doctor, install ------------------------------------------------------------------


def test_service_verbs_are_inverse_without_a_user_manager(home, short_tmp):
    """systemctl present, no user manager: install writes nothing (exit 1, says why);
    uninstall removes units an earlier install left, and exits 0."""
    bindir = short_tmp / "bin"
    bindir.mkdir()
    (bindir / "systemctl").write_text('#!/bin/sh\necho "Failed to connect to bus" >&2\nexit 1\n')
    (bindir / "systemctl").chmod(0o755)
    env = dict(os.environ, PATH=str(bindir), XDG_CONFIG_HOME=str(short_tmp / "cfg"))
    unit_dir = short_tmp / "cfg" / "systemd" / "user"
    r = subprocess.run([CTL, "service", "install"], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 1 and "Failed to connect to bus" in r.stderr
    assert not unit_dir.exists() or not any(unit_dir.iterdir())
    unit_dir.mkdir(parents=True, exist_ok=True)
    for name in ("autoharness.service", "autoharness.socket"):  # left by an older version
        (unit_dir / name).write_text("# autoharness unit\n")
    (unit_dir / "other.service").write_text("[Unit]\n")
    r = subprocess.run([CTL, "service", "uninstall"], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in unit_dir.iterdir()) == ["other.service"]


def _doctor(env=None):
    r = subprocess.run([CTL, "doctor", "--json"], capture_output=True, text=True, timeout=60,
                       env=env or dict(os.environ))
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, {c["name"]: c for c in json.loads(r.stdout)["checks"]}


def test_doctor_survives_a_file_where_the_state_dir_should_be(home, short_tmp):
    """AUTOHARNESS_HOME a file: doctor does not crash; the state check names the file and
    the `mv` that fixes it."""
    f = short_tmp / "not-a-dir"
    f.write_text("")
    code, checks = _doctor(dict(os.environ, AUTOHARNESS_HOME=str(f)))
    assert code == 1
    assert not checks["state"]["ok"] and f"{f} is a file" in checks["state"]["detail"]
    assert f"mv {f} {f}.old" in checks["state"]["fix"]
    assert not checks["socket"]["ok"]
    # neither `status` nor the daemon check sends the user to `start`, which would fail
    assert "start it" not in checks["daemon"]["fix"]
    assert f"mv {f} {f}.old" in checks["daemon"]["fix"]
    r = subprocess.run([CTL, "status"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, AUTOHARNESS_HOME=str(f)))
    assert r.returncode == 1 and "autoharnessctl start" not in r.stderr
    assert f"it cannot start: {f} is a file" in r.stderr and f"mv {f} {f}.old" in r.stderr


def test_doctor_shows_why_no_daemon_was_started(home):
    """A state dir open to others (mode 777): the hook's autostart writes nothing there (no
    log, lock or spool record: another user could have planted links in it) and starts no
    daemon; doctor names the mode and `chmod 700`, and that no daemon runs."""
    state = home["home"] / "state"
    state.mkdir()
    os.chmod(state, 0o777)
    assert hook(pre_tool("sess-777"), env={"AUTOHARNESS_AUTOSTART": "1"}).returncode == 0
    code, checks = _doctor()
    assert code == 1
    assert not checks["state"]["ok"] and checks["state"]["fix"] == f"chmod 700 {state}"
    assert "open to other users" in checks["state"]["detail"]
    assert not checks["daemon"]["ok"]
    assert os.listdir(state) == []


def test_doctor_shows_why_the_daemon_refused_to_start(home):
    """A config the daemon refuses: the hook's autostart starts it, it exits with its reason
    in its log, and doctor shows that refusal from the log."""
    (home["home"] / "config.toml").write_text("reflect_every = 0\n")
    hook(pre_tool("sess-bad"), env={"AUTOHARNESS_AUTOSTART": "1"})
    log = home["home"] / "state" / "daemon.log"
    wait_for(lambda: log.exists() and "`reflect_every`" in log.read_text(),
             what="the refused start in the log")
    code, checks = _doctor()
    assert code == 1
    assert "`reflect_every`" in checks["daemon"]["detail"]
    assert str(log) in checks["daemon"]["detail"]


def test_doctor_on_a_read_only_state_dir(short_tmp):
    """An unwritable state dir or a read-only filesystem fails with that cause, never as
    "0 MB free". (Injected: the tests may run as root, whom permissions do not stop.)"""
    d = short_tmp / "state"
    d.mkdir(mode=0o700)
    c = checks.check_state(str(d), writable=lambda _: "Read-only file system")
    assert not c.ok and "not writable (Read-only file system)" in c.detail

    class RO:
        f_flag = os.ST_RDONLY

    c = checks.check_disk(str(d), statvfs=lambda _: RO())
    assert not c.ok and "read-only filesystem" in c.detail and "MB" not in c.detail
    assert checks.check_state(str(d)).ok  # and the real probe passes on a writable dir


def test_install_remove_restores_settings_byte_for_byte(home, short_tmp):
    """A settings file in the user's own style (4-space indent, inline arrays, no final
    newline) comes back byte for byte after install then --remove; while installed it keeps
    its indent."""
    settings = home["claude"] / "settings.json"
    original = (b'{\n    "model": "opus",\n    "permissions": {"allow": ["Bash(ls)", "Read"]},'
                b'\n    "env": {\n        "FOO": "1"\n    }\n}')
    settings.write_bytes(original)

    def run(*a):
        return subprocess.run([CTL, *a], capture_output=True, text=True, timeout=60, cwd=short_tmp)

    assert run("install").returncode == 0
    installed = settings.read_bytes()
    assert installed != original and b'\n    "model": "opus",' in installed
    r = run("install", "--remove")
    assert r.returncode == 0, r.stderr
    assert settings.read_bytes() == original


def test_start_runs_the_daemon_in_the_background(home):
    """`autoharnessctl start` returns once the daemon answers, leaves it running detached with
    its log in the state dir; a second `start` says it already runs; `stop` ends it."""
    r = ctl("start")
    try:
        assert r.returncode == 0, r.stderr
        assert "started autoharnessd" in r.stdout
        st = json.loads(ctl("status", "--json").stdout)
        assert f"pid {st['pid']}" in r.stdout
        assert (home["home"] / "state" / "daemon.log").exists()
        again = ctl("start")
        assert again.returncode == 0 and "already running" in again.stdout
    finally:
        ctl("stop")
    wait_for(lambda: ctl("status").returncode == 1, what="the daemon to stop")


def test_start_says_why_the_daemon_did_not_start(home):
    """A daemon that refuses to start (a config it rejects): `start` exits 1 with the daemon's
    own reason, taken from its log. A state dir open to others gets nothing written (not even
    the log), and `start` says so with the fix."""
    (home["home"] / "config.toml").write_text("reflect_every = 0\n")
    r = ctl("start")
    assert r.returncode == 1
    assert "did not start" in r.stderr and "`reflect_every`" in r.stderr
    (home["home"] / "config.toml").unlink()
    state = home["home"] / "state"
    os.chmod(state, 0o777)
    before = sorted(os.listdir(state))
    r = ctl("start")
    assert r.returncode == 1
    assert "nothing was written there" in r.stderr and f"chmod 700 {state}" in r.stderr
    assert sorted(os.listdir(state)) == before
