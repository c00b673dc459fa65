"""Jobs/s through the real daemon's reflector pool at several concurrency levels, against a fake
Anthropic server that answers every call after 200 ms with an empty proposals list (so intake
and the promoter have almost nothing to do and the figure is the pool's own), plus hook ack
latency while the jobs run against the same daemon with no jobs running.

Per level: a fresh home and daemon (`AUTOHARNESS_REFLECTOR_CONCURRENCY=L`), one warm-up job
(the `anthropic` import and the first client are paid there, not in the figures), then
idle → busy → idle: a probe process times a raw socket round trip of one PreToolUse frame on a
fresh connection every ~5 ms (jittered) throughout. The jobs are submitted back to back (one
PreToolUse + Stop per session, one session per job, each with its own copy of a real
transcript); jobs/s counts from the first submission until `jobs.done` covers them all; "busy"
ack samples are those taken after the last submission until then (the submission burst is
reported on its own). Status is polled at the same rate in every phase so both sides carry the
same observer load. Target: busy ack p99 / idle ack p99 ≤ 1.5.
The ideal throughput uses the model latency a client sees, measured in the same run.
"""

import argparse
import http.client
import json
import multiprocessing as mp
import os
import random
import shutil
import socket
import statistics
import sys
import time
import urllib.parse
from pathlib import Path

from _common import pct, recv_exact, start_daemon, stop, summary, temp_home

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from claude_autoharness.protocol.paths import project_slug  # noqa: E402 (after the path insert)
from fake_anthropic import FakeAnthropic, tool_reply  # noqa: E402

DEFAULT_TRANSCRIPT = REPO / "tests" / "corpus" / "real" / "spotter" / "short.jsonl"
MODEL_DELAY_S = 0.2
GAP_S = 0.5  # excluded between the busy phase and the second idle phase


# ---- wire -------------------------------------------------------------------------------------

def frame(obj: dict) -> bytes:
    body = json.dumps(obj).encode()
    return len(body).to_bytes(4, "big") + body


def hook_frame(event: dict) -> bytes:
    return frame({"type": "hook", "v": 1, "ts": 0, "payload": event})


