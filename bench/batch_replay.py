"""Reflecting on a backlog of transcripts: Message Batches (`replay --batch`) against the
reflector pool (one Messages call per job), both through the real daemon against the fake
Anthropic server with the same per-request latency (`--latency`).

Per path: a fresh home and daemon, N small transcripts written before the clock starts (so the
pool's settle wait is already over). Pool: for each transcript one session's SessionStart,
UserPromptSubmit, Stop and SessionEnd go to the socket (one job each); the clock stops when
`jobs.done` covers them all. Batch: one `autoharnessctl replay --batch DIR`; the clock stops
when no batch is in flight and every item is taken in (`--batch-polls` retrieves answer
`in_progress` first, standing for the API's processing time). Reported: wall time, HTTP requests
to the API, tokens, and the cost at the standard price vs the batch price (half).
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from _common import BIN, start_daemon, stop, temp_home
from reflect_pipeline import frame, hook_frame, rpc, status

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from fake_anthropic import FakeAnthropic  # noqa: E402


def write_backlog(d: Path, n: int, project: Path) -> list[Path]:
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for k in range(n):
        recs = [{"type": "user", "cwd": str(project), "sessionId": f"bench-{k}",
                 "message": {"role": "user", "content": f"task {k}: run the checks, then push"}},
                {"type": "assistant", "cwd": str(project), "sessionId": f"bench-{k}",
                 "message": {"role": "assistant",
                             "content": [{"type": "text", "text": f"Done with task {k}."}]}}]
        p = d / f"t{k:04d}.jsonl"
        p.write_text("".join(json.dumps(r) + "\n" for r in recs))
        out.append(p)
    old = time.time() - 60  # settled long ago: the pool does not wait for the files
    for p in out:
        os.utime(p, (old, old))
    return out


def api_tokens(fake: FakeAnthropic) -> int:
    from fake_anthropic import DEFAULT_USAGE
    per = sum(DEFAULT_USAGE.values())
    n = len(fake.messages_requests) + sum(len(b.custom_ids) for b in fake.batches.values())
    return per * n


def run_pool(n: int, latency: float, concurrency: int) -> dict:
    d, env = temp_home()
    project = d / "proj"
    project.mkdir()
    files = write_backlog(d / "backlog", n, project)
    with FakeAnthropic(delay=latency) as fake:
        env.update(ANTHROPIC_API_KEY="sk-ant-bench", ANTHROPIC_BASE_URL=fake.base_url,
                   AUTOHARNESS_REFLECTOR_CONCURRENCY=str(concurrency))
        p, sock = start_daemon(env)
        try:
            t0 = time.perf_counter()
            for k, f in enumerate(files):
                base = {"session_id": f"bench-{k}", "transcript_path": str(f),
                        "cwd": str(project)}
                for name in ("SessionStart", "UserPromptSubmit", "PreToolUse", "Stop",
                             "SessionEnd"):
                    extra = {"tool_name": "Bash", "tool_input": {"command": "make check"}} \
                        if name == "PreToolUse" else {}
                    rpc(sock, hook_frame(dict(base, hook_event_name=name, **extra)))
            while status(sock)["jobs"]["done"] + status(sock)["jobs"]["failed"] < n:
                time.sleep(0.05)
            wall = time.perf_counter() - t0
            return {"wall_s": wall, "requests": len(fake.requests), "tokens": api_tokens(fake),
                    "failed": status(sock)["jobs"]["failed"]}
        finally:
            stop(p, d)


def run_batch(n: int, latency: float, polls: int, poll_s: float) -> dict:
    d, env = temp_home()
    project = d / "proj"
    project.mkdir()
    write_backlog(d / "backlog", n, project)
    with FakeAnthropic(delay=latency) as fake:
        fake.batch_polls = polls
        env.update(ANTHROPIC_API_KEY="sk-ant-bench", ANTHROPIC_BASE_URL=fake.base_url,
                   AUTOHARNESS_REFLECTOR_BATCH_POLL_S=str(poll_s),
                   AUTOHARNESS_REFLECTOR_BATCH_POLL_MAX_S=str(poll_s * 4))
        p, sock = start_daemon(env)
        try:
            t0 = time.perf_counter()
            r = subprocess.run([str(BIN / "autoharnessctl"), "replay", "--batch",
                                str(d / "backlog"), "--project", str(project), "--wait", "600",
                                "--json"], env=env, capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(f"replay --batch failed: {r.stderr}")
            while True:
                b = json.loads(rpc(sock, frame({"type": "batch", "v": 1, "op": "status"})))
                b = b["data"]
                if not b["in_flight"] and not b["items"]["waiting"]:
                    break
                time.sleep(0.05)
            wall = time.perf_counter() - t0
            return {"wall_s": wall, "requests": len(fake.requests), "tokens": api_tokens(fake),
                    "failed": b["items"]["failed"], "batches": len(fake.batches),
                    "tokens_daemon": b["tokens"]}
        finally:
            stop(p, d)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=250, help="transcripts (default 250)")
    ap.add_argument("--latency", type=float, default=0.2,
                    help="the fake's delay per HTTP request, seconds (default 0.2)")
    ap.add_argument("--concurrency", type=int, default=2, help="pool concurrency (default 2)")
    ap.add_argument("--batch-polls", type=int, default=2,
                    help="retrieves a batch answers in_progress before it ends (default 2)")
    ap.add_argument("--poll-s", type=float, default=0.5, help="first batch poll interval")
    a = ap.parse_args()
    pool = run_pool(a.n, a.latency, a.concurrency)
    batch = run_batch(a.n, a.latency, a.batch_polls, a.poll_s)
    print(f"{a.n} transcripts, {a.latency * 1e3:.0f} ms per request")
    for name, r, price in (("pool ", pool, 1.0), ("batch", batch, 0.5)):
        print(f"  {name}: {r['wall_s']:7.2f} s wall, {r['requests']:4d} HTTP requests, "
              f"{r['tokens']} tokens, cost {r['tokens'] * price:,.0f} standard-token units, "
              f"{r['failed']} failed" + (f", {r['batches']} batch(es)" if "batches" in r else ""))
    print(f"  ratio batch/pool: wall {batch['wall_s'] / pool['wall_s']:.2f}, requests "
          f"{batch['requests'] / max(1, pool['requests']):.3f}, price "
          f"{(batch['tokens'] * 0.5) / max(1, pool['tokens']):.2f}")


if __name__ == "__main__":
    main()
