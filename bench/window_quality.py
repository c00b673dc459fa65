"""What a window carries: the share of its bytes that is conversation and action, and how much
of a session the same window bytes hold, against the cut before records were slimmed.

For every Claude Code transcript under the corpora (tests/corpus by default; `--corpus DIR`
adds more, e.g. a checkout of public transcripts), it cuts the window a packet cuts from
watermark 0 (`record_types` + `slim`, the default caps) and, in the same run, the old cut as
a baseline, computed from the raw lines: the newest records of the four conversation types,
each kept raw and clipped to its first `max_record_bytes`, until `max_window_bytes`.

- conversation share: bytes of message text, thinking text, tool names and inputs, tool
  results, summaries and queued prompts (`records.conversation_bytes`) over the window's bytes
  (the old cut's clipped records are counted in proportion to what of them was kept);
- how much of a session: the transcript bytes the window's records stand for (from its oldest
  record to the end; a compaction summary's stand-in counted apart), over the sessions the old
  cut could not hold whole.

Files that are not Claude Code transcripts (hook logs, other agents' logs) are skipped and
named, with what they look like.

    .venv/bin/python bench/window_quality.py [--corpus DIR ...] [--window 200000] [--record 4000]
"""

import argparse
import json
from pathlib import Path

from claude_autoharness.daemon.capture.kind import HEAD_BYTES, transcript_problem
from claude_autoharness.daemon.capture.packet import build_packet
from claude_autoharness.daemon.capture.records import WORK_TYPES, conversation_bytes
from claude_autoharness.daemon.capture.redact import default_redactor
from claude_autoharness.daemon.capture.window import cut_window
from claude_autoharness.protocol.config import CaptureConfig

REPO = Path(__file__).resolve().parents[1]
OLD_TYPES = {"user", "assistant", "system", "summary"}  # what the old cut let in, raw
OLD_MARK = len(b" [autoharness: record clipped, 4000 of 40000 bytes kept]\n")


def old_cut(raw: bytes, window: int, record: int) -> dict:
    """The old window from offset 0: raw conversation records, newest first, heads only."""
    used = conv = 0
    start = pos = len(raw)
    full = False
    for line in reversed(raw.splitlines(keepends=True)):
        pos -= len(line)
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if not isinstance(rec, dict) or rec.get("type") not in OLD_TYPES:
            continue
        kept = len(line) if len(line) <= record else record + OLD_MARK
        if used + kept > window:
            full = True
            break
        used += kept
        conv += conversation_bytes(rec) * min(1.0, record / len(line))
        start = pos
    return {"bytes": used, "conv": conv, "span": len(raw) - (start if full else 0)}


def new_cut(path: Path, window: int, record: int) -> dict:
    w = cut_window(path, 0, max_window_bytes=window, max_record_bytes=record,
                   record_types=WORK_TYPES, slim=True)
    conv = 0
    for line in w.data.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # the marker line, or a record kept raw
        conv += conversation_bytes(rec) if isinstance(rec, dict) else 0
    span = w.end - w.start - w.dropped_bytes - w.summarised_bytes
    return {"bytes": len(w.data), "conv": conv, "span": span, "summarised": w.summarised_bytes,
            "clipped": w.clipped_records, "kept": w.kept_records}


def reached(path: Path, window: int, record: int) -> int:
    """Bytes after the watermark a whole packet covers: window records, a compaction summary's
    stand-in, and the digest of what the window dropped (the old digest began at the watermark,
    so the old cut's figure is its span)."""
    cfg = CaptureConfig(max_window_bytes=window, max_record_bytes=record)
    p = build_packet(path, 0, cfg, default_redactor())
    return p.watermark_to - p.watermark_from - p.unseen_bytes


def transcripts(dirs: list[Path]) -> tuple[list[Path], list[str]]:
    files, skipped = [], []
    for d in dirs:
        for p in sorted(d.rglob("*.jsonl")):
            data = p.read_bytes()
            problem = transcript_problem(data[:HEAD_BYTES], whole=len(data) <= HEAD_BYTES)
            if problem:
                skipped.append(f"{p.relative_to(d)}: {problem}")
            else:
                files.append(p)
    return files, skipped


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", action="append", type=Path, default=[],
                    help="another directory of transcripts (repeatable)")
    ap.add_argument("--window", type=int, default=200_000, help="max_window_bytes")
    ap.add_argument("--record", type=int, default=4_000, help="max_record_bytes")
    args = ap.parse_args()
    dirs = [REPO / "tests" / "corpus", *args.corpus]
    files, skipped = transcripts(dirs)
    tot = {"old_bytes": 0, "old_conv": 0.0, "new_bytes": 0, "new_conv": 0}
    over = {"old": 0, "new": 0, "summarised": 0, "n": 0, "reached": 0, "old_bytes": 0,
            "new_bytes": 0}
    print(f"{'file':<46} {'size':>9} {'old conv%':>9} {'new conv%':>9} "
          f"{'old span':>9} {'new span':>9} {'x':>5}")
    for p in files:
        raw = p.read_bytes()
        old, new = old_cut(raw, args.window, args.record), new_cut(p, args.window, args.record)
        tot["old_bytes"] += old["bytes"]
        tot["old_conv"] += old["conv"]
        tot["new_bytes"] += new["bytes"]
        tot["new_conv"] += new["conv"]
        ratio = ""
        if old["span"] < len(raw):  # the old cut could not hold the session whole
            over["n"] += 1
            over["old"] += old["span"]
            over["new"] += new["span"]
            over["summarised"] += new["summarised"]
            over["reached"] += reached(p, args.window, args.record)
            over["old_bytes"] += old["bytes"]
            over["new_bytes"] += new["bytes"]
            ratio = f"{(new['span'] + new['summarised']) / max(1, old['span']):.1f}"
        print(f"{p.name[:46]:<46} {len(raw):>9,} "
              f"{100 * old['conv'] / max(1, old['bytes']):>8.1f}% "
              f"{100 * new['conv'] / max(1, new['bytes']):>8.1f}% "
              f"{old['span']:>9,} {new['span']:>9,} {ratio:>5}")
    print(f"\n{len(files)} transcripts; skipped {len(skipped)} other files:")
    for s in skipped:
        print(f"  {s}")
    print(f"\nwindow {args.window:,} bytes, records {args.record:,} bytes")
    old_share = 100 * tot["old_conv"] / max(1, tot["old_bytes"])
    new_share = 100 * tot["new_conv"] / max(1, tot["new_bytes"])
    print(f"conversation and action share of window bytes: old {old_share:.1f} % (estimate), "
          f"new {new_share:.1f} % (goal >= 80 %)")
    if over["n"]:
        both = over["new"] + over["summarised"]
        print(f"session bytes the window holds, over the {over['n']} sessions the old cut could "
              f"not hold whole: old {over['old']:,}; new {both:,} "
              f"(x{both / max(1, over['old']):.1f}, goal >= 3): {over['new']:,} as records "
              f"(x{over['new'] / max(1, over['old']):.1f}) and {over['summarised']:,} stood for "
              f"by the compaction summaries they hold")
        dense_old = over["old"] / max(1, over["old_bytes"])
        dense_new = both / max(1, over["new_bytes"])
        print(f"  per window byte: old {dense_old:.2f} session bytes, new {dense_new:.2f} "
              f"(x{dense_new / max(1e-9, dense_old):.1f}; a window that is not full holds all "
              "there was)")
        print(f"  with the digest of what the window dropped: {over['reached']:,} reach the "
              f"reflector (x{over['reached'] / max(1, over['old']):.1f} the old cut)")


if __name__ == "__main__":
    main()
