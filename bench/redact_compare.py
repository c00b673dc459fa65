"""Our redaction rules against two maintained rule sets on the same corpus: detect-secrets and
gitleaks' rules.

For each side, on the corpus written apart from the rules (tests/redact_corpus.py) and on the
blind set written before the rules were read (tests/redact_blind_set.py), each measured as
bench/redact.py does: recall (cases that lose every piece of their secret, as written and
inside real records), false positives (ordinary artifacts changed), and throughput on the real
sessions (tests/corpus, CPU time). Also recall on the earlier planted sets (tests/secret_plant.py:
the probe's 22 kinds and two held-out sets, six encodings each).

Neither scanner redacts: a side's `redact` replaces every value it reports, longest first.

* **detect-secrets** (a Python package, not a dependency): default plugins, line by line.
* **gitleaks** is a Go program; its rules are data (`config/gitleaks.toml`). This bench loads
  that file at run time from a path you give (it is not vendored) and applies it as gitleaks
  does: a rule runs where one of its keywords occurs, its regex (RE2 syntax, as Go's) over the
  whole text, the secret group (or the first group) as the value, the entropy floor, the rule's
  and the global allowlists (regexes on the secret, the match or the line; stopwords). Path
  allowlists are left out (a transcript has no file names) and so is gitleaks' optional
  decoding of encoded text.

Without them this prints our figures and how to get them:

    .venv/bin/pip install detect-secrets   # into the project's venv, only to compare
    git -C <a gitleaks clone> show HEAD:config/gitleaks.toml > gitleaks.toml
    .venv/bin/python bench/redact_compare.py --gitleaks-config gitleaks.toml [--runs 3]
"""

import argparse
import math
import os
import statistics
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path

import re2

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from claude_autoharness.daemon.capture.redact import Redactor  # noqa: E402
from redact_blind_set import score as blind_score  # noqa: E402
from redact_corpus import score  # noqa: E402
from secret_plant import HELD_OUT, HELD_OUT_2, ISSUE_KINDS, cases, leaked  # noqa: E402

CORPUS = ROOT / "tests" / "corpus"
SETS = (("probe (22 kinds)", ISSUE_KINDS), (f"held-out ({len(HELD_OUT)} kinds)", HELD_OUT),
        (f"held-out 2 ({len(HELD_OUT_2)} kinds)", HELD_OUT_2))


def _replace_all(text: str, found: list[str]) -> str:
    for v in sorted(set(found), key=len, reverse=True):
        text = text.replace(v, "[REDACTED]")
    return text


class Ours:
    name = "autoharness rules"

    def __init__(self):
        self.r = Redactor(home="")

    def findings(self, text: str) -> list[str]:
        return [text[s:e] for _k, s, e in self.r.find(text)]

    def redact(self, text: str) -> str:
        return self.r.redact(text)[0]


class DetectSecrets:
    name = "detect-secrets (default plugins)"

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

    def redact(self, text: str) -> str:
        return _replace_all(text, self.findings(text))


def _entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values()) if n else 0.0


class _Allow:
    def __init__(self, d: dict):
        self.target = d.get("regexTarget", "secret")
        self.regexes = [re2.compile(p) for p in d.get("regexes", [])]
        self.stopwords = [w.lower() for w in d.get("stopwords", [])]
        self.all = d.get("condition", "OR").upper() == "AND"
        self.paths = bool(d.get("paths"))

    def allows(self, secret: str, match: str, line: str) -> bool:
        target = {"match": match, "line": line}.get(self.target, secret)
        tests = []
        if self.regexes:
            tests.append(any(rx.search(target) for rx in self.regexes))
        if self.stopwords:
            tests.append(any(w in secret.lower() for w in self.stopwords))
        if self.all:
            return bool(tests) and all(tests) and not self.paths
        return any(tests)


