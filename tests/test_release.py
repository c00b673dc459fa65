"""Release artefacts: the sdist and wheel build, carry the right metadata (name, version,
licence, the README as a Markdown description, entry points, the hook script, package data),
install into a clean venv whose programs run (`--version`, `doctor`, `install`), and the
README's upgrade path keeps a daemon's sessions, jobs and landed skills across a reinstall and
restart. Built once a session (the `dist` fixture); installs fetch dependencies with pip."""

import email
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from claude_autoharness.protocol import VERSION
from claude_autoharness.protocol.paths import project_slug
from conftest import REPO
from fake_anthropic import FakeAnthropic, tool_reply
from harness import wait_for
from promote_support import BODY, EVIDENCE, desc_for

UPGRADE = (REPO / "README.md").read_text().split("## Upgrade", 1)[1].split("\n## ", 1)[0]
UPGRADE_SH = UPGRADE.split("```sh\n", 1)[1].split("```", 1)[0]
# the line that restarts the daemon after the reinstall (`stop && start`, or `restart`)
RESTART = next(line.strip() for line in UPGRADE_SH.splitlines()
               if line.startswith("autoharnessctl") and "start" in line)
PACKAGE_DATA = ("claude_autoharness/client/commands/learn.md",
                "claude_autoharness/client/commands/save-learnings.md",
                "claude_autoharness/systemd/autoharness.service",
                "claude_autoharness/systemd/autoharness.socket",
                "claude_autoharness/launchd/com.autoharness.daemon.plist",
                "claude_autoharness/daemon/capture/redact_rules.toml",
                "claude_autoharness/daemon/reflect/instructions.md",
                "claude_autoharness/daemon/reflect/curator.md",
                "claude_autoharness/daemon/learnings/rule.md",
                "claude_autoharness/protocol/py.typed")


def _metadata(text: str) -> email.message.Message:
    return email.message_from_string(text)


def test_the_wheel_carries_its_metadata_programs_and_data(dist):
    with zipfile.ZipFile(dist["wheel"]) as whl:
        names = set(whl.namelist())
        info = f"claude_autoharness-{VERSION}.dist-info"
        meta = _metadata(whl.read(f"{info}/METADATA").decode())
        entry = whl.read(f"{info}/entry_points.txt").decode()
        hook = whl.read(f"claude_autoharness-{VERSION}.data/scripts/autoharness-hook")
    assert meta["Name"] == "claude-autoharness" and meta["Version"] == VERSION
    assert meta["License"] == "MIT" and meta["Requires-Python"] == ">=3.11"
    assert meta["Description-Content-Type"] == "text/markdown"
    assert meta.get_payload().strip() == (REPO / "README.md").read_text().strip()
    assert "autoharnessctl = claude_autoharness.client.ctl:main" in entry
    assert "autoharnessd = claude_autoharness.daemon.app:main" in entry
    assert hook.startswith(b"#!python") and b"claude_autoharness.client.hook" in hook
    assert f"{info}/licenses/LICENSE" in names
    missing = [p for p in PACKAGE_DATA if p not in names]
    assert not missing, missing
    assert not [n for n in names if n.startswith(("tests/", "bench/"))]


