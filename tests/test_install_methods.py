"""Every install method the README's quick start offers, run as written (pipx, uv, the plain
venv) in a fresh HOME, and then every way the README offers of running the CLI after it:
`autoharnessctl` on PATH, the programs by their full path, and `python -m claude_autoharness`
with the Python the README names. pipx and uv are installed from PyPI into a venv of their own
(a stock machine has neither); the installs fetch autoharness's dependencies. Slower than the
rest: about a minute per method. Under CI (CI=true) a tool that cannot be had fails the test."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from claude_autoharness.protocol import VERSION
from conftest import REPO
from harness import wait_for

README = (REPO / "README.md").read_text()
QUICK = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
COMMANDS = {name: next(block.strip() for block in re.findall(r"```sh\n(.*?)```", QUICK, re.S)
                       if marker in block)
            for name, marker in (("pipx", "pipx install ."), ("uv", "uv tool install ."),
                                 ("venv", "python3 -m venv"))}
UNDER_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="module")
def tools(tmp_path_factory) -> Path:
    """A venv with pipx and uv from PyPI: the README's "any other, with pip" way to get them."""
    root = tmp_path_factory.mktemp("tools")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=300)
    r = subprocess.run([str(root / "venv" / "bin" / "pip"), "install", "-q", "pipx", "uv"],
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        why = ("pipx and uv could not be installed from PyPI (" + r.stderr.strip()[-300:]
               + "): these tests need PyPI reachable")
        if UNDER_CI:
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    return root / "venv" / "bin"


def _env(home: Path, tools: Path | None) -> dict:
    """A stranger's shell: a fresh HOME, nothing of autoharness's or Claude Code's set, the
    PATH step done (`~/.local/bin` on it), python3 the interpreter the tests run with."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AUTOHARNESS_", "ANTHROPIC_", "CLAUDE_", "XDG_", "PIPX_", "UV_",
                                "VIRTUAL_ENV"))}
    path = [str(home / ".local" / "bin"), os.path.dirname(sys.executable), "/usr/bin", "/bin"]
    if tools is not None:
        path.insert(0, str(tools))
    env.update(HOME=str(home), PATH=os.pathsep.join(path), AUTOHARNESS_AUTOSTART="0")
    return env


def _run(argv, env, cwd=None, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("method", ["pipx", "uv", "venv"])
def test_each_install_method_as_written_then_each_way_to_run_the_cli(method, request, short_tmp):
    tools = request.getfixturevalue("tools") if method != "venv" else None
    env = _env(short_tmp, tools)
    sock = short_tmp / ".local" / "state" / "autoharness" / "run" / "autoharness.sock"
    try:
        r = _run(["bash", "-c", COMMANDS[method]], env, cwd=REPO)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert "started autoharnessd" in r.stdout, r.stdout
        bindir = (short_tmp / ".local" / "bin" if method != "venv"
                  else short_tmp / ".local" / "share" / "autoharness" / "bin")
        if method == "venv":  # its `export PATH=...`, as the README says to keep
            env["PATH"] = f"{bindir}{os.pathsep}{env['PATH']}"
        ways = [["autoharnessctl"], [str(bindir / "autoharnessctl")]]
        if method == "venv":  # the one Python the README says has the module
            ways.append([str(bindir / "python"), "-m", "claude_autoharness"])
        for way in ways:
            out = _run([*way, "--version"], env, timeout=120)
            assert out.stdout.strip() == f"autoharnessctl {VERSION}", (way, out.stderr)
            status = _run([*way, "status", "--json"], env, timeout=120)
            assert status.returncode == 0 and json.loads(status.stdout)["version"] == VERSION
        hook = _run([str(bindir / "autoharness-hook"), "--help"], env, timeout=120)
        assert hook.returncode == 0 and "usage: autoharness-hook" in hook.stdout, hook.stderr
        doctor = json.loads(_run(["autoharnessctl", "doctor", "--json"], env, timeout=120).stdout)
        checks = {c["name"]: c for c in doctor["checks"]}
        assert checks["daemon"]["ok"] and checks["version"]["ok"], checks
        if tools is not None:  # as the README says: a python3 of its own lacks the module
            plain = _run([str(tools / "python"), "-I", "-m", "claude_autoharness", "--version"],
                         env)
            assert plain.returncode != 0 and "No module named" in plain.stderr
            assert "the system's `python3` does not have it" in README.replace("\n", " ")
    finally:
        if sock.exists():
            _run(["autoharnessctl", "stop"], env, timeout=120)
            wait_for(lambda: not sock.exists(), 30, "the daemon to stop")
