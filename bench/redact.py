"""Redaction throughput over real transcript bytes vs `re.sub` of one trivial pattern.

Same text, same run, interleaved (redactor, baseline, naive, redactor, …); medians with the
min–max spread, in CPU time of this process (wall time on a shared machine measures the other
tenants). Texts: the whole real corpus (≈4.7 MB) and window-sized (200 KB) slices of it. The
target is 30 MB/s for the redactor.
For context it also times the naive design to avoid: every rule's pattern in one
alternation, applied with `re.sub` at every position.

    .venv/bin/python bench/redact.py [--runs 9]
"""

import argparse
import re
import statistics
import time
from pathlib import Path

from claude_autoharness.daemon.capture.redact import Redactor, default_redactor, load_rule_data

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "corpus" / "real"


def corpus_text() -> str:
    data = b"".join(f.read_bytes() for f in sorted(CORPUS.rglob("*.jsonl")))
    return data.decode("utf-8", "replace")


def naive(rules: list[dict]) -> re.Pattern:
    parts = []
    for i, d in enumerate(rules):
        pat = re.sub(r"\(\?P<(\w+)>", rf"(?P<\1_{i}>", d["pattern"])
        m = re.match(r"^\(\?([aiLmsux]+)\)", pat)
        pat = f"(?{m.group(1)}:{pat[m.end():]})" if m else f"(?:{pat})"
        parts.append(pat)
    return re.compile("|".join(parts))


TARGET_MB_S = 30.0


def timed(fn, text: str) -> float:
    t = time.process_time()
    fn(text)
    return time.process_time() - t


def report(name: str, nbytes: int, xs: list[float]) -> float:
    med = statistics.median(xs)
    print(f"  {name:28s} {nbytes / med / 1e6:9.1f} MB/s  (median {med * 1e3:8.2f} ms, "
          f"min {min(xs) * 1e3:.2f}, max {max(xs) * 1e3:.2f}, n={len(xs)})")
    return med


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()
    red: Redactor = default_redactor()
    trivial = re.compile(r"ghp_[A-Za-z0-9]{36}")
    everything = naive(load_rule_data())
    text = corpus_text()
    window = 200_000
    slices = [text[i : i + window] for i in range(0, len(text) - window, window)]
    sides = {
        "Redactor.redact": lambda t: red.redact(t),
        "re.sub(one trivial pattern)": lambda t: trivial.sub("[REDACTED]", t),
        "naive one-alternation re.sub": lambda t: everything.sub("[REDACTED]", t),
    }
    for label, texts in (("whole corpus", [text]), (f"{len(slices)} slices of 200 KB", slices)):
        nbytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
        print(f"{label}: {nbytes:,} bytes")
        times: dict[str, list[float]] = {k: [] for k in sides}
        runs = args.runs if label == "whole corpus" else max(3, args.runs // 3)
        for fn in sides.values():  # warm-up
            fn(texts[0])
        for r in range(runs):
            for k, fn in sides.items():
                if k.startswith("naive") and r >= 1:
                    continue  # ~0.4 MB/s: one run is plenty
                times[k].append(sum(timed(fn, t) for t in texts))
        med = {k: report(k, nbytes, xs) for k, xs in times.items()}
        slower = med['Redactor.redact'] / med['re.sub(one trivial pattern)']
        faster = med['naive one-alternation re.sub'] / med['Redactor.redact']
        print(f"  ratio baseline/redactor time: {slower:.1f}x slower than one trivial re.sub; "
              f"{faster:.1f}x faster than the naive alternation")
        rate = nbytes / med["Redactor.redact"] / 1e6
        print(f"  redactor {rate:.1f} MB/s against a target of {TARGET_MB_S:.0f} MB/s: "
              + ("met" if rate >= TARGET_MB_S else "NOT met"))
    print(f"findings in the corpus: {red.redact(text)[1]}")


if __name__ == "__main__":
    main()
