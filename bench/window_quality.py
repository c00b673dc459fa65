"""What a window carries: the share of its bytes that is conversation and action, and how much
of a session the same window bytes hold, against the cut before records were slimmed.

For every Claude Code transcript under the corpora (tests/corpus by default; `--corpus DIR`
adds more, e.g. a checkout of public transcripts), it cuts the window a packet cuts from
watermark 0 (`record_types` + `slim`, the default caps) and, in the same run, the old cut as
a baseline, computed from the raw lines: the newest records of the four conversation types,
each kept raw and clipped to its first `max_record_bytes`, until `max_window_bytes`.

- conversation share: bytes of message text, thinking text, tool names and inputs, tool
  results, summaries and queued prompts (`conversation.conversation_bytes`) over the window's bytes
  (the old cut's clipped records are counted in proportion to what of them was kept);
- how much of a session, over the sessions the old cut could not hold whole: the transcript
  bytes the window's records stand for (from its oldest record to the end; a compaction
  summary's stand-in counted apart), and the same per window byte, "as records" counting
  neither the stand-in nor the summary record's own bytes. The span saturates when the whole
  session (or all of it after a compaction) fits with room to spare; the per-byte figure is
  what the same 200 KB would carry of a longer session.

Each figure is printed per corpus (a directory's first folder: `spotter`, `claude-code`, ...)
and overall; a file met twice (the same bytes under two corpora) counts once. Files that are
not Claude Code transcripts (hook logs, other agents' logs) are skipped and named, with what
they look like.

    .venv/bin/python bench/window_quality.py [--corpus DIR ...] [--window 200000]
        [--record 4000] [--tool 1500]
"""

import argparse
import hashlib
import json
from pathlib import Path

from conversation import conversation_bytes

from claude_autoharness.daemon.capture.kind import HEAD_BYTES, transcript_problem
from claude_autoharness.daemon.capture.packet import build_packet
from claude_autoharness.daemon.capture.records import WORK_TYPES
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


def new_cut(path: Path, window: int, record: int, tool: int) -> dict:
    w = cut_window(path, 0, max_window_bytes=window, max_record_bytes=record,
                   max_tool_bytes=tool, record_types=WORK_TYPES, slim=True)
    conv = summary = 0
    for line in w.data.splitlines(keepends=True):
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # the marker line, or a record kept raw
        conv += conversation_bytes(rec) if isinstance(rec, dict) else 0
        summary += len(line) if isinstance(rec, dict) and rec.get("isCompactSummary") else 0
    span = w.end - w.start - w.dropped_bytes - w.summarised_bytes
    return {"bytes": len(w.data), "conv": conv, "span": span, "summarised": w.summarised_bytes,
            "summary_bytes": summary, "clipped": w.clipped_records, "kept": w.kept_records}


def reached(path: Path, window: int, record: int, tool: int) -> int:
    """Bytes after the watermark a whole packet covers: window records, a compaction summary's
    stand-in, and the digest of what the window dropped (the old digest began at the watermark,
    so the old cut's figure is its span)."""
    cfg = CaptureConfig(max_window_bytes=window, max_record_bytes=record, max_tool_bytes=tool)
    p = build_packet(path, 0, cfg, default_redactor())
    return p.watermark_to - p.watermark_from - p.unseen_bytes


def _corpus(rel: Path) -> str:
    """The corpus a file belongs to: its first folder (the second under a `real` folder)."""
    parts = rel.parts[:-1]
    return "/".join(parts[1:2] if parts[:1] == ("real",) and len(parts) > 1 else parts[:1]) \
        or "."


def transcripts(dirs: list[Path]) -> tuple[list[tuple[str, Path]], list[str], int]:
    """(corpus, path) of each distinct transcript, the other files named, duplicates."""
    files, skipped, seen, twice = [], [], set(), 0
    for d in dirs:
        for p in sorted(d.rglob("*.jsonl")):
            data = p.read_bytes()
            digest = hashlib.sha256(data).digest()
            if digest in seen:
                twice += 1
                continue
            seen.add(digest)
            problem = transcript_problem(data[:HEAD_BYTES], whole=len(data) <= HEAD_BYTES)
            if problem:
                skipped.append(f"{p.relative_to(d)}: {problem}")
            else:
                files.append((_corpus(p.relative_to(d)), p))
    return files, skipped, twice


_SUMS = ("old_bytes", "old_conv", "new_bytes", "new_conv", "n", "old", "new", "summarised",
         "summary_bytes", "reached", "over_old_bytes", "over_new_bytes")


