"""Cost of a large state: the daemon started over an empty state (the target's baseline: the
hooks' 50 sessions are made by the run itself, with fewer fields set), over a snapshot of
those 50 sessions alone (nothing but what the run touches: the hooks' records are the same size
as with 20,000) and over those 50 among 20,000. For each: start and restart time (spawn to a
`status` answered; the restart after a kill -9 just before a snapshot was due, so it replays
the longest journal), disk bytes written per hook, RSS after the run, and the size of a default
`status` reply. Prints each figure and its ratios against both baselines.

Bytes per hook (`write_bytes` of /proc/<pid>/io; `wchar`, the bytes handed to write(), beside
it) are measured twice:
- between snapshots: a paced run (`--hooks` at `--rate`), persists and fsyncs at their
  default intervals;
- averaged over a long run, snapshots included: from the start (the daemon's own snapshot,
  written by a clean stop before the run, and an empty journal), the paced run and then
  `--long` hooks as fast as `--writers` clients send them, on until the first snapshot after
  the last of them is on disk, so the run ends where a snapshot cycle ends and every snapshot
  it caused is counted.
Targets: long-run bytes per hook <= 1.5x an empty state's, restart <= 2 s.
"""

import argparse
import json
import os
import socket
import subprocess
import threading
import time

from _common import recv_exact, start_daemon, stop, temp_home

from claude_autoharness.daemon.book import SNAPSHOT_JOURNAL_FACTOR, SNAPSHOT_MIN_JOURNAL_BYTES

NOW = time.time()
ACTIVE = 50  # the sessions the hooks go to: the baseline state holds these alone


def sid_of(i: int) -> str:
    return f"{i:08x}-5e55-4a1d-9c0f-{i:012x}"


def transcript_of(sid: str) -> str:
    return f"/home/user/.claude/projects/-home-user-proj/{sid}.jsonl"


def session(i: int) -> dict:
    sid = sid_of(i)
    return {"session_id": sid, "activity": i % 3, "watermark": 40_000 + i,
            "wm_inode": 1_000_000 + i, "wm_size": 40_000 + i, "transcript_path": transcript_of(sid),
            "cwd": "/home/user/proj", "last_event_at": NOW - i, "started_at": NOW - i - 600,
            "context_sent": ["rule"], "calls_hook": 12, "calls_transcript": 1,
            "tool_ids": [f"toolu_{i:08x}{k:016x}" for k in range(4)], "tool_at": [NOW - i] * 4}


