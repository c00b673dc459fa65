"""Without the real Claude Code CLI and without a reachable npm registry, the tests that need
the CLI say once what they need and how to get it (npm is tried once), and skip; under CI
(`CI=true`) they fail instead. npm is pointed at a closed loopback port: nothing leaves."""

import os
import subprocess
import sys

from conftest import REPO

TESTS = '''
def test_one(claude_cli):
    pass


def test_two(claude_cli):
    pass
'''


def _run(tmp, ci: bool) -> subprocess.CompletedProcess:
    (tmp / "test_needs_cli.py").write_text(TESTS)
    env = {k: v for k, v in os.environ.items()
           if k not in ("CI", "AUTOHARNESS_TEST_CLAUDE") and not k.startswith("npm_config_")}
    env.update(AUTOHARNESS_TEST_CLAUDE_CACHE=str(tmp / "cache"),
               PYTHONPATH=str(REPO / "tests"), npm_config_registry="http://127.0.0.1:9/",
               npm_config_fetch_retries="0", npm_config_cache=str(tmp / "npm-cache"),
               npm_config_update_notifier="false", npm_config_offline="false")
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-ra", "-p", "conftest",
                           "-p", "no:cacheprovider", str(tmp / "test_needs_cli.py")],
                          cwd=tmp, env=env, capture_output=True, text=True, timeout=600)


def test_without_cli_or_registry_the_tests_say_once_what_they_need(short_tmp):
    r = _run(short_tmp, ci=False)
    assert r.returncode == 0, r.stdout + r.stderr
    skipped = [line for line in r.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) == 2 and "2 skipped" in r.stdout, r.stdout
    first, second = skipped
    assert "need the real Claude Code CLI" in first and "235 MB" in first
    assert "npm install --prefix .cache/claude-code" in first
    assert "AUTOHARNESS_TEST_CLAUDE" in first
    assert "see the first skip" in second and "npm install" not in second, second
    assert r.stdout.count("npm error") <= 3  # npm was tried once, its words said once


def test_under_ci_they_fail_instead_of_skipping(short_tmp):
    r = _run(short_tmp, ci=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "2 errors" in r.stdout and "skipped" not in r.stdout, r.stdout
    assert "CI=true, so the real-CLI tests must run" in r.stdout
