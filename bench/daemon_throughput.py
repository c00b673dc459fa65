"""Events/s the daemon accepts over fresh connections from 16 concurrent clients, against a
minimal asyncio Unix echo server (read one frame, answer one frame) in the same run, plus ack
latency p50/p99; then checks no valid event was lost or rejected. Target ≥ 0.5 of the baseline.
"""

import argparse
import json
import multiprocessing as mp
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time

from _common import BIN, pct, recv_exact, start_daemon, stop, temp_home

EVENT = json.dumps({"session_id": "bench-{i}", "hook_event_name": "PreToolUse",
                    "cwd": "/tmp/proj", "tool_name": "Bash", "tool_input": {"command": "ls"}})


def envelope(i: int, n: int) -> bytes:
    """Event `n` of client `i`, with its own id as the hook gives it (the daemon journals it)."""
    body = b'{"type":"hook","v":1,"id":"%08x%024x","ts":0,"payload":%b}' % (
        i, n, EVENT.replace("{i}", str(i % 64)).encode())
    return len(body).to_bytes(4, "big") + body


def client(path: str, seconds: float, worker: int, out: mp.Queue) -> None:
    lat, sent, errors = [], 0, 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        msg = envelope(worker, sent + errors)
        t = time.perf_counter()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            s.sendall(msg)
            n = int.from_bytes(recv_exact(s, 4), "big")
            recv_exact(s, n)
            sent += 1
            lat.append(time.perf_counter() - t)
        except OSError:
            errors += 1
        finally:
            s.close()
    out.put((sent, errors, lat))


def load(path: str, clients: int, seconds: float) -> tuple[int, int, list[float], float]:
    q: mp.Queue = mp.Queue()
    procs = [mp.Process(target=client, args=(path, seconds, i, q)) for i in range(clients)]
    t = time.perf_counter()
    for p in procs:
        p.start()
    results = [q.get() for _ in procs]
    for p in procs:
        p.join()
    wall = time.perf_counter() - t
    sent = sum(r[0] for r in results)
    errors = sum(r[1] for r in results)
    lat = [x for r in results for x in r[2]]
    return sent, errors, lat, wall


ECHO = '''
import asyncio, os, sys
REPLY = b'{"type":"hook_reply","v":1}'
async def handle(r, w):
    try:
        n = int.from_bytes(await r.readexactly(4), "big")
        await r.readexactly(n)
        w.write(len(REPLY).to_bytes(4, "big") + REPLY)
        await w.drain()
    except Exception:
        pass
    w.close()
async def main():
    srv = await asyncio.start_unix_server(handle, sys.argv[1], backlog=512)
    print("ready", flush=True)
    async with srv:
        await srv.serve_forever()
asyncio.run(main())
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="ahe-", dir="/tmp")
    echo_path = os.path.join(tmp, "echo.sock")
    echo = subprocess.Popen([str(BIN / "python"), "-c", ECHO, echo_path], stdout=subprocess.PIPE)
    echo.stdout.readline()
    d, env = temp_home()
    daemon, sock = start_daemon(env)
    try:
        # interleave: baseline, daemon, baseline, daemon (halves of the time each)
        half = args.seconds / 2
        b1 = load(echo_path, args.clients, half)
        a1 = load(sock, args.clients, half)
        b2 = load(echo_path, args.clients, half)
        a2 = load(sock, args.clients, half)
        status = json.loads(subprocess.run([str(BIN / "autoharnessctl"), "status", "--json"],
                                           env=env, capture_output=True, text=True).stdout)
    finally:
        echo.terminate()
        echo.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)  # the echo server's socket dir
        stop(daemon, d)
    base_rate = (b1[0] + b2[0]) / (b1[3] + b2[3])
    rate = (a1[0] + a2[0]) / (a1[3] + a2[3])
    lat = a1[2] + a2[2]
    blat = b1[2] + b2[2]
    sent = a1[0] + a2[0]
    print(f"clients: {args.clients}, {args.seconds:.0f} s per server (interleaved halves)")
    print(f"baseline asyncio echo: {base_rate:,.0f} req/s, ack p50 {statistics.median(blat)*1e3:.2f} ms,"
          f" p99 {pct(blat, .99)*1e3:.2f} ms")
    print(f"autoharnessd:          {rate:,.0f} events/s, ack p50 {statistics.median(lat)*1e3:.2f} ms,"
          f" p99 {pct(lat, .99)*1e3:.2f} ms")
    print(f"ratio daemon/baseline: {rate / base_rate:.2f}  (target ≥ 0.5)")
    ev = status["events"]
    print(f"acknowledged {sent}, daemon received {ev['received']}, rejected {ev['rejected']}, "
          f"client errors {a1[1] + a2[1]}")
    if ev["received"] != sent or ev["rejected"]:
        raise SystemExit("LOST OR REJECTED EVENTS")


if __name__ == "__main__":
    main()
