"""Cost of a large state: the daemon started over a snapshot of 0 and of 20,000 sessions, in
the same run. For each: restart time (spawn to a `status` answered, then a stop and a second
start), disk bytes written per hook (`write_bytes` of /proc/<pid>/io over a paced run of
hooks, persists and fsyncs at their default intervals; `wchar`, the bytes handed to write(),
beside it), RSS after the run, and the size of a default `status` reply. Prints each figure
and its ratio against the empty state. Targets: bytes per hook ≤ 2×, restart ≤ 2 s.
"""

import argparse
import json
import os
import socket
import subprocess
import time

from _common import recv_exact, start_daemon, stop, temp_home

NOW = time.time()


def session(i: int) -> dict:
    sid = f"{i:08x}-5e55-4a1d-9c0f-{i:012x}"
    return {"session_id": sid, "activity": i % 3, "watermark": 40_000 + i,
            "wm_inode": 1_000_000 + i, "wm_size": 40_000 + i,
            "transcript_path": f"/home/user/.claude/projects/-home-user-proj/{sid}.jsonl",
            "cwd": "/home/user/proj", "last_event_at": NOW - i, "started_at": NOW - i - 600,
            "context_sent": ["rule"], "calls_hook": 12, "calls_transcript": 1,
            "tool_ids": [f"toolu_{i:08x}{k:016x}" for k in range(4)], "tool_at": [NOW - i] * 4}


def write_state(env: dict, n: int) -> None:
    state = os.path.join(env["AUTOHARNESS_HOME"], "state")
    os.makedirs(state, mode=0o700, exist_ok=True)
    snap = {"schema": 1, "journal_seq": 0, "saved_at": NOW,
            "sessions": {s["session_id"]: s for s in map(session, range(n))}}
    with open(os.path.join(state, "snapshot.json"), "w") as f:
        json.dump(snap, f)


def frame(obj: dict) -> bytes:
    body = json.dumps(obj).encode()
    return len(body).to_bytes(4, "big") + body


def ask(sock: str, obj: dict) -> bytes:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(sock)
        s.sendall(frame(obj))
        n = int.from_bytes(recv_exact(s, 4), "big")
        return recv_exact(s, n)
    finally:
        s.close()


def io(pid: int) -> dict[str, int]:
    with open(f"/proc/{pid}/io") as f:
        return {k: int(v) for k, v in (line.split(": ") for line in f)}


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def ready(sock: str, p: subprocess.Popen) -> None:
    end = time.monotonic() + 60
    while time.monotonic() < end:
        try:
            if b'"ok"' in ask(sock, {"type": "status", "v": 1}):
                return
        except OSError:
            time.sleep(0.01)
    p.kill()
    raise SystemExit("daemon never answered status")


def run(n: int, hooks: int, rate: float) -> dict:
    d, env = temp_home()
    env.update(AUTOHARNESS_WATCH="0")
    write_state(env, n)
    p = None
    try:
        t = time.monotonic()
        p, sock = start_daemon(env)
        ready(sock, p)
        first_start = time.monotonic() - t
        time.sleep(3)  # past the first persist
        before = io(p.pid)
        sids = [session(i)["session_id"] for i in range(min(n, 50))] or ["bench-only"]
        for k in range(hooks):
            ev = {"session_id": sids[k % len(sids)], "hook_event_name": "PreToolUse",
                  "cwd": "/home/user/proj", "tool_name": "Bash", "tool_use_id": f"toolu_b{k:020d}",
                  "tool_input": {"command": "ls"}}
            ask(sock, {"type": "hook", "v": 1, "id": f"{k:032x}", "ts": 0,
                       "payload": ev})
            time.sleep(1 / rate)
        time.sleep(3)  # the last persist and fsync
        after = io(p.pid)
        rss = rss_mb(p.pid)
        status = len(ask(sock, {"type": "status", "v": 1}))
        p.terminate()
        p.wait(30)
        t = time.monotonic()
        p, sock = start_daemon(env)
        ready(sock, p)
        restart = time.monotonic() - t
        return {"sessions": n, "start_s": first_start, "restart_s": restart,
                "write_bytes_per_hook": (after["write_bytes"] - before["write_bytes"]) / hooks,
                "wchar_per_hook": (after["wchar"] - before["wchar"]) / hooks,
                "rss_mb": rss, "status_bytes": status}
    finally:
        stop(p, d)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sessions", type=int, default=20_000)
    ap.add_argument("--hooks", type=int, default=60)
    ap.add_argument("--rate", type=float, default=4.0, help="hooks per second")
    args = ap.parse_args()
    base = run(0, args.hooks, args.rate)
    big = run(args.sessions, args.hooks, args.rate)
    for r in (base, big):
        print(f"{r['sessions']:>6} sessions: start {r['start_s']:.2f} s, restart "
              f"{r['restart_s']:.2f} s, {r['write_bytes_per_hook']:.0f} disk bytes/hook "
              f"(write() {r['wchar_per_hook']:.0f} B/hook), RSS {r['rss_mb']:.1f} MB, "
              f"status reply {r['status_bytes']} B")

    def ratio(key: str) -> str:
        return f"{big[key] / base[key]:.2f}x" if base[key] else "n/a (baseline 0)"

    print(f"ratios {args.sessions} vs 0 sessions: disk bytes/hook {ratio('write_bytes_per_hook')}"
          f" (target <= 2x), write() bytes/hook {ratio('wchar_per_hook')}, RSS {ratio('rss_mb')},"
          f" status reply {ratio('status_bytes')}, restart {ratio('restart_s')} "
          f"(target <= 2 s: {big['restart_s']:.2f} s)")


if __name__ == "__main__":
    main()