class Gitleaks:
    def __init__(self, path: str):
        with open(path, "rb") as f:
            cfg = tomllib.load(f)
        self.allow = [_Allow(cfg["allowlist"])] if "allowlist" in cfg else []
        self.allow += [_Allow(a) for a in cfg.get("allowlists", [])]
        self.rules, skipped = [], 0
        for r in cfg.get("rules", []):
            if "regex" not in r:
                skipped += 1  # path-only rules
                continue
            try:
                rx = re2.compile(r["regex"])
            except re2.error:
                skipped += 1
                continue
            self.rules.append((rx, int(r.get("secretGroup", 0)), r.get("entropy"),
                               [k.lower() for k in r.get("keywords", [])],
                               [_Allow(a) for a in r.get("allowlists", [])]))
        self.name = f"gitleaks rules ({len(self.rules)} of {len(cfg.get('rules', []))} loaded)"

    def findings(self, text: str) -> list[str]:
        low, out = text.lower(), []
        for rx, group, entropy, keywords, allows in self.rules:
            if keywords and not any(k in low for k in keywords):
                continue
            for m in rx.finditer(text):
                groups = [g for g in m.groups() if g]
                secret = m.group(group) if group else (groups[0] if groups else m.group(0))
                if not secret or (entropy and _entropy(secret) < entropy):
                    continue
                s, e = m.span()
                line = text[text.rfind("\n", 0, s) + 1: (text.find("\n", e) + 1 or len(text) + 1) - 1]
                if any(a.allows(secret, m.group(0), line) for a in self.allow + allows):
                    continue
                out.append(secret)
        return out

    def redact(self, text: str) -> str:
        return _replace_all(text, self.findings(text))


def planted_recall(side, kinds) -> tuple[int, int]:
    planted = removed = 0
    for _kind, _form, text, secrets in cases(kinds):
        out = side.redact(text)
        for s in secrets:
            planted += 1
            removed += not leaked(s, out)
    return planted, removed


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
    ap.add_argument("--gitleaks-config", default=os.environ.get("GITLEAKS_CONFIG"),
                    help="gitleaks' config/gitleaks.toml (default: $GITLEAKS_CONFIG)")
    args = ap.parse_args()
    sides: list = [Ours()]
    try:
        sides.append(DetectSecrets())
    except ImportError:
        print("detect-secrets is not installed; to compare:\n"
              "  .venv/bin/pip install detect-secrets\n")
    if args.gitleaks_config and os.path.exists(args.gitleaks_config):
        sides.append(Gitleaks(args.gitleaks_config))
    else:
        print("no gitleaks config given; to compare, from a gitleaks clone:\n"
              "  git show HEAD:config/gitleaks.toml > gitleaks.toml\n"
              "  .venv/bin/python bench/redact_compare.py --gitleaks-config gitleaks.toml\n")
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(CORPUS.rglob("*.jsonl"))]
    for side in sides:
        print(f"== {side.name}")
        s = score(side.redact)
        print(f"  corpus apart from the rules: recall {s.removed}/{s.cases} = {100 * s.recall:.1f} %, "
              f"false positives {len(s.changed)}/{s.artifacts} = {100 * s.false_positive_share:.1f} %")
        by = Counter(ctx for _f, ctx, _w in s.missed)
        print("    missed by context: " + (", ".join(f"{c} {n}" for c, n in by.most_common()) or "none"))
        kinds = Counter(name.split(" #")[0] if " #" in name else "source" for name in s.changed)
        print("    artifacts changed: " + (", ".join(f"{k} {n}" for k, n in kinds.most_common()) or "none"))
        b = blind_score(side.redact)
        print(f"  blind set (written before the rules were read): recall {b.removed}/{b.cases} = "
              f"{100 * b.recall:.1f} %, false positives {len(b.changed)}/{b.artifacts} = "
              f"{100 * b.false_positive_share:.1f} %")
        by = Counter(ctx for _f, ctx, _w in b.missed)
        print("    missed by context: " + (", ".join(f"{c} {n}" for c, n in by.most_common()) or "none"))
        kinds = Counter(name.split("#")[0].split(":")[0] for name in b.changed)
        print("    artifacts changed: " + (", ".join(f"{k} {n}" for k, n in kinds.most_common()) or "none"))
        for label, planted_kinds in SETS:
            planted, removed = planted_recall(side, planted_kinds)
            print(f"  {label:24s} removed {removed:4d}/{planted} = {100 * removed / planted:5.1f} %")
        found = sum(len(side.findings(t)) for t in texts)
        print(f"  findings on the real sessions (published without secrets): {found}")
        print(f"  throughput on the real sessions: {throughput(side, texts, args.runs):.2f} MB/s (CPU)")


if __name__ == "__main__":
    main()
