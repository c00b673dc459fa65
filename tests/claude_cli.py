"""Locate (or install) the real Claude Code CLI for the end-to-end tests.

The CLI comes from the npm package `@anthropic-ai/claude-code`; its platform package ships the
native binary, so no install script has to run. It is installed into `.cache/claude-code/` inside
the checkout (gitignored), by `.ci/run` or, on first use, by `claude_cli_path()` when npm is on
PATH. `AUTOHARNESS_TEST_CLAUDE` names a binary to use instead.

Use the `claude_cli` fixture (tests/conftest.py): it skips, with the reason, only when the CLI
is not installed and npm is absent; a failed install is a test error.
"""

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".cache" / "claude-code"
PACKAGE = "@anthropic-ai/claude-code@2"
BIN = CACHE / "node_modules" / ".bin" / "claude"
NO_NPM = ("the real Claude Code CLI is not installed and npm is absent: install Node.js with npm "
          f"(or run `npm install --prefix .cache/claude-code {PACKAGE}` in the checkout)")


class CliUnavailable(Exception):
    """The CLI is missing and cannot be installed here (npm absent): a reason to skip."""


def _runs(path: Path) -> bool:
    try:
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=60)
    except OSError:
        return False
    return out.returncode == 0 and "Claude Code" in out.stdout


def install(npm: str) -> None:
    """`npm install` the CLI into the cache dir; raise RuntimeError with npm's output on failure."""
    CACHE.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(
        [npm, "install", "--prefix", str(CACHE), "--no-audit", "--no-fund", "--no-save",
         "--loglevel=error", PACKAGE],
        capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"npm install {PACKAGE} failed ({out.returncode}):\n"
                           f"{out.stdout}\n{out.stderr}")


def claude_cli_path() -> Path:
    """The path of a working `claude` binary; installs it with npm when missing.

    Raises CliUnavailable when it is missing and npm is absent, RuntimeError when the install
    fails or the installed binary does not run.
    """
    override = os.environ.get("AUTOHARNESS_TEST_CLAUDE")
    if override:
        path = Path(override)
        if not _runs(path):
            raise RuntimeError(f"AUTOHARNESS_TEST_CLAUDE={override} does not run `--version`")
        return path
    if BIN.exists() and _runs(BIN):
        return BIN
    npm = shutil.which("npm")
    if not npm:
        raise CliUnavailable(NO_NPM)
    install(npm)
    if not _runs(BIN):
        raise RuntimeError(f"{BIN} was installed by npm but does not run `--version`")
    return BIN


def cli_version(path: Path) -> str:
    out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=60)
    return out.stdout.strip()
