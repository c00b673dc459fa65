"""Marker scan throughput vs `grep -c -F '<!-- learning'` on the same files, same run.

Builds ~500 MB (``--size-mb``) of transcripts from the real corpus records, with one marker
line per ~200 KB (three in four a real assistant marker, one in four the same text quoted in a
tool result, which the prefilter must reject after decoding), in a temp dir that is deleted
afterwards. Files are read once first so both sides run from the page cache; the two sides are
interleaved run by run. Prints medians with min/max and the ratio of medians.

    .venv/bin/python bench/markers.py [--size-mb 500] [--runs 7]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from claude_autoharness.daemon.learnings.markers import MarkerIndexer, scan_file

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "corpus" / "real"
MARKER_EVERY = 200 * 1024
FILES = 10
READ_CHUNK = 1024 * 1024  # watcher-sized reads; 8 MiB allocations cost page faults


def corpus_lines(corpus: Path) -> list[bytes]:
    lines = []
    for f in sorted(corpus.rglob("*.jsonl")):
        if "hook_logs" in f.name:
            continue  # hook payload log, not a transcript
        lines += [ln + b"\n" for ln in f.read_bytes().splitlines() if ln.strip()]
    return lines


def templates(lines: list[bytes]) -> tuple[dict, dict]:
    """A real assistant text record and a real tool_result record to carry the markers."""
    asst = tool = None
    for ln in lines:
        r = json.loads(ln)
        c = (r.get("message") or {}).get("content")
        if not isinstance(c, list) or not c or r.get("isSidechain"):
            continue
        if asst is None and r.get("type") == "assistant" and c[0].get("type") == "text":
            asst = r
        if tool is None and r.get("type") == "user" and c[0].get("type") == "tool_result":
            tool = r
    return asst, tool


def marker_line(asst: dict, tool: dict, i: int) -> tuple[bytes, bool]:
    text = (f"<!-- learning\ntopic: bench-topic-{i}\nkind: decision\ndoc-impact: none\n"
            f"body: Lesson {i} because the benchmark needs one.\n-->")
    if i % 4 == 3:
        r = json.loads(json.dumps(tool))
        r["message"]["content"][0]["content"] = f"quoted:\n{text}"
        return (json.dumps(r) + "\n").encode(), False
    r = json.loads(json.dumps(asst))
    r["message"]["content"] = [{"type": "text", "text": f"Done.\n\n{text}"}]
    return (json.dumps(r) + "\n").encode(), True


def build(dest: Path, size_mb: int, corpus: Path) -> tuple[list[Path], int, int]:
    lines = corpus_lines(corpus)
    asst, tool = templates(lines)
    per_file = size_mb * 1024 * 1024 // FILES
    files, real, candidates, n = [], 0, 0, 0
    for k in range(FILES):
        path = dest / f"bench-{k}.jsonl"
        written = since_marker = 0
        with open(path, "wb") as f:
            while written < per_file:
                ln = lines[n % len(lines)]
                n += 1
                if since_marker >= MARKER_EVERY:
                    ln, is_real = marker_line(asst, tool, candidates)
                    candidates += 1
                    real += is_real
                    since_marker = 0
                f.write(ln)
                written += len(ln)
                since_marker += len(ln)
        files.append(path)
    return files, real, candidates


def scan_mmap(files) -> int:
    """Offline report / first-start backfill: `scan_file` (chunked reads, bounded by lines)."""
    return sum(len(scan_file(str(f))) for f in files)


def scan_feed(files) -> int:
    """The watcher's path: read new bytes (1 MiB at a time), feed complete lines."""
    ix = MarkerIndexer()
    for f in files:
        with open(f, "rb") as fh:
            offset, carry = 0, b""
            while chunk := fh.read(READ_CHUNK):
                buf = carry + chunk
                cut = buf.rfind(b"\n") + 1
                ix.feed(str(f), offset, buf[:cut])
                offset += cut
                carry = buf[cut:]
    return sum(len(ix.markers(s)) for s in ix.slugs())


def grep(files) -> int:
    out = subprocess.run(["grep", "-c", "-F", "--", "<!-- learning", *map(str, files)],
                         capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"},
                         check=False).stdout
    return sum(int(line.rsplit(":", 1)[1]) for line in out.splitlines())


def timed(fn, files) -> tuple[float, int]:
    t = time.perf_counter()
    n = fn(files)
    return time.perf_counter() - t, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mb", type=int, default=500)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ah-bench-", dir="/tmp"))
    try:
        files, real, candidates = build(tmp, args.size_mb, args.corpus)
        total = sum(f.stat().st_size for f in files)
        mb = total / 1e6
        for f in files:  # warm the page cache for both sides
            with open(f, "rb") as fh:
                while fh.read(READ_CHUNK):
                    pass
        sides = {"scan_file (reads)": scan_mmap, "indexer.feed (reads)": scan_feed,
                 "grep -c -F": grep}
        times: dict[str, list[float]] = {k: [] for k in sides}
        for _ in range(args.runs):
            for name, fn in sides.items():
                dt, n = timed(fn, files)
                want = candidates if name.startswith("grep") else real
                if n != want:
                    sys.exit(f"{name}: found {n}, expected {want}")
                times[name].append(dt)
        print(f"{mb:.0f} MB in {len(files)} files, {candidates} marker lines "
              f"({real} real, {candidates - real} quoted), {args.runs} interleaved runs")
        med = {}
        for name, ts in times.items():
            rates = sorted(mb / t for t in ts)
            med[name] = statistics.median(rates)
            print(f"  {name:20} median {med[name]:8.0f} MB/s   "
                  f"(min {rates[0]:.0f}, max {rates[-1]:.0f})")
        g = med["grep -c -F"]
        for name in list(sides)[:2]:
            print(f"  ratio {name} / grep: {med[name] / g:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
