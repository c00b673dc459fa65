"""Added wall time per tool call of the check hook (`autoharness-hook` with
AUTOHARNESS_HOOK=check, started as the settings install starts it: `python -I -S`), with 0,
10 and 200 live checks in its table, on a call no check matches and on one a check denies,
against a bare interpreter in the same run, interleaved.

The baselines: `python -I -S -c pass` (the same start without the hook's work) and
`python -c pass`. A call of a tool outside the check entry's matcher (Grep, Glob, Task, ...)
starts no process at all; one of a checked tool that no check names stops after the table's
first line (also measured: "tool not in table"). No daemon is needed: the hook reads the table.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

from _common import BIN, stop, summary, temp_home, timed


def event(tool: str, command: str) -> bytes:
    key = "command" if tool == "Bash" else "pattern"
    return json.dumps({
        "session_id": "c45af7b1-cb7c-4e51-93db-8cbb250a877a",
        "transcript_path": "/home/user/.claude/projects/-home-user-proj/c45af7b1.jsonl",
        "cwd": "/home/user/proj", "hook_event_name": "PreToolUse", "permission_mode": "default",
        "tool_name": tool, "tool_input": {key: command, "description": "Run tests"},
        "tool_use_id": "toolu_01A",
    }).encode()


def write_table(env: dict, n: int) -> None:
    """A table of `n` checks, the last of them about `pytest` (denied)."""
    os.environ["AUTOHARNESS_HOME"] = env["AUTOHARNESS_HOME"]
    from claude_autoharness.daemon.promote.checktable import table_bytes
    from claude_autoharness.protocol import paths

    path = paths.checks_table_file()
    if n == 0:
        if os.path.exists(path):
            os.unlink(path)
        return
    checks = [{"skill": f"lesson-{i}", "layer": "project", "dir": f"/home/user/proj/s/{i}",
               "root": "/home/user/proj", "rule": f"Bash(tool{i} --flag *)", "tool": "Bash",
               "spec": f"tool{i} --flag *", "action": "remind", "message": f"use tool{i}"}
              for i in range(n - 1)]
    checks.append({"skill": "run-tests-with-uv", "layer": "project", "dir": "/home/user/proj/s/t",
                   "root": "/home/user/proj", "rule": "Bash(pytest *)", "tool": "Bash",
                   "spec": "pytest *", "action": "deny", "message": "use uv run pytest"})
    paths.make_private_dirs(paths.state_dir())
    with open(path, "wb") as f:
        f.write(table_bytes(checks))
    os.chmod(path, 0o600)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, default=60, help="runs of each command per table size")
    args = ap.parse_args()
    d, env = temp_home()
    env["AUTOHARNESS_HOOK"] = "check"
    hook = [sys.executable, "-I", "-S", str(BIN / "autoharness-hook")]
    bare_is = [sys.executable, "-I", "-S", "-c", "pass"]
    bare = [sys.executable, "-c", "pass"]
    cases = [("no match", event("Bash", "ls -la")), ("match (deny)", event("Bash", "pytest -q")),
             ("tool not in table", event("Read", "x"))]
    rows = []
    try:
        for size in (0, 10, 200):
            write_table(env, size)
            out = subprocess.run(hook, input=cases[1][1], env=env, capture_output=True).stdout
            assert (b"deny" in out) == (size > 0), out  # the table is read as meant
            for _ in range(5):
                for _, data in cases:
                    timed(hook, env, data)
                timed(bare_is, env, b"")
            times: dict[str, list[float]] = {name: [] for name, _ in cases}
            bi, b = [], []
            for _ in range(args.n):
                for name, data in cases:
                    times[name].append(timed(hook, env, data))
                bi.append(timed(bare_is, env, b""))
                b.append(timed(bare, env, b""))
            rows.append((size, times, bi, b))
    finally:
        stop(None, d)
    for size, times, bi, b in rows:
        base_is, base = statistics.median(bi), statistics.median(b)
        print(f"{size} checks: python -I -S -c pass {summary(bi)}; python -c pass {summary(b)}")
        for name, xs in times.items():
            m = statistics.median(xs)
            print(f"  {name:<18} {summary(xs)}  ratio to -I -S bare {m / base_is:.2f}, "
                  f"to python -c pass {m / base:.2f}, added {1000 * (m - base_is):.1f} ms")


if __name__ == "__main__":
    main()
