"""What evidence costs: grounding a verdict against a window, and a lifecycle pass with its
stale-path check, each against a baseline measured in the same run.

- *loads*: which skills a window shows loaded, resolved per layer (`loads.refs` then
  `loads.resolve`) on a full-size window (200 KB of real corpus records), against
  `evidence_in_window` — the quote check every proposal already pays — on the same window;
- *pass*: `lifecycle_run` (feedback counts from history, the stale check listing the git tree
  with `git ls-files`, the decisions) for a project of `--skills` skills naming paths in a git
  repository of `--files` files, against `list_skills` alone (what the pass read before).

Runs interleave; prints medians, spreads and the ratios of medians. Temp dirs are removed.

    .venv/bin/python bench/evidence.py [--runs 15] [--skills 20] [--files 5000]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import summary  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "corpus" / "real"


def window_text(nbytes: int) -> str:
    lines: list[str] = []
    for f in sorted(CORPUS.rglob("*.jsonl")):
        lines += [ln for ln in f.read_text(errors="replace").splitlines() if ln.strip()]
    out, size, i = [], 0, 0
    while size < nbytes and lines:
        out.append(lines[i % len(lines)][:4000])
        size += len(out[-1]) + 1
        i += 1
    return "\n".join(out)


def timed(fn, runs: int) -> list[float]:
    xs = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        xs.append(time.perf_counter() - t)
    return xs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--skills", type=int, default=20)
    ap.add_argument("--files", type=int, default=5000)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ahb-ev-", dir="/tmp"))
    try:
        (tmp / "h").mkdir(mode=0o700)
        (tmp / "claude").mkdir()
        os.environ.update(AUTOHARNESS_HOME=str(tmp / "h"), CLAUDE_CONFIG_DIR=str(tmp / "claude"))
        from claude_autoharness.daemon.persist.dirs import ensure_private_dir
        from claude_autoharness.daemon.promote import loads as skill_loads
        from claude_autoharness.daemon.promote.evidence import evidence_in_window
        from claude_autoharness.daemon.promote.land import Promoter
        from claude_autoharness.daemon.proposals import Intent, Proposal
        from claude_autoharness.protocol import paths
        from claude_autoharness.protocol.config import PromoterConfig

        window = window_text(200_000)
        quote = window[len(window) // 2:len(window) // 2 + 60]
        loads, quotes = [], []
        for _ in range(a.runs):
            loads += timed(lambda: skill_loads.resolve(skill_loads.refs(window),
                                                       skill_loads.Layers.of(str(tmp))), 1)
            quotes += timed(lambda: evidence_in_window(quote, window), 1)

        proj = tmp / "proj"
        for k in range(a.files):
            p = proj / f"src/m{k % 50}/f{k}.py"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("x\n")
        (proj / ".claude/skills").mkdir(parents=True)
        env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@example.com",
                   GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@example.com")
        for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "bench"]):
            subprocess.run(["git", "-C", str(proj), *cmd], check=True, env=env)
        ensure_private_dir(paths.state_dir())
        pr = Promoter(PromoterConfig())
        ev = "the user said: keep these rules"
        for k in range(a.skills):
            body = f"Edit `src/m{k}/f{k}.py` and `src/m{k}/gone{k}.py` with care."
            p = Proposal(action="create", skill=f"rule-{k}", layer="project", reason="bench",
                         evidence=ev, description=f"Use when module m{k} alpha{k} beta{k} "
                                                  f"gamma{k} changes.", body=body)
            out = pr.promote(Intent(id=f"b{k}", source="reflector", created_at=0.0,
                                    proposal=p), ev, str(proj))
            assert out.status == "landed", out.findings
        passes, lists = [], []
        for _ in range(a.runs):
            passes += timed(lambda: pr.lifecycle_run(str(proj)), 1)
            lists += timed(lambda: pr.list_skills(str(proj)), 1)
        med = sorted
        print(f"loads resolved, 200 KB window:  {summary(loads)}")
        print(f"evidence_in_window (baseline):  {summary(quotes)}")
        print(f"  ratio of medians: {med(loads)[len(loads) // 2] / med(quotes)[len(quotes) // 2]:.2f}")
        print(f"lifecycle_run, {a.skills} skills, {a.files} files: {summary(passes)}")
        print(f"list_skills (baseline):         {summary(lists)}")
        print(f"  ratio of medians: {med(passes)[len(passes) // 2] / med(lists)[len(lists) // 2]:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
