"""Window cut cost: a synthetic 1 GiB transcript vs a 10 MiB one, watermark 150 KB before EOF.

Both files are built from real corpus records (repeated) in a temp dir under /tmp that is
deleted afterwards. The cut is O(window): the two must cost about the same (ratio <= 2).
Runs are interleaved (big, small, big, …) from the page cache (one warm-up cut each). Also
reports the cut with the work filter (`record_types` and `slim`, as packets cut it: each
record's type read from its head, bookkeeping left out before the cap, each record left decoded
and slimmed, so more of the file is read)
against the plain cut, the conversation cut that also leaves out records already reflected
(`reflected`: a full memory of 65,536 uuids holding every other record of the window, as a
fork's copies would be; each record's `uuid` read from its end) against the conversation cut,
and a whole packet (window + digest + redaction) per file.

    .venv/bin/python bench/capture_window.py [--size-mb 1024] [--small-mb 10] [--runs 41]
"""

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from claude_autoharness.daemon.capture.packet import build_packet
from claude_autoharness.daemon.capture.records import WORK_TYPES
from claude_autoharness.daemon.capture.redact import default_redactor
from claude_autoharness.daemon.capture.window import cut_window
from claude_autoharness.daemon.reflected import MAX_KEPT, ReflectedRecords
from claude_autoharness.protocol.config import CaptureConfig

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "corpus" / "real"
TAIL = 150_000


def corpus_bytes() -> bytes:
    parts = [f.read_bytes() for f in sorted(CORPUS.rglob("*.jsonl")) if "hook_logs" not in f.name]
    return b"".join(p if p.endswith(b"\n") else p + b"\n" for p in parts)


def build(path: Path, size: int, block: bytes) -> None:
    with open(path, "wb") as f:
        written = 0
        while written + len(block) <= size:
            f.write(block)
            written += len(block)
        rest = block[: size - written]
        f.write(rest[: rest.rfind(b"\n") + 1])  # whole records only


def watermark(path: Path) -> int:
    """A line start about TAIL bytes before EOF."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        f.seek(size - TAIL)
        chunk = f.read(TAIL)
    return size - TAIL + chunk.index(b"\n") + 1


def stats(xs: list[float]) -> str:
    xs = sorted(xs)

    def p(q: float) -> float:
        return xs[min(len(xs) - 1, int(q * len(xs)))] * 1e3

    return f"median {statistics.median(xs) * 1e3:.3f} ms (p5 {p(0.05):.3f}, p95 {p(0.95):.3f}, n={len(xs)})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--small-mb", type=int, default=10)
    ap.add_argument("--runs", type=int, default=41)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ahb-win-", dir="/tmp"))
    try:
        block = corpus_bytes()
        files = {"big": tmp / "big.jsonl", "small": tmp / "small.jsonl"}
        t0 = time.perf_counter()
        build(files["big"], args.size_mb * 1024 * 1024, block)
        build(files["small"], args.small_mb * 1024 * 1024, block)
        print(f"built {args.size_mb} MiB + {args.small_mb} MiB from {len(block):,} corpus bytes "
              f"in {time.perf_counter() - t0:.1f} s")
        marks = {k: watermark(p) for k, p in files.items()}
        cfg, red = CaptureConfig(), default_redactor()
        cut: dict[str, list[float]] = {k: [] for k in files}
        pkt: dict[str, list[float]] = {k: [] for k in files}
        conv: dict[str, list[float]] = {k: [] for k in files}
        dedupe: dict[str, list[float]] = {k: [] for k in files}
        scanned = {}
        seen = {}
        for k, p in files.items():  # warm-up
            scanned[k] = cut_window(p, marks[k]).scanned_bytes
            build_packet(p, marks[k], cfg, red)
            own = cut_window(p, marks[k], record_types=WORK_TYPES, slim=True, reflected=()).uuids
            seen[k] = ReflectedRecords(str(tmp / f"{k}.seen"), max_kept=MAX_KEPT)
            seen[k].add([f"filler-{i}" for i in range(MAX_KEPT - len(own) // 2)] + own[::2])
        for _ in range(args.runs):
            for k, p in files.items():
                t = time.perf_counter()
                cut_window(p, marks[k])
                cut[k].append(time.perf_counter() - t)
                t = time.perf_counter()
                cut_window(p, marks[k], record_types=WORK_TYPES, slim=True)
                conv[k].append(time.perf_counter() - t)
                t = time.perf_counter()
                cut_window(p, marks[k], record_types=WORK_TYPES, slim=True, reflected=seen[k])
                dedupe[k].append(time.perf_counter() - t)
                t = time.perf_counter()
                build_packet(p, marks[k], cfg, red)
                pkt[k].append(time.perf_counter() - t)
        for k, p in files.items():
            print(f"{k:5s} {p.stat().st_size / 2**20:8.1f} MiB  bytes read per cut {scanned[k]:,}")
            print(f"      cut_window:   {stats(cut[k])}")
            print(f"      cut_window, work only: {stats(conv[k])}  "
                  f"(x{statistics.median(conv[k]) / statistics.median(cut[k]):.2f} the plain cut)")
            print(f"      ... and already-reflected left out: {stats(dedupe[k])}  "
                  f"(x{statistics.median(dedupe[k]) / statistics.median(conv[k]):.2f} "
                  f"work only)")
            print(f"      build_packet: {stats(pkt[k])}")
        r_cut = statistics.median(cut["big"]) / statistics.median(cut["small"])
        r_pkt = statistics.median(pkt["big"]) / statistics.median(pkt["small"])
        r_conv = statistics.median(conv["big"]) / statistics.median(conv["small"])
        print(f"ratio big/small (medians): cut_window {r_cut:.2f}, work only "
              f"{r_conv:.2f}, build_packet {r_pkt:.2f} "
              f"(O(window) requires <= 2)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
