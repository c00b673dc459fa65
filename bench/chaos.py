"""Chaos: real hooks send PreToolUse and Stop events while the daemon is killed with `kill -9`
at random intervals and restarted, by hand or by the hooks' autostart. Afterwards every
session's count is compared with what was sent.

Prints, per restart mode: sent / counted / lost / double-counted / jobs created / jobs
duplicated (two jobs from one Stop, or more jobs than Stops). Target: 0 lost, 0 double, 0
duplicate jobs. Bounded: --events, --writers, --sessions, --kill-min/--kill-max, --max-seconds.
"""

import argparse
import fcntl
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from _common import BIN, stop, temp_home

from claude_autoharness.daemon.sessions import Session

HOOK = str(BIN / "autoharness-hook")


def status(env: dict) -> dict | None:
    r = subprocess.run([str(BIN / "autoharnessctl"), "status", "--json"], env=env,
                       capture_output=True, text=True, timeout=60)
    return json.loads(r.stdout) if r.returncode == 0 else None


def daemon_pid(env: dict) -> int | None:
    """The running daemon's pid: the one holding the flock on its pid file (a pid alone could
    be a starting daemon's empty file, or a stopped one's zombie)."""
    try:
        fd = os.open(os.path.join(env["AUTOHARNESS_HOME"], "state", "daemon.lock"), os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:  # held: a daemon runs
            pid = int(os.read(fd, 32).decode().strip() or 0)
            return pid if pid > 0 else None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    except ValueError:
        return None
    finally:
        os.close(fd)


class Killer(threading.Thread):
    """kill -9 the daemon every kill-min..kill-max seconds; restart it by hand if asked."""

    def __init__(self, env: dict, by_hand: bool, lo: float, hi: float, rng: random.Random):
        super().__init__(daemon=True)
        self.env, self.by_hand, self.lo, self.hi, self.rng = env, by_hand, lo, hi, rng
        self.done = threading.Event()
        self.kills = 0
        self.proc: subprocess.Popen | None = None

    def start_daemon(self) -> None:
        log = open(os.path.join(self.env["AUTOHARNESS_HOME"], "chaos-daemons.log"), "ab")
        self.proc = subprocess.Popen([str(BIN / "autoharnessd")], env=self.env,
                                     stdout=log, stderr=log)
        log.close()

    def run(self) -> None:
        while not self.done.wait(self.rng.uniform(self.lo, self.hi)):
            pid = daemon_pid(self.env)
            if pid is None:
                continue
            try:
                os.kill(pid, signal.SIGKILL)
                self.kills += 1
            except OSError:
                continue
            if self.proc is not None and self.proc.pid == pid:
                self.proc.wait()
            if self.by_hand:
                self.start_daemon()


def plan(sessions: int, events: int, reflect_every: int) -> dict[str, list[str]]:
    """Per session, its event names in order: PreToolUse, and a Stop after every
    `reflect_every` of them (each Stop crosses the threshold when nothing is lost)."""
    out = {}
    for i in range(sessions):
        n = events // sessions + (1 if i < events % sessions else 0)
        seq = []
        for k in range(1, n + 1):
            seq.append("PreToolUse")
            if k % reflect_every == 0:
                seq.append("Stop")
        out[f"chaos-{i:03d}"] = seq
    return out


def writer(env: dict, work: list[tuple[str, str]], sent: Counter, lock: threading.Lock,
           deadline: float) -> None:
    for sid, name in work:
        if time.monotonic() > deadline:
            return
        payload = {"session_id": sid, "hook_event_name": name, "cwd": "/tmp/chaos",
                   "transcript_path": f"/tmp/chaos/{sid}.jsonl"}
        if name == "PreToolUse":
            payload.update(tool_name="Bash", tool_input={"command": "true"})
        subprocess.run([HOOK], input=json.dumps(payload).encode(), env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        with lock:
            sent[(sid, name)] += 1


def run(mode: str, args) -> dict:
    d, env = temp_home()
    # in the config file: a daemon a hook autostarts reads the file, never the session's variables
    Path(env["AUTOHARNESS_HOME"], "config.toml").write_text(
        f'reflect_every = {args.reflect_every}\nwatch = false\n[reflector]\nbackend = "none"\n')
    env.update(AUTOHARNESS_REFLECT_EVERY=str(args.reflect_every), AUTOHARNESS_WATCH="0",
               AUTOHARNESS_REFLECTOR_BACKEND="none",  # what a daemon started by hand reads
               AUTOHARNESS_AUTOSTART="1" if mode == "autostart" else "0")
    rng = random.Random(args.seed)
    killer = Killer(env, mode == "hand", args.kill_min, args.kill_max, rng)
    killer.start_daemon()
    while status(env) is None:
        time.sleep(0.05)
    events = plan(args.sessions, args.events, args.reflect_every)
    # writers take whole sessions, so each session's events go out in order
    work: list[list[tuple[str, str]]] = [[] for _ in range(args.writers)]
    for i, (sid, seq) in enumerate(events.items()):
        work[i % args.writers].append([(sid, name) for name in seq])
    queues = []
    for sessions in work:  # interleave a writer's sessions
        q = []
        while any(sessions):
            for s in sessions:
                if s:
                    q.append(s.pop(0))
        queues.append(q)
    sent: Counter = Counter()
    lock = threading.Lock()
    t0 = time.monotonic()
    deadline = t0 + args.max_seconds
    killer.start()
    threads = [threading.Thread(target=writer, args=(env, q, sent, lock, deadline))
               for q in queues]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    killer.done.set()
    killer.join()
    elapsed = time.monotonic() - t0
    # settle: a daemon up (one kill may have come after the last hook), the spool drained.
    # A daemon may still be starting (a second of imports before it takes the lock): start
    # one only if none is, and stop whichever holds the lock until none takes it any more.
    starting = killer.proc is not None and killer.proc.poll() is None
    if not starting and daemon_pid(env) is None:
        killer.start_daemon()
    st = None
    for _ in range(600):
        st = status(env)
        if st is not None and st["spool"]["pending"] == 0:
            break
        time.sleep(0.1)
    quiet = 0
    while quiet < 2:  # two looks 1.5 s apart with no daemon: a starting one would be up
        pid = daemon_pid(env)
        if pid is None:
            quiet += 1
            time.sleep(1.5)
            continue
        quiet = 0
        os.kill(pid, signal.SIGTERM)
        for _ in range(300):
            if daemon_pid(env) is None:
                break
            time.sleep(0.05)
    hung = False
    if killer.proc is not None and killer.proc.poll() is None:
        try:
            killer.proc.wait(30)
        except subprocess.TimeoutExpired:  # a finding, not a crash of the bench
            print(f"daemon {killer.proc.pid} did not stop within 30 s of SIGTERM; its log: "
                  f"{env['AUTOHARNESS_HOME']}/chaos-daemons.log", flush=True)
            killer.proc.kill()
            killer.proc.wait()
            hung = True
    with open(os.path.join(env["AUTOHARNESS_HOME"], "state", "snapshot.json"), "rb") as f:
        snap = json.loads(f.read())
    # the snapshot holds its sessions as rows of the Session's fields (older ones: by id)
    rows = {row[0]: dict(zip(Session.__struct_fields__, row, strict=True))
            for row in snap.get("session_rows", [])}
    if not hung:  # else its log stays for a look
        stop(None, d)
    lost = double = counted = 0
    for sid in events:
        n_sent = sent[(sid, "PreToolUse")]
        s = rows.get(sid) or snap.get("sessions", {}).get(sid, {})
        n = s.get("calls_hook", 0) + s.get("calls_transcript", 0)
        counted += n
        lost += max(0, n_sent - n)
        double += max(0, n - n_sent)
    jobs = list(snap["jobs"].values())
    per_event = Counter(j.get("event_id", "") for j in jobs if j.get("event_id"))
    per_session = Counter(j["session_id"] for j in jobs)
    over = sum(max(0, per_session[sid] - sent[(sid, "Stop")]) for sid in events)
    dup_jobs = sum(n - 1 for n in per_event.values() if n > 1) + over
    return {"mode": mode, "kills": killer.kills, "sent": sum(sent[k] for k in sent
                                                             if k[1] == "PreToolUse"),
            "stops": sum(sent[k] for k in sent if k[1] == "Stop"), "counted": counted,
            "lost": lost, "double": double, "jobs": len(jobs), "dup_jobs": dup_jobs,
            "replayed": snap["events"].get("spool_replayed", 0),
            "duplicates": snap["events"].get("duplicates", 0), "elapsed": elapsed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--writers", type=int, default=4, help="concurrent hook writers")
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--events", type=int, default=2000, help="PreToolUse events in all")
    ap.add_argument("--reflect-every", type=int, default=10, help="a Stop after this many")
    ap.add_argument("--kill-min", type=float, default=0.2, help="seconds between kills, min")
    ap.add_argument("--kill-max", type=float, default=2.0, help="seconds between kills, max")
    ap.add_argument("--mode", choices=("hand", "autostart", "both"), default="both",
                    help="who restarts the daemon after a kill")
    ap.add_argument("--max-seconds", type=float, default=300.0, help="stop sending after this")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    modes = ("hand", "autostart") if args.mode == "both" else (args.mode,)
    for mode in modes:
        r = run(mode, args)
        print(f"restarted by {r['mode']:9s}: {r['kills']} kills in {r['elapsed']:.0f} s; "
              f"sent {r['sent']}, counted {r['counted']}, lost {r['lost']}, "
              f"double-counted {r['double']}; jobs created {r['jobs']} (Stops sent "
              f"{r['stops']}), jobs duplicated {r['dup_jobs']}; spool replayed "
              f"{r['replayed']}, repeated copies dropped {r['duplicates']}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