def write_state(env: dict, n: int) -> None:
    """A snapshot of `n` sessions; none at all for 0 (an empty state: a first start)."""
    if not n:
        return
    state = os.path.join(env["AUTOHARNESS_HOME"], "state")
    os.makedirs(state, mode=0o700, exist_ok=True)
    snap = {"schema": 1, "journal_seq": 0,
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


def hook_request(sid: str, k: int) -> dict:
    """A PreToolUse as Claude Code sends it (every hook names the session's transcript)."""
    ev = {"session_id": sid, "hook_event_name": "PreToolUse", "cwd": "/home/user/proj",
          "transcript_path": transcript_of(sid),
          "tool_name": "Bash", "tool_use_id": f"toolu_b{k:020d}", "tool_input": {"command": "ls"}}
    return {"type": "hook", "v": 1, "id": f"{k:032x}", "ts": 0, "payload": ev}


def snapshot_id(env: dict) -> tuple[int, int] | None:
    """Which snapshot is on disk (None between the two renames that replace it)."""
    try:
        st = os.stat(os.path.join(env["AUTOHARNESS_HOME"], "state", "snapshot.json"))
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns


def long_run(sock: str, env: dict, pid: int, sids: list[str], hooks: int,
             writers: int) -> tuple[int, int, dict]:
    """Send `hooks` hooks from `writers` threads, then more until a snapshot newer than the
    last hook is on disk; return (hooks sent, snapshots seen, /proc io after)."""
    sent = [0]
    lock = threading.Lock()
    done = threading.Event()
    snaps = [0]

    def writer(w: int) -> None:
        k = w
        while not done.is_set():
            ask(sock, hook_request(sids[k % len(sids)], 1_000_000 + k))
            with lock:
                sent[0] += 1
            k += writers

    seen = snapshot_id(env)
    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    end = time.monotonic() + 600
    try:
        while time.monotonic() < end:
            time.sleep(0.02)
            now = snapshot_id(env)
            if now is not None and now != seen:
                seen = now
                snaps[0] += 1
                if sent[0] >= hooks:
                    break
    finally:
        done.set()
        for t in threads:
            t.join()
    return sent[0], snaps[0], io(pid)


def fill_journal(sock: str, env: dict, sids: list[str], writers: int) -> int:
    """Send hooks until the journal since the snapshot is nearly as long as it grows before
    the next one (the worst case for a restart); return its size."""
    state = os.path.join(env["AUTOHARNESS_HOME"], "state")
    due = max(SNAPSHOT_MIN_JOURNAL_BYTES,
              SNAPSHOT_JOURNAL_FACTOR * os.path.getsize(os.path.join(state, "snapshot.json")))
    journal = os.path.join(state, "journal.jsonl")
    done = threading.Event()

    def writer(w: int) -> None:
        k = 10_000_000 + w
        while not done.is_set() and os.path.getsize(journal) < 0.95 * due:
            ask(sock, hook_request(sids[k % len(sids)], k))
            k += writers

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return os.path.getsize(journal)


def run(n: int, hooks: int, rate: float, long: int, writers: int) -> dict:
    d, env = temp_home()
    env.update(AUTOHARNESS_WATCH="0")
    write_state(env, n)
    p = None
    try:
        if n:  # a clean stop rewrites the state as the daemon's own snapshot: its steady state
            p, sock = start_daemon(env)
            ready(sock, p)
            p.terminate()
            p.wait(30)
        t = time.monotonic()
        p, sock = start_daemon(env)
        ready(sock, p)
        first_start = time.monotonic() - t
        sids = [sid_of(i) for i in range(ACTIVE)]
        time.sleep(3)  # past the first persist
        before = io(p.pid)
        for k in range(hooks):
            ask(sock, hook_request(sids[k % len(sids)], k))
            time.sleep(1 / rate)
        time.sleep(3)  # the last persist and fsync
        after = io(p.pid)
        long_sent, snaps, long_after = long_run(sock, env, p.pid, sids, long, writers)
        long_sent += hooks  # counted from the start: the paced run is the cycle's first part
        rss = rss_mb(p.pid)
        status = len(ask(sock, {"type": "status", "v": 1}))
        filled = fill_journal(sock, env, sids, writers)
        p.kill()  # a crash just before a snapshot was due: the restart replays all of it
        p.wait(30)
        t = time.monotonic()
        p, sock = start_daemon(env)
        ready(sock, p)
        restart = time.monotonic() - t
        return {"sessions": n, "start_s": first_start, "restart_s": restart,
                "write_bytes_per_hook": (after["write_bytes"] - before["write_bytes"]) / hooks,
                "wchar_per_hook": (after["wchar"] - before["wchar"]) / hooks,
                "long_hooks": long_sent, "long_snapshots": snaps,
                "long_write_bytes_per_hook":
                    (long_after["write_bytes"] - before["write_bytes"]) / long_sent,
                "long_wchar_per_hook": (long_after["wchar"] - before["wchar"]) / long_sent,
                "rss_mb": rss, "status_bytes": status, "journal_mb": filled / 1e6}
    finally:
        stop(p, d)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=20_000)
    ap.add_argument("--hooks", type=int, default=60, help="hooks of the paced run")
    ap.add_argument("--rate", type=float, default=4.0, help="hooks per second, paced run")
    ap.add_argument("--long", type=int, default=70_000,
                    help="hooks of the long run (it goes on to the next snapshot)")
    ap.add_argument("--writers", type=int, default=4, help="clients sending the long run")
    args = ap.parse_args()
    empty = run(0, args.hooks, args.rate, args.long, args.writers)
    active = run(ACTIVE, args.hooks, args.rate, args.long, args.writers)
    big = run(args.sessions, args.hooks, args.rate, args.long, args.writers)
    for r in (empty, active, big):
        print(f"{r['sessions']:>6} sessions: start {r['start_s']:.2f} s, restart "
              f"{r['restart_s']:.2f} s (over {r['journal_mb']:.1f} MB of journal), between "
              f"snapshots {r['write_bytes_per_hook']:.0f} disk bytes/hook (write() "
              f"{r['wchar_per_hook']:.0f} B/hook); long run of "
              f"{r['long_hooks']} hooks, {r['long_snapshots']} snapshot(s): "
              f"{r['long_write_bytes_per_hook']:.0f} disk bytes/hook (write() "
              f"{r['long_wchar_per_hook']:.0f} B/hook); RSS {r['rss_mb']:.1f} MB, "
              f"status reply {r['status_bytes']} B")

    for base, name in ((empty, "an empty state (the target's baseline)"),
                       (active, f"{ACTIVE} sessions")):
        def ratio(key: str, base: dict = base) -> str:
            return f"{big[key] / base[key]:.2f}x" if base[key] else "n/a (baseline 0)"

        print(f"ratios {args.sessions} sessions vs {name}: long-run disk bytes/hook "
              f"{ratio('long_write_bytes_per_hook')} (target <= 1.5x against an empty state), "
              f"long-run write() bytes/hook {ratio('long_wchar_per_hook')}, between snapshots "
              f"{ratio('write_bytes_per_hook')}, RSS {ratio('rss_mb')}, status reply "
              f"{ratio('status_bytes')}, restart {ratio('restart_s')}")
    print(f"restart at {args.sessions} sessions: {big['restart_s']:.2f} s (target <= 2 s)")


if __name__ == "__main__":
    main()