def _measure(corpus: str, p: Path, args, tot: dict) -> None:
    raw = p.read_bytes()
    old = old_cut(raw, args.window, args.record)
    new = new_cut(p, args.window, args.record, args.tool)
    for into in (tot.setdefault(corpus, dict.fromkeys(_SUMS, 0)), tot["overall"]):
        into["old_bytes"] += old["bytes"]
        into["old_conv"] += old["conv"]
        into["new_bytes"] += new["bytes"]
        into["new_conv"] += new["conv"]
    ratio = ""
    if old["span"] < len(raw):  # the old cut could not hold the session whole
        got = reached(p, args.window, args.record, args.tool)
        for into in (tot[corpus], tot["overall"]):
            into["n"] += 1
            into["old"] += old["span"]
            into["new"] += new["span"]
            into["summarised"] += new["summarised"]
            into["summary_bytes"] += new["summary_bytes"]
            into["reached"] += got
            into["over_old_bytes"] += old["bytes"]
            into["over_new_bytes"] += new["bytes"]
        ratio = f"{new['span'] / max(1, old['span']):.1f}"
    print(f"{p.name[:40]:<40} {corpus[:18]:<18} {len(raw):>9,} "
          f"{100 * old['conv'] / max(1, old['bytes']):>8.1f}% "
          f"{100 * new['conv'] / max(1, new['bytes']):>8.1f}% "
          f"{old['span']:>9,} {new['span']:>9,} {ratio:>5}")


def _report(name: str, t: dict) -> None:
    old_share = 100 * t["old_conv"] / max(1, t["old_bytes"])
    new_share = 100 * t["new_conv"] / max(1, t["new_bytes"])
    print(f"\n{name}: conversation and action share of window bytes: old {old_share:.1f} % "
          f"(estimate), new {new_share:.1f} % (goal >= 80 %)")
    if not t["n"]:
        print("  every session fits the old cut whole: nothing to compare for how much it holds")
        return
    both = t["new"] + t["summarised"]
    print(f"  session bytes the window holds, over the {t['n']} sessions the old cut could not "
          f"hold whole: old {t['old']:,}; as records {t['new']:,} "
          f"(x{t['new'] / max(1, t['old']):.1f}, goal >= 3); with the {t['summarised']:,} "
          f"stood for by the compaction summaries they hold {both:,} "
          f"(x{both / max(1, t['old']):.1f})")
    dense_old = t["old"] / max(1, t["over_old_bytes"])
    dense_rec = t["new"] / max(1, t["over_new_bytes"] - t["summary_bytes"])
    dense_new = both / max(1, t["over_new_bytes"])
    print(f"  per window byte: old {dense_old:.2f} session bytes; as records {dense_rec:.2f} "
          f"(x{dense_rec / max(1e-9, dense_old):.1f}, goal >= 3); with summaries "
          f"{dense_new:.2f} (x{dense_new / max(1e-9, dense_old):.1f})")
    print(f"  with the digest of what the window dropped: {t['reached']:,} reach the "
          f"reflector (x{t['reached'] / max(1, t['old']):.1f} the old cut)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", action="append", type=Path, default=[],
                    help="another directory of transcripts (repeatable)")
    ap.add_argument("--window", type=int, default=200_000, help="max_window_bytes")
    ap.add_argument("--record", type=int, default=4_000, help="max_record_bytes")
    ap.add_argument("--tool", type=int, default=CaptureConfig().max_tool_bytes,
                    help="max_tool_bytes")
    args = ap.parse_args()
    files, skipped, twice = transcripts([REPO / "tests" / "corpus", *args.corpus])
    tot: dict[str, dict] = {"overall": dict.fromkeys(_SUMS, 0)}
    print(f"{'file':<40} {'corpus':<18} {'size':>9} {'old conv%':>9} {'new conv%':>9} "
          f"{'old span':>9} {'new span':>9} {'x':>5}")
    for corpus, p in files:
        _measure(corpus, p, args, tot)
    print(f"\n{len(files)} transcripts ({twice} files met twice counted once); skipped "
          f"{len(skipped)} other files:")
    for s in skipped:
        print(f"  {s}")
    print(f"\nwindow {args.window:,} bytes, records {args.record:,} bytes, "
          f"tool inputs and results {args.tool:,} bytes")
    for name in sorted(tot, key=lambda k: (k == "overall", k)):
        _report(name, tot[name])


if __name__ == "__main__":
    main()