def test_the_sdist_builds_the_same_release(dist):
    """The sdist has what a build from it needs (the wheel above was built from it)."""
    with tarfile.open(dist["sdist"]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        pkg_info = tar.extractfile(f"claude_autoharness-{VERSION}/PKG-INFO")
        assert pkg_info is not None
        meta = _metadata(pkg_info.read().decode())
    assert meta["Name"] == "claude-autoharness" and meta["Version"] == VERSION
    for need in ("README.md", "LICENSE", "pyproject.toml", "client/autoharness-hook",
                 "systemd/autoharness.service", "commands/learn.md",
                 "daemon/capture/redact_rules.toml", "__main__.py"):
        assert need in names, need


def _venv(where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    return where / "bin"


def _pip(bindir: Path, *args: str) -> None:
    r = subprocess.run([str(bindir / "python"), "-m", "pip", "install", "-q", *args],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def _env(home: Path, bindir: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AUTOHARNESS_", "ANTHROPIC_", "CLAUDE_", "XDG_", "VIRTUAL_ENV"))}
    env.update(AUTOHARNESS_HOME=str(home / "ah"), CLAUDE_CONFIG_DIR=str(home / "claude"),
               AUTOHARNESS_AUTOSTART="0", PATH=f"{bindir}{os.pathsep}{os.defpath}", **extra)
    (home / "claude" / "projects").mkdir(parents=True, exist_ok=True)
    return env


def _run(bindir: Path, prog: str, *args: str, env: dict, code: int | None = 0):
    r = subprocess.run([str(bindir / prog), *args], capture_output=True, text=True, env=env,
                       timeout=120, stdin=subprocess.DEVNULL)
    assert "Traceback" not in r.stderr, r.stderr
    if code is not None:
        assert r.returncode == code, (prog, args, r.stdout, r.stderr)
    return r


@pytest.fixture(scope="module")
def clean_install(dist, tmp_path_factory):
    """A fresh venv with the wheel (and its dependencies) installed, nothing else."""
    root = tmp_path_factory.mktemp("clean")
    bindir = _venv(root / "venv")
    _pip(bindir, str(dist["wheel"]))
    return bindir


def test_the_installed_programs_run(clean_install, short_tmp):
    """`--version` of each program, `python -m claude_autoharness`, the hook's usage, and
    `install` then `doctor` against temp homes: the installation checks out."""
    bindir = clean_install
    env = _env(short_tmp, bindir)
    assert _run(bindir, "autoharnessctl", "--version", env=env).stdout.strip() == \
        f"autoharnessctl {VERSION}"
    assert _run(bindir, "autoharnessd", "--version", env=env).stdout.strip() == \
        f"autoharnessd {VERSION}"
    assert _run(bindir, "python", "-m", "claude_autoharness", "--version",
                env=env).stdout.strip() == f"autoharnessctl {VERSION}"
    assert "usage: autoharness-hook" in _run(bindir, "autoharness-hook", "--help", env=env).stdout
    _run(bindir, "autoharnessctl", "install", env=env)
    r = _run(bindir, "autoharnessctl", "doctor", "--json", env=env, code=None)
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    for name in ("state", "socket", "config", "hooks", "duplicates", "commands", "disk"):
        assert checks[name]["ok"], checks[name]
    assert not checks["daemon"]["ok"]  # not started: said, with the fix
    settings = json.loads((short_tmp / "claude" / "settings.json").read_text())
    assert str(bindir / "autoharness-hook") in json.dumps(settings)


def _old_wheel(dist, where: Path, version: str) -> Path:
    """The release as an earlier version would have been: the sdist with its version set back."""
    with tarfile.open(dist["sdist"]) as tar:
        tar.extractall(where, filter="data")
    src = where / f"claude_autoharness-{VERSION}"
    for rel, old, new in (("pyproject.toml", f'version = "{VERSION}"', f'version = "{version}"'),
                          ("protocol/__init__.py", f'VERSION = "{VERSION}"',
                           f'VERSION = "{version}"')):
        text = (src / rel).read_text()
        assert old in text, rel
        (src / rel).write_text(text.replace(old, new))
    shutil.rmtree(src / "claude_autoharness.egg-info", ignore_errors=True)
    out = where / "old-dist"
    r = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir",
                        str(out), str(src)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    [wheel] = out.glob("*.whl")
    return wheel


def _status(bindir: Path, env: dict) -> dict:
    return json.loads(_run(bindir, "autoharnessctl", "status", "--json", env=env).stdout)


def test_the_readme_upgrade_keeps_sessions_jobs_and_skills(dist, tmp_path, short_tmp):
    """An earlier version installed the README's plain-venv way, its daemon with two sessions,
    a finished job that landed a skill and a job waiting (the token budget is spent); then the
    README's upgrade, as it is written: `pip install --upgrade .` from the clone, its restart
    line, `install && doctor`. The new daemon is the new version and has
    every session, job, intent and skill."""
    assert "~/.local/share/autoharness/bin/pip install --upgrade ." in UPGRADE_SH
    old = _old_wheel(dist, tmp_path, "0.0.9")
    bindir = _venv(short_tmp / "venv")
    _pip(bindir, str(old))
    project = short_tmp / "proj"
    project.mkdir()
    with FakeAnthropic() as fake:
        env = _env(short_tmp, bindir, ANTHROPIC_API_KEY="sk-ant-test-not-a-real-key",
                   ANTHROPIC_BASE_URL=fake.base_url, AUTOHARNESS_REFLECTOR_DAILY_TOKEN_BUDGET="1")
        slug = short_tmp / "claude" / "projects" / project_slug(str(project))
        slug.mkdir(parents=True)
        null = {"old": None, "new": None, "path": None, "content": None}
        fake.push(tool_reply({"proposals": [{
            "action": "create", "skill": "check-before-push", "layer": "user",
            "reason": "the user asked for it", "evidence": EVIDENCE,
            "description": desc_for("check-before-push"), "body": BODY, **null}]}))
        sessions = ("sess-up-1", "sess-up-2")
        for sid in sessions:
            t = slug / f"{sid}.jsonl"
            t.write_text(json.dumps({"type": "user", "message": {"role": "user",
                                                                   "content": EVIDENCE}}) + "\n")
            base = {"session_id": sid, "transcript_path": str(t), "cwd": str(project)}
            for ev in ("SessionStart", "PreToolUse"):
                r = subprocess.run([str(bindir / "autoharness-hook")], env=env, timeout=60,
                                   input=json.dumps(dict(base, hook_event_name=ev,
                                                         tool_name="Bash")).encode())
                assert r.returncode == 0
        try:
            assert "started autoharnessd" in _run(bindir, "autoharnessctl", "start",
                                                  env=env).stdout
            wait_for(lambda: {s["session_id"] for s in _status(bindir, env)["sessions"]}
                     >= set(sessions), 60, "the spooled events replayed")
            _run(bindir, "autoharnessctl", "flush", "sess-up-1", env=env)
            wait_for(lambda: _status(bindir, env)["jobs"]["done"] == 1, 60, "the first job")
            _run(bindir, "autoharnessctl", "flush", "sess-up-2", env=env)
            before = _status(bindir, env)
            assert before["version"] == "0.0.9" and before["jobs"]["pending"] == 1, before["jobs"]
            skill = short_tmp / "claude" / "skills" / "check-before-push" / "SKILL.md"
            assert skill.exists()
            intents = json.loads(_run(bindir, "autoharnessctl", "queue", "list", "--json",
                                      env=env).stdout)
            assert [i["status"] for i in intents] == ["landed"]

            # the README's upgrade, from the clone: its venv reinstall, then its restart line
            r = subprocess.run([str(bindir / "pip"), "install", "-q", "--upgrade", "."],
                               cwd=REPO, capture_output=True, text=True, timeout=900)
            assert r.returncode == 0, r.stderr[-3000:]
            r = subprocess.run(["bash", "-c", RESTART], env=env, capture_output=True, text=True,
                               timeout=300, stdin=subprocess.DEVNULL)
            assert r.returncode == 0, (RESTART, r.stdout, r.stderr)
            after = _status(bindir, env)
            assert after["version"] == VERSION and after["pid"] != before["pid"], after
            _run(bindir, "autoharnessctl", "install", env=env)
            doctor = json.loads(_run(bindir, "autoharnessctl", "doctor", "--json", env=env,
                                     code=None).stdout)
            checks = {c["name"]: c for c in doctor["checks"]}
            for name in ("daemon", "version", "state", "config", "hooks", "commands"):
                assert checks[name]["ok"], checks[name]

            assert {s["session_id"] for s in after["sessions"]} >= set(sessions)
            assert after["jobs"]["done"] == 1 and after["jobs"]["pending"] == 1, after["jobs"]
            assert after["events"]["received"] == before["events"]["received"]
            assert skill.exists()
            listed = json.loads(_run(bindir, "autoharnessctl", "skills", "list", "--json",
                                     "--project", str(project), env=env).stdout)
            assert "check-before-push" in [s["name"] for s in listed]
            again = json.loads(_run(bindir, "autoharnessctl", "queue", "list", "--json",
                                    env=env).stdout)
            assert again == intents
        finally:
            _run(bindir, "autoharnessctl", "stop", env=env, code=None)
            sock = short_tmp / "ah" / "run" / "autoharness.sock"
            wait_for(lambda: not sock.exists(), 30, "the daemon to stop")
