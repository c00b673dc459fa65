"""Wall time of `autoharness-hook` handling a PreToolUse with the daemon up, against
`python -c pass` on the same interpreter, interleaved in the same run. Target ratio ≤ 1.15.

Also measured: the hook started as `python -I -S autoharness-hook` (isolated, no `site`: the
hook imports only the standard library and finds the package in the venv's site-packages), and
the daemon-down path (the event spooled). And the commands as Claude Code runs them, through
`/bin/sh -c`: the one `autoharnessctl install` writes today (the interpreter with `-I -S`,
guarded so that a vanished install exits 0) against the old one (the script's path alone).

Run with the interpreter of the environment autoharness is installed in (a wheel install:
an editable install adds its own import finder to every start, and under `-S` the hook then
falls back to the normal site setup).
"""

import argparse
import json
import shlex
import statistics
import sys

from _common import BIN, start_daemon, stop, summary, temp_home, timed

from claude_autoharness.client import settings

PAYLOAD = json.dumps({
    "session_id": "c45af7b1-cb7c-4e51-93db-8cbb250a877a",
    "transcript_path": "/home/user/.claude/projects/-home-user-proj/c45af7b1.jsonl",
    "cwd": "/home/user/proj", "hook_event_name": "PreToolUse", "permission_mode": "default",
    "tool_name": "Bash", "tool_input": {"command": "pytest -q", "description": "Run tests"},
    "tool_use_id": "toolu_01A",
}).encode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, default=200, help="runs of each command")
    args = ap.parse_args()
    d, env = temp_home()
    p, _ = start_daemon(env)
    hook = [str(BIN / "autoharness-hook")]
    hook_is = [sys.executable, "-I", "-S", str(BIN / "autoharness-hook")]
    bare = [sys.executable, "-c", "pass"]
    script = str(BIN / "autoharness-hook")
    old_sh = ["/bin/sh", "-c", shlex.quote(script)]  # the script's path: what earlier versions wrote
    new_sh = ["/bin/sh", "-c", settings.settings_command(script, settings.script_python(script))]
    try:
        for _ in range(10):  # warm the page cache
            timed(hook, env, PAYLOAD)
            timed(hook_is, env, PAYLOAD)
            timed(bare, env, b"")
            timed(old_sh, env, PAYLOAD)
            timed(new_sh, env, PAYLOAD)
        h, hi, b, so, sn = [], [], [], [], []
        for _ in range(args.n):
            h.append(timed(hook, env, PAYLOAD))
            hi.append(timed(hook_is, env, PAYLOAD))
            b.append(timed(bare, env, b""))
            so.append(timed(old_sh, env, PAYLOAD))
            sn.append(timed(new_sh, env, PAYLOAD))
    finally:
        stop(p, d)
    # daemon down: the hook spools the event and exits (autostart off for the measurement)
    d, env = temp_home()
    down, b2 = [], []
    try:
        for _ in range(args.n // 2):
            down.append(timed(hook, env, PAYLOAD))
            b2.append(timed(bare, env, b""))
    finally:
        stop(None, d)
    base = statistics.median(b)
    print(f"autoharness-hook PreToolUse: {summary(h)}")
    print(f"python -I -S autoharness-hook: {summary(hi)}")
    print(f"python -c pass (baseline):   {summary(b)}")
    print(f"ratio (median hook / median baseline): {statistics.median(h) / base:.2f}  "
          "(target ≤ 1.15)")
    print(f"ratio with -I -S:                      {statistics.median(hi) / base:.2f}")
    print(f"sh -c, as installed before ({old_sh[2]}): {summary(so)}; ratio "
          f"{statistics.median(so) / base:.2f}")
    print(f"sh -c, as installed now (guarded, -I -S): {summary(sn)}; ratio "
          f"{statistics.median(sn) / base:.2f}; now/before "
          f"{statistics.median(sn) / statistics.median(so):.2f}")
    print(f"daemon down (spool + exit):  {summary(down)}; ratio to baseline "
          f"{statistics.median(down) / statistics.median(b2):.2f}")


if __name__ == "__main__":
    main()
