"""How well the duplicate guard against the user's own memory (CLAUDE.md, auto memory) tells a
rule said again from a different one: on the hand-written pairs of
tests/fixtures/memory_paraphrases.json (a kept rule and a skill's description and body, written
apart from the guard), how many restatements it catches and how many different rules it
wrongly catches, against the baseline measured in the same run: the word-overlap test between
skills (`duplicate.near`, description against the rule), which the guard used before. Also the
time per check of each, interleaved, and their ratio.

    .venv/bin/python bench/memory_guard.py [--runs 21]
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import summary  # noqa: E402

from claude_autoharness.daemon.promote import duplicate, restate  # noqa: E402

PAIRS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "memory_paraphrases.json"


def overlap(p: dict) -> bool:
    return duplicate.near("a-new-skill", p["description"], "", p["rule"]) is not None


def contained(p: dict) -> bool:
    return restate.restates(p["rule"], p["description"], p["body"])


def rates(fn, pairs: list[dict]) -> tuple[int, int, int, int]:
    """(caught, restatements, wrongly caught, different rules)."""
    same = [p for p in pairs if p["same"]]
    other = [p for p in pairs if not p["same"]]
    return (sum(fn(p) for p in same), len(same), sum(fn(p) for p in other), len(other))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=21)
    a = ap.parse_args()
    pairs = json.loads(PAIRS.read_text())["pairs"]
    for label, fn in (("word overlap (baseline)", overlap), ("restate (the guard)", contained)):
        c, n, w, m = rates(fn, pairs)
        print(f"{label:<24} caught {c}/{n} ({c / n:.0%}), wrongly caught {w}/{m} ({w / m:.0%})")
    times: dict[str, list[float]] = {"overlap": [], "restate": []}
    for _ in range(a.runs):
        for label, fn in (("overlap", overlap), ("restate", contained)):
            t = time.perf_counter()
            for p in pairs:
                fn(p)
            times[label].append((time.perf_counter() - t) / len(pairs))
    for label, xs in times.items():
        print(f"{label:<8} per check: {summary(xs)}")
    med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    print(f"ratio restate / overlap (medians): {med['restate'] / med['overlap']:.2f}")


if __name__ == "__main__":
    main()
