"""Watcher indexing throughput while 200 transcripts grow concurrently.

200 transcripts in 20 project directories under a temp `projects/` (deleted afterwards) grow by
real corpus records. Two measurements:

1. scan throughput, interleaved round by round: each round appends ~`--kb-per-round` KB to
   every file, then (a) the watcher's `scan_path` over all 200 (TranscriptIndex as indexer) and
   (b) the baseline: a plain `open/seek/read` of the same new bytes of every file (on a copy of
   the tree grown identically), alternating which goes first. MB/s = new bytes / time.
2. end to end: `TranscriptWatcher.run()` (watchfiles) running while 8 writer threads append to
   the 200 files; MB/s = bytes appended / time until all of it is indexed (includes the
   watcher's debounce, so it is a lower bound on what the loop can sustain).

    .venv/bin/python bench/watch_index.py [--files 200] [--rounds 15] [--kb-per-round 64]
"""

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import anyio

from claude_autoharness.daemon.watcher import TranscriptIndex, TranscriptWatcher

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "corpus" / "real"


def corpus_lines() -> list[bytes]:
    out = []
    for f in sorted(CORPUS.rglob("*.jsonl")):
        if "hook_logs" not in f.name:
            out += [ln + b"\n" for ln in f.read_bytes().splitlines() if ln.strip()]
    return out


def make_tree(root: Path, n: int) -> list[Path]:
    paths = []
    for i in range(n):
        d = root / "projects" / f"-home-u-proj{i % 20:02d}"
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"{i:08d}-0000-4000-8000-000000000000.jsonl"
        p.write_bytes(b"")
        paths.append(p)
    return paths


class Feeder:
    """Hands out real records round-robin, `kb` KB per call."""

    def __init__(self, lines: list[bytes]):
        self.lines, self.i = lines, 0

    def take(self, nbytes: int) -> bytes:
        out, size = [], 0
        while size < nbytes:
            ln = self.lines[self.i % len(self.lines)]
            self.i += 1
            out.append(ln)
            size += len(ln)
        return b"".join(out)


def baseline_read(paths: list[Path], offsets: dict) -> int:
    total = 0
    for p in paths:
        with open(p, "rb") as f:
            f.seek(offsets[p])
            data = f.read()
        offsets[p] += len(data)
        total += len(data)
    return total


def scan_bench(root: Path, lines: list[bytes], files: int, rounds: int, kb: int) -> None:
    a, b = make_tree(root / "a", files), make_tree(root / "b", files)
    index = TranscriptIndex()
    w = TranscriptWatcher(root / "a" / "projects", [index])
    offsets = {p: 0 for p in b}
    feeder = Feeder(lines)
    t_scan, t_base, n_scan, n_base = [], [], 0, 0
    for r in range(rounds):
        for pa, pb in zip(a, b, strict=False):
            chunk = feeder.take(kb * 1024)
            with open(pa, "ab") as f:
                f.write(chunk)
            with open(pb, "ab") as f:
                f.write(chunk)
        order = ("scan", "base") if r % 2 == 0 else ("base", "scan")
        for side in order:
            t = time.perf_counter()
            if side == "scan":
                before = w.bytes_fed
                for p in a:
                    w.scan_until_done(p)
                got = w.bytes_fed - before
                t_scan.append(time.perf_counter() - t)
                n_scan += got
            else:
                got = baseline_read(b, offsets)
                t_base.append(time.perf_counter() - t)
                n_base += got
    per_round = n_scan / rounds
    ms = statistics.median(t_scan)
    mb = statistics.median(t_base)
    print(f"scan: {files} files x {kb} KB per round, {rounds} rounds, {per_round / 1e6:.1f} MB per round")
    print(f"  watcher scan_path + TranscriptIndex: {per_round / ms / 1e6:8.1f} MB/s "
          f"(median {ms * 1e3:.1f} ms/round, min {min(t_scan) * 1e3:.1f}, max {max(t_scan) * 1e3:.1f})")
    print(f"  baseline open/seek/read:             {per_round / mb / 1e6:8.1f} MB/s "
          f"(median {mb * 1e3:.1f} ms/round, min {min(t_base) * 1e3:.1f}, max {max(t_base) * 1e3:.1f})")
    print(f"  ratio watcher/baseline time: {ms / mb:.2f}; bytes read by the watcher = "
          f"{w.bytes_read:,} for {n_scan:,} appended ({index.stats()['transcripts']} indexed)")


def end_to_end(root: Path, lines: list[bytes], files: int, mb_total: int, writers: int) -> None:
    paths = make_tree(root / "e2e", files)
    projects = root / "e2e" / "projects"
    index = TranscriptIndex()
    w = TranscriptWatcher(projects, [index], debounce_ms=50, step_ms=10)
    target = mb_total * 1024 * 1024
    written = [0] * writers

    def writer(k: int) -> None:
        feeder = Feeder(lines[k::writers] or lines)
        mine = paths[k::writers]
        while written[k] < target // writers:
            for p in mine:
                chunk = feeder.take(16 * 1024)
                with open(p, "ab") as f:
                    f.write(chunk)
                written[k] += len(chunk)

    async def run() -> float:
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(w.run, stop)
            while not w.watching:
                await anyio.sleep(0.01)
            await anyio.sleep(0.2)
            t0 = time.perf_counter()
            threads = [threading.Thread(target=writer, args=(k,)) for k in range(writers)]
            for t in threads:
                t.start()
            total_on_disk = None
            with anyio.fail_after(300):
                while True:
                    await anyio.sleep(0.01)
                    if total_on_disk is None and not any(t.is_alive() for t in threads):
                        total_on_disk = sum(written)
                    if total_on_disk is not None and w.bytes_fed >= total_on_disk:
                        break
            elapsed = time.perf_counter() - t0
            stop.set()
        return elapsed

    elapsed = anyio.run(run)
    total = sum(written)
    print(f"end to end: {files} files, {writers} writer threads, {total / 1e6:.1f} MB appended")
    print(f"  indexed all of it in {elapsed:.2f} s: {total / elapsed / 1e6:.1f} MB/s "
          f"(bytes read {w.bytes_read:,})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--kb-per-round", type=int, default=64)
    ap.add_argument("--e2e-mb", type=int, default=400)
    ap.add_argument("--writers", type=int, default=8)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ahb-watch-", dir="/tmp"))
    try:
        lines = corpus_lines()
        scan_bench(root, lines, args.files, args.rounds, args.kb_per_round)
        end_to_end(root, lines, args.files, args.e2e_mb, args.writers)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