def rpc(path: str, msg: bytes, timeout: float = 30.0) -> bytes:
    """One request on a fresh connection, as the hook client and the CLI do."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        s.sendall(msg)
        n = int.from_bytes(recv_exact(s, 4), "big")
        return recv_exact(s, n)
    finally:
        s.close()


STATUS = frame({"type": "status", "v": 1})


def status(path: str) -> dict:
    reply = json.loads(rpc(path, STATUS))
    if reply.get("type") != "ok":
        raise SystemExit(f"status failed: {reply}")
    return reply["data"]


def model_latency(base_url: str, n: int = 7) -> float:
    """Median time for a client to get the fake's answer (its delay plus HTTP and Python)."""
    u = urllib.parse.urlsplit(base_url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    body = json.dumps({"model": "bench", "max_tokens": 16,
                       "messages": [{"role": "user", "content": "calibrate"}]}).encode()
    times = []
    try:
        for _ in range(n):
            t = time.perf_counter()
            conn.request("POST", "/v1/messages", body, {"content-type": "application/json"})
            conn.getresponse().read()
            times.append(time.perf_counter() - t)
    finally:
        conn.close()
    return statistics.median(times)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU of a process so far (Linux /proc; None elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def event(sid: str, name: str, cwd: str, transcript: str, **kw) -> dict:
    return {"session_id": sid, "transcript_path": transcript, "cwd": cwd,
            "hook_event_name": name, **kw}


def hook(path: str, ev: dict) -> None:
    reply = rpc(path, hook_frame(ev))
    if b'"hook_reply"' not in reply:
        raise SystemExit(f"hook not acknowledged: {reply[:200]!r}")


# ---- the probe (own process, so the fake server's threads don't share its GIL) ----------------

def probe(path: str, msg: bytes, interval: float, stop_evt, out) -> None:
    samples: list[tuple[float, float]] = []  # (start, monotonic clock; round trip, seconds)
    errors = 0
    rnd = random.Random(7)
    next_t = time.monotonic()
    while not stop_evt.is_set():
        t0 = time.monotonic()
        p0 = time.perf_counter()
        try:
            reply = rpc(path, msg)
            dt = time.perf_counter() - p0
            if b'"hook_reply"' in reply:
                samples.append((t0, dt))
            else:
                errors += 1
        except OSError:
            errors += 1
        next_t += interval * (0.5 + rnd.random())  # jitter: no lock-step with periodic work
        wait = next_t - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        else:
            next_t = time.monotonic()
    out.put((samples, errors))


# ---- one level --------------------------------------------------------------------------------

def watch(sock: str, seconds: float, poll: float, until=None) -> tuple[dict, list[dict], float]:
    """Poll status every `poll` s for `seconds` (or until `until(status)`); return the last
    status, every status seen, and when the stop condition was first seen (monotonic)."""
    seen = []
    end = time.monotonic() + seconds
    while True:
        st = status(sock)
        now = time.monotonic()
        seen.append(st)
        if until is not None and until(st):
            return st, seen, now
        if now >= end:
            if until is not None:
                raise SystemExit(f"timed out; jobs: {st['jobs']}")
            return st, seen, now
        time.sleep(poll)


def run_level(level: int, args, ctx) -> dict:
    d, env = temp_home()
    for var in ("AUTOHARNESS_CONFIG", "AUTOHARNESS_DISABLE", "AUTOHARNESS_CHILD_SESSION",
                "ANTHROPIC_AUTH_TOKEN"):
        env.pop(var, None)
    fake = FakeAnthropic(delay=MODEL_DELAY_S)
    fake.default = tool_reply({"proposals": []})  # nothing for intake or the promoter to do
    fake.start()
    latency = model_latency(fake.base_url)
    calls_before = len(fake.messages_requests)
    daemon = prober = None
    stop_evt = ctx.Event()
    try:
        env.update({
            "ANTHROPIC_API_KEY": "sk-ant-bench-not-a-real-key",
            "ANTHROPIC_BASE_URL": fake.base_url,
            "NO_PROXY": ",".join(filter(None, [env.get("NO_PROXY"), "127.0.0.1,localhost"])),
            "AUTOHARNESS_REFLECT_EVERY": "1",
            "AUTOHARNESS_REFLECTOR_BACKEND": "anthropic",
            "AUTOHARNESS_REFLECTOR_CONCURRENCY": str(level),
            # reflection jobs only: curator jobs would be counted among the jobs done
            "AUTOHARNESS_LIBRARY_CURATE_EVERY": "0",
        })
        project = d / "proj"
        project.mkdir()
        slug_dir = d / "claude" / "projects" / project_slug(str(project))
        slug_dir.mkdir(parents=True)
        sids = [f"bench-c{level}-{i:04d}" for i in range(args.jobs)]
        for sid in ["bench-warm", *sids]:
            shutil.copyfile(args.transcript, slug_dir / f"{sid}.jsonl")
        cwd = str(project)

        def tpath(sid: str) -> str:
            return str(slug_dir / f"{sid}.jsonl")

        daemon, sock = start_daemon(env)
        pre = {"tool_name": "Bash", "tool_input": {"command": "ls"}}

        # warm-up: the SDK import and the HTTP client are paid here, not in the figures
        hook(sock, event("bench-warm", "PreToolUse", cwd, tpath("bench-warm"), **pre))
        hook(sock, event("bench-warm", "Stop", cwd, tpath("bench-warm")))
        watch(sock, 120, args.poll, lambda st: st["jobs"]["done"] + st["jobs"]["failed"] >= 1)
        time.sleep(args.settle)
        base = status(sock)
        if base["jobs"]["failed"]:
            raise SystemExit(f"warm-up job failed: {base['jobs']['last_error']}")
        base_done = base["jobs"]["done"]
        target = base_done + args.jobs

        # the probe session never Stops, so it never creates a job
        probe_msg = hook_frame(event("bench-probe", "PreToolUse", cwd, tpath("bench-probe"), **pre))
        out = ctx.Queue()
        prober = ctx.Process(target=probe, args=(sock, probe_msg, args.probe_ms / 1e3, stop_evt, out),
                             daemon=True)
        prober.start()
        time.sleep(0.5)  # let the probe process start before idle samples count

        idle1_0 = time.monotonic()
        cpu_idle0 = cpu_seconds(daemon.pid)
        watch(sock, args.idle_seconds, args.poll)
        cpu_idle1 = cpu_seconds(daemon.pid)
        busy0 = time.monotonic()
        cpu_idle_rate = None if cpu_idle0 is None else (cpu_idle1 - cpu_idle0) / (busy0 - idle1_0)
        cpu0, own0 = cpu_seconds(daemon.pid), time.process_time()
        for sid in sids:
            hook(sock, event(sid, "PreToolUse", cwd, tpath(sid), **pre))
            hook(sock, event(sid, "Stop", cwd, tpath(sid)))
        submitted = time.monotonic()
        wall_limit = 60 + 10 * args.jobs * MODEL_DELAY_S / level
        _, seen, busy1 = watch(sock, wall_limit, args.poll,
                                  lambda st: st["jobs"]["done"] + st["jobs"]["failed"] >= target)
        cpu1, own1 = cpu_seconds(daemon.pid), time.process_time()
        time.sleep(GAP_S)
        idle2_0 = time.monotonic()
        watch(sock, args.idle_seconds, args.poll)
        idle2_1 = time.monotonic()

        stop_evt.set()
        samples, probe_errors = out.get()
        prober.join()
        final = status(sock)
        requests = len(fake.messages_requests) - calls_before
    finally:
        stop_evt.set()
        if prober is not None and prober.is_alive():  # only on an error path
            prober.terminate()
            prober.join(5)
        if daemon is not None:
            stop(daemon, d)
        else:
            shutil.rmtree(d, ignore_errors=True)
        fake.stop()

    burst = [dt for t, dt in samples if busy0 <= t < submitted]
    busy = [dt for t, dt in samples if submitted <= t < busy1]
    idle = [dt for t, dt in samples if idle1_0 <= t < busy0 or idle2_0 <= t < idle2_1]
    running = [st["jobs"]["running"] for st in seen]
    wall = busy1 - busy0
    problems = []
    jobs = final["jobs"]
    if jobs["failed"]:
        problems.append(f"{jobs['failed']} jobs failed: {jobs['last_error']}")
    if jobs["done"] != target:
        problems.append(f"jobs done {jobs['done']}, expected {target}")
    if requests != args.jobs + 1:
        problems.append(f"model calls {requests}, expected {args.jobs + 1} (retries?)")
    expected_events = 2 + 2 * args.jobs + len(samples)
    ev = final["events"]
    if probe_errors or ev["rejected"] or ev["received"] != expected_events:
        problems.append(f"events: received {ev['received']} (expected {expected_events}), "
                        f"rejected {ev['rejected']}, probe errors {probe_errors}")
    intents = final["intents"]
    if any(intents.values()):
        problems.append(f"unexpected intents: {intents}")
    return {"level": level, "wall": wall, "submit": submitted - busy0, "rate": args.jobs / wall,
            "ideal": level / latency, "latency": latency, "burst": burst, "busy": busy, "idle": idle,
            "cpu_busy": None if cpu0 is None else cpu1 - cpu0, "bench_cpu": own1 - own0,
            "cpu_idle_rate": cpu_idle_rate,
            "running_max": max(running), "running_mean": statistics.fmean(running),
            "problems": problems}


def ms(x: float) -> str:
    return f"{x * 1e3:.2f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=100, help="jobs per concurrency level")
    ap.add_argument("--levels", default="1,2,4", help="reflector concurrency levels, comma-separated")
    ap.add_argument("--idle-seconds", type=float, default=5.0,
                    help="length of each of the two idle phases per level")
    ap.add_argument("--probe-ms", type=float, default=5.0, help="mean interval between ack probes")
    ap.add_argument("--poll", type=float, default=0.02, help="status poll interval, seconds")
    ap.add_argument("--settle", type=float, default=1.0, help="pause after the warm-up job")
    ap.add_argument("--transcript", type=Path, default=DEFAULT_TRANSCRIPT,
                    help="real transcript copied once per session")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    if not args.transcript.is_file():
        raise SystemExit(f"no transcript at {args.transcript} (use --transcript)")
    ctx = mp.get_context("spawn")

    print(f"{args.jobs} jobs per level, fake model answers after {MODEL_DELAY_S * 1e3:.0f} ms with "
          f"an empty proposals list; ack probe every ~{args.probe_ms:g} ms (fresh connection, one "
          f"PreToolUse frame); idle = {args.idle_seconds:g} s before + {args.idle_seconds:g} s "
          f"after the jobs", flush=True)
    results = []
    for level in levels:
        r = run_level(level, args, ctx)
        results.append(r)
        busy, idle = r["busy"], r["idle"]
        print(f"\nconcurrency {level}: {args.jobs} jobs in {r['wall']:.2f} s "
              f"(submission {r['submit']:.2f} s) → {r['rate']:.2f} jobs/s "
              f"(ideal {r['ideal']:.2f} = {level} / {ms(r['latency'])} model latency, "
              f"{r['rate'] / r['ideal']:.0%}); "
              f"running max {r['running_max']}, mean {r['running_mean']:.2f}")
        if r["cpu_busy"] is not None:
            print(f"  daemon CPU while the jobs ran: {r['cpu_busy']:.2f} s = "
                  f"{r['cpu_busy'] / args.jobs * 1e3:.1f} ms/job, {r['cpu_busy'] / r['wall']:.0%} of a "
                  f"core (idle phase: {r['cpu_idle_rate']:.0%}); this process (fake server, "
                  f"submission, polling): {r['bench_cpu'] / r['wall']:.0%} of a core; "
                  f"{os.cpu_count()} CPUs")
        print(f"  ack busy: p50 {ms(statistics.median(busy))}, p99 {ms(pct(busy, .99))}; {summary(busy)}")
        print(f"  ack idle: p50 {ms(statistics.median(idle))}, p99 {ms(pct(idle, .99))}; {summary(idle)}")
        if r["burst"]:
            print(f"  (ack while the {2 * args.jobs} submission frames went in, not counted above: "
                  f"p50 {ms(statistics.median(r['burst']))}, p99 {ms(pct(r['burst'], .99))}, "
                  f"n={len(r['burst'])})")
        print(f"  ratio busy/idle: p99 {pct(busy, .99) / pct(idle, .99):.2f} (target ≤ 1.5), "
              f"p50 {statistics.median(busy) / statistics.median(idle):.2f}")
        for p in r["problems"]:
            print(f"  PROBLEM: {p}")
        sys.stdout.flush()

    print("\nlevel  jobs/s  wall s  ideal  run max  ack p50 busy/idle      ack p99 busy/idle      p99 ratio")
    for r in results:
        b, i = r["busy"], r["idle"]
        print(f"{r['level']:>5}  {r['rate']:6.2f}  {r['wall']:6.2f}  {r['ideal']:5.1f}  "
              f"{r['running_max']:7d}  "
              f"{ms(statistics.median(b)):>9} / {ms(statistics.median(i)):<9}  "
              f"{ms(pct(b, .99)):>9} / {ms(pct(i, .99)):<9}  {pct(b, .99) / pct(i, .99):5.2f}")
    if any(r["problems"] for r in results):
        raise SystemExit("PROBLEMS (see above)")


if __name__ == "__main__":
    main()
