"""Shared fixtures: temp homes that never touch the real ~/.claude or state dir. At the end of
the run, a check that the suite left no process and no temp dir behind."""

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

import leaks
from claude_autoharness.daemon.promote.land import Promoter
from claude_autoharness.protocol.config import PromoterConfig

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "corpus"
REAL = CORPUS / "real"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def short_tmp(request):
    """A short temp dir under /tmp: Unix socket paths must stay under ~104 bytes."""
    d = tempfile.mkdtemp(prefix="ah-", dir="/tmp")
    yield Path(d)
    remove_tmp(d, request.node.nodeid)


WRITTEN_LATE: list[str] = []  # temp dirs something still wrote into after their test ended


def remove_tmp(d: str, nodeid: str) -> None:
    """Remove a test's temp dir. When something still writes into it after the test (a child
    still stopping, a thread finishing a save), one removal can leave the dir behind: then
    wait for the processes under it, retry, and name the test and what it wrote late in the
    run's summary. A dir that still cannot be removed is left to the end check, which fails."""
    shutil.rmtree(d, ignore_errors=True)
    if not os.path.lexists(d):
        return
    late = _contents(d)
    leaks.wait_gone([d], STOPPING_S)
    end = time.monotonic() + 5.0
    while os.path.lexists(d) and time.monotonic() < end:
        shutil.rmtree(d, ignore_errors=True)
        time.sleep(0.05)
    WRITTEN_LATE.append(f"  {nodeid}: {late or '(the dir itself)'}")


def _contents(d: str, most: int = 8) -> str:
    """What a dir holds, for a report line: its first `most` paths, sorted, and how many more."""
    found = sorted(os.path.relpath(os.path.join(root, name), d)
                   for root, dirs, files in os.walk(d) for name in dirs + files)
    more = f" (and {len(found) - most} more)" if len(found) > most else ""
    return ", ".join(found[:most]) + more


@pytest.fixture
def home(short_tmp, monkeypatch):
    """AUTOHARNESS_HOME and CLAUDE_CONFIG_DIR on temp dirs, for this process and its children."""
    ah = short_tmp / "h"
    claude = short_tmp / "claude"
    ah.mkdir(mode=0o700)
    (claude / "projects").mkdir(parents=True)
    monkeypatch.setenv("AUTOHARNESS_HOME", str(ah))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    for var in ("AUTOHARNESS_SOCKET", "AUTOHARNESS_CONFIG", "AUTOHARNESS_CHILD_SESSION",
                "AUTOHARNESS_DISABLE", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
                "XDG_RUNTIME_DIR", "NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AUTOHARNESS_AUTOSTART", "0")
    return {"home": ah, "claude": claude, "tmp": short_tmp}


def copy_corpus(name: str, dest: Path) -> Path:
    """Copy one real transcript (read-only corpus) into a temp dir; return the copy."""
    src = REAL / name
    out = dest / src.name
    shutil.copyfile(src, out)
    os.chmod(out, 0o600)
    return out


@pytest.fixture
def project(home):
    """A project with a skills dir and `scripts/migrate.sh` (the evidence tests' skills name it)."""
    proj = home["tmp"] / "proj"
    (proj / ".claude" / "skills").mkdir(parents=True)
    (proj / "scripts").mkdir()
    (proj / "scripts/migrate.sh").write_text("#!/bin/sh\n")  # migrate-first names it
    return proj


@pytest.fixture
def api(monkeypatch):
    """The fake Anthropic API on loopback, the environment pointed at it (reflect every 2
    calls)."""
    from fake_anthropic import FakeAnthropic

    with FakeAnthropic() as fake:
        for k, v in {"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key",
                     "ANTHROPIC_BASE_URL": fake.base_url, "AUTOHARNESS_REFLECT_EVERY": "2",
                     "AUTOHARNESS_REFLECTOR_BACKOFF_BASE_S": "0.05"}.items():
            monkeypatch.setenv(k, v)
        yield fake


@pytest.fixture(scope="session")
def claude_cli_or_why():
    """The real Claude Code CLI's path (see tests/claude_cli.py), installed into the checkout's
    `.cache/claude-code/` with npm when missing, or why it cannot be had: tried once a session."""
    from claude_cli import CliUnavailable, claude_cli_path

    try:
        return claude_cli_path()
    except CliUnavailable as e:
        return e


_CLI_REASON_SAID = []


@pytest.fixture
def claude_cli(claude_cli_or_why) -> Path:
    """The real Claude Code CLI binary. When it cannot be had (no npm, no reachable registry)
    the tests that need it skip, the first saying what they need and how to get it, the rest
    pointing there; under CI (CI=true) they fail instead."""
    if isinstance(claude_cli_or_why, Path):
        return claude_cli_or_why
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI=true, so the real-CLI tests must run: {claude_cli_or_why}",
                    pytrace=False)
    if _CLI_REASON_SAID:
        pytest.skip("needs the real Claude Code CLI: see the first skip of this kind above")
    _CLI_REASON_SAID.append(True)
    pytest.skip(str(claude_cli_or_why))


