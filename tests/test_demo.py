"""`autoharnessctl demo`: a newcomer with no model backend sees the whole loop once, on their
own machine: a session, a lesson, a landing by the real promoter, the next session's context;
every line says it is a demonstration, and nothing is left behind (its home, its daemon) or
touched (the user's own state and Claude config). Real CLI, real daemon, real hook client."""

import os
import re
from pathlib import Path

from harness import ctl


def _tree(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


def test_the_demo_shows_the_loop_and_leaves_nothing_behind(home):
    before = (_tree(home["home"]), _tree(home["claude"]))
    r = ctl("demo", timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert all(line.startswith(("[demo] ", "    ")) or not line.strip() for line in lines)
    assert "a DEMONSTRATION in a throw-away home" in lines[0]
    out = r.stdout
    assert "the promoter checked its quote against the session and landed it" in out
    assert "    name: migrate-before-integration-tests" in out
    assert re.search(r"intent i-[0-9a-f]+: landed", out)
    assert "landed create migrate-before-integration-tests [project]" in out  # next session
    base = re.search(r"throw-away home \((\S+)\)", lines[0]).group(1)
    pid = int(re.search(r"started a daemon for it \(pid (\d+)\)", out).group(1))
    assert lines[-1] == f"[demo] stopped its daemon and deleted {base}"
    assert not os.path.exists(base)
    assert not os.path.exists(f"/proc/{pid}") or "zombie" in Path(
        f"/proc/{pid}/status").read_text().lower()
    assert (_tree(home["home"]), _tree(home["claude"])) == before
