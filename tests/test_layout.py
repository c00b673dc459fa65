"""The checkout reads on its own: sources cite only what is in the repository, test modules
share helpers through conftest.py or support modules, never through each other, and no
function of the package is too branched to read."""

import ast
import re
import subprocess
import sys

from conftest import REPO

SOURCE_DIRS = ("daemon", "client", "protocol", "tests", "bench")
# A design document or a tracker number that a clone does not have.
OUTSIDE_CITATION = re.compile(r"DESIGN(\.md)?\b|§\s*\d|\bissues? #?\d+")


def _sources():
    for d in SOURCE_DIRS:
        for p in sorted((REPO / d).rglob("*")):
            if "corpus" in p.parts or "__pycache__" in p.parts or not p.is_file():
                continue
            if p.suffix in (".py", ".toml", ".md") or p.name == "autoharness-hook":
                yield p


def test_sources_cite_nothing_outside_the_repository():
    """No comment, docstring or string names a design document or an issue number."""
    hits = []
    for p in _sources():
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if OUTSIDE_CITATION.search(line) and p.name != "test_layout.py":
                hits.append(f"{p.relative_to(REPO)}:{n}: {line.strip()}")
    assert hits == []


def test_package_modules_import_each_other_relatively():
    """The checkout's top level is the package's, so a relative import names the file it
    reads: an absolute `claude_autoharness.` import inside the package would hide the import
    graph from anything that reads the checkout rather than an installed copy."""
    absolute = re.compile(r"^\s*(from|import)\s+claude_autoharness\b")
    files = [REPO / "__init__.py", REPO / "__main__.py"]
    files += [p for d in ("daemon", "client", "protocol") for p in sorted((REPO / d).rglob("*.py"))]
    hits = [f"{p.relative_to(REPO)}:{n}" for p in files
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if absolute.match(line)]
    assert hits == []


def test_no_test_module_imports_another_test_module():
    """Shared fixtures live in conftest.py and shared helpers in *_support.py modules."""
    offenders = []
    for p in sorted((REPO / "tests").glob("*.py")):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            offenders += [f"{p.name}: {n}" for n in names if n.split(".")[0].startswith("test_")]
        # and code a test runs in a child (a script in a string) imports none either
        offenders += [f"{p.name} (in a string): {m}" for m in
                      re.findall(r"^\s*(?:from|import)\s+(test_\w+)", p.read_text(), re.M)
                      if not any(f"{p.name}: {m}" == o for o in offenders)]
    assert offenders == []


def test_ruff_is_clean():
    """`ruff check` (lint and import order, configured in pyproject.toml) finds nothing."""
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


MAX_COMPLEXITY = 25  # radon's cyclomatic complexity: past this a function is read in parts


def test_no_function_is_too_complex():
    """Every function and method in daemon/, client/ and protocol/ has a cyclomatic complexity
    (as radon counts it) of at most MAX_COMPLEXITY."""
    from radon.visitors import ComplexityVisitor, Function

    over = []
    for d in ("daemon", "client", "protocol"):
        for p in sorted((REPO / d).rglob("*.py")):
            blocks = ComplexityVisitor.from_code(p.read_text(encoding="utf-8")).blocks
            over += [f"{p.relative_to(REPO)}:{b.lineno} {b.fullname} {b.complexity}"
                     for b in blocks if isinstance(b, Function) and b.complexity > MAX_COMPLEXITY]
    assert over == []
