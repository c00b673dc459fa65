"""The README and the docs stay true: a short README that starts with the quick start, the test
command CI runs, links that resolve, and only `autoharnessctl` verbs that exist."""

import argparse
import re
from pathlib import Path

from claude_autoharness.client.ctl import build_parser
from conftest import REPO

README = REPO / "README.md"
DOCS = [README, REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]


def prose(path: Path) -> str:
    """The file's text (code blocks included: commands live there)."""
    return path.read_text()


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors for `path` (headings inside code blocks are not headings)."""
    out, in_code = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        m = re.match(r"#{1,6} (.*)", line)
        if m and not in_code:
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


def test_readme_is_short_and_starts_with_the_quick_start():
    """At most 250 lines; the first section is the quick start, whose steps come in order:
    clone, install (pipx, uv, venv) and start, wire the hooks, the backend, doctor, status."""
    text = README.read_text()
    assert text.count("\n") <= 250
    sections = re.findall(r"^## (.*)$", text, flags=re.M)
    assert sections[0] == "Quick start"
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    steps = ["git clone", "pipx install . && autoharnessctl start", "uv tool install .",
             "python3 -m venv", "autoharnessctl install", "ANTHROPIC_API_KEY",
             "autoharnessctl doctor", "autoharnessctl status"]
    where = [quick.find(s) for s in steps]
    assert -1 not in where, dict(zip(steps, where, strict=True))
    assert where == sorted(where), dict(zip(steps, where, strict=True))


def test_readme_test_command_is_what_ci_runs():
    """The README's one test command is a line of .ci/run, unchanged."""
    section = README.read_text().split("## Run the tests", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1 and blocks[0].count("\n") == 1
    command = blocks[0].strip()
    assert command in (REPO / ".ci" / "run").read_text().splitlines()


def test_links_resolve():
    """Every relative link in the README, CONTRIBUTING.md and docs/ names a file that exists,
    and a heading in it when it has an #anchor."""
    broken = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", prose(doc)):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            if not dest.exists():
                broken.append(f"{doc.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{doc.name}: {target} (no such heading)")
    assert not broken


def _verbs() -> dict[str, set[str] | None]:
    """autoharnessctl's verbs, each with the words its first positional accepts (None: any)."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out: dict[str, set[str] | None] = {}
    for name, p in sub.choices.items():
        first = next((a for a in p._actions if not a.option_strings
                      and not isinstance(a, argparse._HelpAction)), None)
        if isinstance(first, argparse._SubParsersAction):
            out[name] = set(first.choices)
        elif first is not None and first.choices:
            out[name] = set(first.choices)
        else:
            out[name] = None
    return out


def test_every_autoharnessctl_command_in_the_docs_exists():
    """`autoharnessctl VERB [OP]` in the README and docs names a real verb, and a real
    operation for verbs that take one (`service install`, `skills list`, `learnings save`)."""
    verbs = _verbs()
    wrong = []
    for doc in DOCS:
        for verb, op in re.findall(r"autoharnessctl ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?",
                                   prose(doc)):
            if verb not in verbs:
                wrong.append(f"{doc.name}: autoharnessctl {verb}")
            elif op and verbs[verb] is not None and op not in verbs[verb]:
                wrong.append(f"{doc.name}: autoharnessctl {verb} {op}")
    assert not wrong
