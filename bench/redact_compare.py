"""Our redaction rules against detect-secrets (a maintained scanner) on the same corpus.

For each side: recall on the planted kinds (tests/secret_plant.py: the 22 probe kinds and the
two held-out sets, each kind in six encodings, planted into real records), false positives on
the real corpus (tests/corpus: public transcripts with no secrets in them, so every finding
there is a false one), and throughput on those real bytes (CPU time, median of runs).

detect-secrets reports findings, it does not redact: "detected" counts a planted secret when a
reported value overlaps it; "removed" replaces every reported value and then checks, as for
our rules, that no piece of the secret is left. It scans line by line (a JSONL record is a
line) with its default plugins.

detect-secrets is not a dependency. Without it this prints our figures and how to get it:

    .venv/bin/pip install detect-secrets   # into the project's venv, only to compare
    .venv/bin/python bench/redact_compare.py [--runs 3]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from claude_autoharness.daemon.capture.redact import default_redactor  # noqa: E402
from secret_plant import HELD_OUT, HELD_OUT_2, ISSUE_KINDS, cases, leaked, pieces  # noqa: E402

CORPUS = ROOT / "tests" / "corpus"
SETS = (("probe (22 kinds)", ISSUE_KINDS), (f"held-out ({len(HELD_OUT)} kinds)", HELD_OUT),
        (f"held-out 2 ({len(HELD_OUT_2)} kinds)", HELD_OUT_2))


class Ours:
    name = "autoharness rules"

    def __init__(self):
        self.r = default_redactor()

    def redact(self, text: str) -> tuple[str, list[str]]:
        found = [text[s:e] for _k, s, e in self.r.find(text)]
        return self.r.redact(text)[0], found

    def findings(self, text: str) -> list[str]:
        return [text[s:e] for _k, s, e in self.r.find(text)]


class DetectSecrets:
    name = "detect-secrets"

    def __init__(self):
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import default_settings

        self._scan, self._settings = scan_line, default_settings

    def findings(self, text: str) -> list[str]:
        out = []
        with self._settings():
            for line in text.splitlines():
                out += [s.secret_value for s in self._scan(line) if s.secret_value]
        return out

    def redact(self, text: str) -> tuple[str, list[str]]:
        found = self.findings(text)
        for v in sorted(set(found), key=len, reverse=True):
            text = text.replace(v, "[REDACTED]")
        return text, found


def recall(side, kinds) -> tuple[int, int, int]:
    """(planted, detected, removed)."""
    planted = detected = removed = 0
    for _kind, _form, text, secrets in cases(kinds):
        out, found = side.redact(text)
        for s in secrets:
            planted += 1
            parts = pieces(s)
            if any(f and (f in s or any(p in f for p in parts)) for f in found):
                detected += 1
            if not leaked(s, out):
                removed += 1
    return planted, detected, removed


def corpus() -> list[str]:
    return [p.read_text(encoding="utf-8", errors="replace") for p in sorted(CORPUS.rglob("*.jsonl"))]


def false_positives(side, texts) -> tuple[int, int]:
    """(findings, bytes they cover) on the real corpus."""
    n = size = 0
    for t in texts:
        found = side.findings(t)
        n += len(found)
        size += sum(len(f.encode()) for f in found)
    return n, size


def throughput(side, texts, runs: int) -> float:
    nbytes = sum(len(t.encode()) for t in texts)
    xs = []
    for _ in range(runs):
        t0 = time.process_time()
        for t in texts:
            side.findings(t)
        xs.append(time.process_time() - t0)
    return nbytes / statistics.median(xs) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    sides: list = [Ours()]
    try:
        sides.append(DetectSecrets())
    except ImportError:
        print("detect-secrets is not installed: only our figures. To compare:\n"
              "  .venv/bin/pip install detect-secrets && .venv/bin/python bench/redact_compare.py\n")
    texts = corpus()
    nbytes = sum(len(t.encode()) for t in texts)
    for side in sides:
        print(f"== {side.name}")
        for label, kinds in SETS:
            planted, detected, removed = recall(side, kinds)
            print(f"  {label:24s} detected {detected:4d}/{planted} = {100 * detected / planted:5.1f} %"
                  f"   removed {removed:4d}/{planted} = {100 * removed / planted:5.1f} %")
        n, size = false_positives(side, texts)
        print(f"  real corpus ({nbytes:,} bytes, no secrets): {n} findings over {size:,} bytes "
              f"({100 * size / nbytes:.3f} %)")
        print(f"  throughput on the real corpus: {throughput(side, texts, args.runs):.2f} MB/s (CPU)")


if __name__ == "__main__":
    main()