@pytest.fixture
def model():
    """The scripted streaming fake of the Messages API the real Claude Code CLI talks to."""
    from real_cli import CliModel

    with CliModel() as m:
        yield m


@pytest.fixture
def sandbox(claude_cli, model):
    """`sandbox(**env)`: a fresh user's home for the real CLI, closed (and its leftovers ended)
    after the test."""
    from real_cli import Sandbox

    boxes = []

    def make(**extra_env) -> Sandbox:
        box = Sandbox(claude_cli, model, {k: str(v) for k, v in extra_env.items()})
        boxes.append(box)
        return box

    yield make
    for box in boxes:
        box.close()


@pytest.fixture
def env(home):
    """A promoter on temp dirs, a project root, and a directory outside every skill tree."""
    proj = home["tmp"] / "proj"
    outside = home["tmp"] / "outside"
    (proj / ".claude" / "skills").mkdir(parents=True)
    (home["claude"] / "skills").mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("do not touch\n")
    pr = Promoter(PromoterConfig())
    pr.recover()
    return {"pr": pr, "proj": proj, "outside": outside, "claude": home["claude"],
            "skills": proj / ".claude" / "skills", "user_skills": home["claude"] / "skills",
            "trees": (proj, home["claude"], outside)}


@pytest.fixture(scope="session")
def dist(tmp_path_factory) -> dict[str, Path]:
    """The sdist and wheel, built once a session from the checkout as a release would be
    (`python -m build`, without isolation: the test extras bring setuptools and wheel, so
    no network is needed)."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out),
                        str(REPO)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    [sdist] = out.glob("*.tar.gz")
    [wheel] = out.glob("*.whl")
    return {"sdist": sdist, "wheel": wheel, "dir": out}


# ---- the run leaves nothing behind ---------------------------------------------------------

CREATED: dict[str, str] = {}  # every temp dir made through tempfile.mkdtemp: the test making it
_mkdtemp = tempfile.mkdtemp
LEAK_PREFIX = "ah"  # the suite's own temp dirs: ah-*, ahb-* (fixtures, sandboxes, benches)
# a daemon told to stop at teardown may still be saving its state; the leak check's own test
# sets it short for the run it makes, whose leaked process never stops by itself
STOPPING_S = float(os.environ.get("AUTOHARNESS_TEST_STOPPING_S", "15"))


def _tracking_mkdtemp(*args, **kwargs):
    d = _mkdtemp(*args, **kwargs)
    CREATED[os.path.abspath(d)] = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
    return d


def pytest_configure(config):
    tempfile.mkdtemp = _tracking_mkdtemp


def _roots(session) -> list[str]:
    roots = list(CREATED)
    factory = getattr(session.config, "_tmp_path_factory", None)
    base = getattr(factory, "_basetemp", None) if factory is not None else None
    if base is not None:
        roots.append(str(base))
    return roots


LEFT_BY_WORKERS: list[str] = []  # under pytest-xdist: what each worker's own check found


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist: a worker finished; its end check's findings are reported with ours."""
    output = getattr(node, "workeroutput", {})
    LEFT_BY_WORKERS.extend(output.get("left_behind", []))
    WRITTEN_LATE.extend(output.get("written_late", []))


def _left_behind(session) -> list[str]:
    """What outlived the tests of this process (now ended and removed), one line each."""
    left = leaks.wait_gone(_roots(session), STOPPING_S)
    leaks.kill(left)
    dirs = [d for d in CREATED
            if os.path.basename(d).startswith(LEAK_PREFIX) and os.path.lexists(d)]
    lines = [f"  process {pid}: {cmd}" for pid, cmd in left]
    for d in dirs:
        inside = _contents(d)
        lines.append(f"  temp dir {d}" + (f" of {CREATED[d]}" if CREATED[d] else "")
                     + (f", holding {inside}" if inside else ""))
        shutil.rmtree(d, ignore_errors=True)
    return lines


def pytest_sessionfinish(session, exitstatus):
    """Fail the run, naming them, if processes started under the run's temp dirs (a daemon a
    hook autostarted, a Claude Code CLI) outlived it, or if the suite's own temp dirs are
    still on disk; both are removed here, so the next run starts clean. Under pytest-xdist
    each worker checks its own and the controller fails the run for all of them."""
    found = _left_behind(session)
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller reports
        workeroutput["left_behind"] = found
        workeroutput["written_late"] = WRITTEN_LATE
        return
    found += LEFT_BY_WORKERS
    if WRITTEN_LATE:
        _say(session, ["written to after their test ended (then removed):", *WRITTEN_LATE],
             yellow=True)
    if not found:
        return
    _say(session, ["the test run left things behind (now removed):", *found], red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _say(session, lines: list[str], **markup) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for line in lines:
        if reporter is not None:
            reporter.write_line(line, **markup)
        else:
            print(line)
