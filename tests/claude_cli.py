"""Locate (or install) the real Claude Code CLI for the end-to-end tests.

The CLI comes from the npm package `@anthropic-ai/claude-code`; its platform package ships the
native binary, so no install script has to run. It is installed into `.cache/claude-code/` inside
the checkout (gitignored), by `.ci/run` or, on first use, by `claude_cli_path()` when npm is on
PATH. `AUTOHARNESS_TEST_CLAUDE` names a binary to use instead.

Use the `claude_cli` fixture (tests/conftest.py): when the CLI is not installed and cannot be
(npm absent, or npm could not fetch it: no network, no reachable registry) the tests that need
it are skipped with one reason saying what they need and how to get it; under CI (`CI=true`)
they fail instead, never skip.
"""

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# AUTOHARNESS_TEST_CLAUDE_CACHE moves the install dir (a test of the no-registry case uses it)
CACHE = Path(os.environ.get("AUTOHARNESS_TEST_CLAUDE_CACHE") or REPO / ".cache" / "claude-code")
# The version the tests were written against: its skill listing, hook output and hook `if:` rules
# are what the end-to-end tests check. A cached install of another version is replaced.
VERSION = "2.1.328"
PACKAGE = f"@anthropic-ai/claude-code@{VERSION}"
BIN = CACHE / "node_modules" / ".bin" / "claude"
HOW = (f"these tests need the real Claude Code CLI (npm package {PACKAGE}, about 235 MB): run "
       f"`npm install --prefix .cache/claude-code {PACKAGE}` in the checkout with the npm "
       "registry reachable, or set AUTOHARNESS_TEST_CLAUDE=/path/to/claude")
NO_NPM = f"the CLI is not installed and npm is absent (install Node.js with npm); {HOW}"


class CliUnavailable(Exception):
    """The CLI is missing and cannot be installed here (npm absent, or the install failed):
    a reason to skip, said once for every test that needs it (a failure under CI)."""


def _runs(path: Path, version: str = "") -> bool:
    """Whether `path --version` answers as Claude Code (and as `version`, when one is named)."""
    try:
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=60)
    except OSError:
        return False
    if out.returncode != 0 or "Claude Code" not in out.stdout:
        return False
    return not version or out.stdout.split()[:1] == [version]


def install(npm: str) -> None:
    """`npm install` the CLI into the cache dir; raise CliUnavailable with the end of npm's
    output when it fails (most often: no network or no reachable registry)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    try:
        out = subprocess.run(
            [npm, "install", "--prefix", str(CACHE), "--no-audit", "--no-fund", "--no-save",
             "--loglevel=error", "--fetch-retries=1", PACKAGE],
            capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise CliUnavailable(f"`npm install {PACKAGE}` did not finish in 600 s; {HOW}") from None
    if out.returncode != 0:
        tail = " ".join((out.stderr or out.stdout).strip().splitlines()[-3:])
        raise CliUnavailable(f"`npm install {PACKAGE}` failed ({out.returncode}: {tail}); {HOW}")


def claude_cli_path() -> Path:
    """The path of a working `claude` binary; installs it with npm when missing.

    Raises CliUnavailable when it is missing and npm is absent or cannot install it,
    RuntimeError when the installed binary does not run.
    """
    override = os.environ.get("AUTOHARNESS_TEST_CLAUDE")
    if override:
        path = Path(override)
        if not _runs(path):
            raise RuntimeError(f"AUTOHARNESS_TEST_CLAUDE={override} does not run `--version`")
        return path
    if BIN.exists() and _runs(BIN, VERSION):
        return BIN
    npm = shutil.which("npm")
    if not npm:
        raise CliUnavailable(NO_NPM)
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".install-lock", "w") as lock:  # parallel workers install it once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (BIN.exists() and _runs(BIN, VERSION)):
            install(npm)
    if not _runs(BIN, VERSION):
        raise RuntimeError(f"{BIN} was installed by npm but does not run `--version`")
    return BIN


def cli_version(path: Path) -> str:
    out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=60)
    return out.stdout.strip()
