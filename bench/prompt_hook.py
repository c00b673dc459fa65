"""Wall time of `autoharness-hook` handling a UserPromptSubmit with the daemon up, against
`python -c pass` on the same interpreter, interleaved in the same run: a project without
skills, one with 200 skills and a prompt matching none, and the same with a prompt that matches
one (a fresh session each run, so the reminder is built and sent every time; a fresh session
matching nothing is measured too, to tell the session's cost from the reminder's).

The 200 skills are hand-written, with `listing.remind_hand_written` on: the daemon reads and
matches them exactly as it does learned ones, and a bench needs no promoter landings.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from _common import BIN, start_daemon, stop, summary, temp_home

N_SKILLS = 200


def payload(sid: str, cwd: str, prompt: str) -> bytes:
    return json.dumps({
        "session_id": sid, "transcript_path": f"{cwd}/{sid}.jsonl", "cwd": cwd,
        "hook_event_name": "UserPromptSubmit", "permission_mode": "default", "prompt": prompt,
    }).encode()


def timed(cmd: list[str], env: dict, data: bytes) -> tuple[float, bytes]:
    t = time.perf_counter()
    out = subprocess.run(cmd, input=data, env=env, capture_output=True, check=True).stdout
    return time.perf_counter() - t, out


def make_skills(root: str) -> None:
    for i in range(N_SKILLS):
        d = os.path.join(root, ".claude", "skills", f"task-{i:03d}")
        os.makedirs(d)
        with open(os.path.join(d, "SKILL.md"), "w") as f:
            f.write(f"---\nname: task-{i:03d}\ndescription: Use when handling ticket kind{i} "
                    f"in area{i}: follow the checklist.\n---\nDo the steps for {i}.\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, default=100, help="runs of each command")
    args = ap.parse_args()
    d, env = temp_home()
    env["AUTOHARNESS_LISTING_REMIND_HAND_WRITTEN"] = "true"
    empty, full = str(d / "empty"), str(d / "full")
    os.makedirs(empty)
    make_skills(full)
    p, _ = start_daemon(env)
    hook = [str(BIN / "autoharness-hook")]
    bare = [sys.executable, "-c", "pass"]
    cases = {"no skills": [], f"{N_SKILLS} skills, no match": [],
             f"{N_SKILLS} skills, no match, new session": [],
             f"{N_SKILLS} skills, a match": [], "python -c pass": []}
    reminded = 0
    try:
        for i in range(10):  # warm the page cache and the daemon's trigger index
            timed(hook, env, payload(f"warm-{i}", full, "nothing in common here"))
            timed(bare, env, b"")
        for i in range(args.n):
            cases["no skills"].append(timed(hook, env, payload("s-empty", empty, "ticket kind7"))[0])
            cases[f"{N_SKILLS} skills, no match"].append(
                timed(hook, env, payload("s-none", full, "write a haiku about autumn"))[0])
            cases[f"{N_SKILLS} skills, no match, new session"].append(
                timed(hook, env, payload(f"s-new-{i}", full, "write a haiku about autumn"))[0])
            t, out = timed(hook, env, payload(f"s-match-{i}", full,
                                               "please handle ticket kind7 in area7"))
            cases[f"{N_SKILLS} skills, a match"].append(t)
            reminded += b"task-007" in out
            cases["python -c pass"].append(timed(bare, env, b"")[0])
    finally:
        stop(p, d)
    base = statistics.median(cases["python -c pass"])
    for name, xs in cases.items():
        print(f"{name:<40} {summary(xs)}; ratio to python -c pass {statistics.median(xs) / base:.2f}")
    print(f"reminders sent in the matching runs: {reminded} of {args.n}")


if __name__ == "__main__":
    main()
