"""The package's shape: no module over 500 lines, no import cycle among its modules, no private
(`_name`) import from another module, and every package directory installed.

Computed over the source the package installs: pyproject.toml's `packages` list, each found
through its `package-dir` mapping (the checkout keeps `daemon/`, `client/`, `protocol/` at the
top). Every import counts, wherever it stands: one inside a function (a lazy import) or under
`TYPE_CHECKING` still ties the two modules together.
"""

import ast
import functools
import tomllib
from pathlib import Path

from conftest import REPO

MAX_LINES = 500


def _package_dirs() -> dict[str, Path]:
    """Each installed package → its directory in the checkout, as setuptools maps it."""
    tool = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping: dict[str, str] = tool.get("package-dir", {})
    out = {}
    for pkg in tool["packages"]:
        # the longest mapped prefix wins; the rest of the name is a path beneath it
        prefix = max((p for p in mapping if pkg == p or pkg.startswith(p + ".")), key=len,
                     default="")
        rest = pkg[len(prefix):].lstrip(".").split(".") if pkg != prefix else []
        base = REPO / mapping[prefix] if prefix else REPO
        out[pkg] = base.joinpath(*[p for p in rest if p])
    return out


@functools.cache
def _modules() -> dict[str, Path]:
    """Every installed module's dotted name → its source file."""
    mods = {}
    for pkg, d in _package_dirs().items():
        for f in sorted(d.glob("*.py")):
            mods[pkg if f.stem == "__init__" else f"{pkg}.{f.stem}"] = f
    return mods


def _imports(name: str, path: Path, tree: ast.Module) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) for every import statement in the file."""
    base = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base.split(".")
                parts = parts[:len(parts) - (node.level - 1)]
                mod = ".".join(parts + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((mod, [a.name for a in node.names]))
    return out


@functools.cache
def _graph() -> tuple[dict[str, set[str]], dict[str, ast.Module]]:
    """Who imports whom among the package's modules, and each module's syntax tree."""
    mods = _modules()
    trees = {name: ast.parse(p.read_text(encoding="utf-8"), str(p)) for name, p in mods.items()}
    graph: dict[str, set[str]] = {name: set() for name in mods}
    for name, tree in trees.items():
        for mod, names in _imports(name, mods[name], tree):
            # `from pkg import sub` imports the submodule `pkg.sub` when there is one
            # (a module's own parent packages are imported before it: `from . import sub`
            # ties it to `sub`, not back to its package)
            for target in [mod, *(f"{mod}.{n}" for n in names)]:
                if target in mods and target != name and not name.startswith(target + "."):
                    graph[name].add(target)
    return graph, trees


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return sorted(found)


def _short(name: str) -> str:
    return name.removeprefix("claude_autoharness.")


def test_every_package_directory_is_installed():
    """A directory of modules beneath a mapped package is in pyproject's `packages` (a package
    left out is missing from the wheel, and its imports fail only after an install)."""
    dirs = _package_dirs()
    listed = set(dirs.values())
    missing = sorted(str(init.parent.relative_to(REPO))
                     for top in {REPO / d for d in ("client", "daemon", "protocol")}
                     for init in top.rglob("__init__.py")
                     if init.parent not in listed and ".venv" not in init.parts)
    assert missing == [], f"add these packages to pyproject.toml's `packages`: {missing}"
    assert all(d.is_dir() for d in dirs.values())


def test_no_module_is_over_500_lines():
    """Small modules: none of the package's is over 500 lines."""
    over = sorted(f"{p.relative_to(REPO)}: {n} lines" for p in _modules().values()
                  if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES)
    assert over == [], "modules over 500 lines (split them by job):\n  " + "\n  ".join(over)


def test_no_import_cycle():
    """No two modules import each other, directly or round a loop (lazy imports count)."""
    graph, _ = _graph()
    cycles = [" ↔ ".join(_short(m) for m in c) for c in _cycles(graph)]
    assert cycles == [], "import cycles (move what both need into a module of its own):\n  " \
        + "\n  ".join(cycles)


def _private(n: str) -> bool:
    return n.startswith("_") and not n.startswith("__")


def _module_aliases(name: str, path: Path, tree: ast.Module, mods) -> dict[str, str]:
    """Local names bound to another of the package's modules (`from pkg import mod as m`)."""
    out = {}
    base = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            parts = base.split(".")[:len(base.split(".")) - max(node.level - 1, 0)]
            mod = ".".join(parts + ([node.module] if node.module else [])) if node.level \
                else node.module or ""
            for a in node.names:
                if f"{mod}.{a.name}" in mods:
                    out[a.asname or a.name] = f"{mod}.{a.name}"
        elif isinstance(node, ast.Import):
            out.update({a.asname: a.name for a in node.names if a.asname and a.name in mods})
    return out


def test_no_private_name_is_imported_from_another_module():
    """A `_name` stays in its module: none is imported by another of the package's modules,
    nor reached through one (`mod._name`)."""
    mods = _modules()
    _, trees = _graph()
    found = sorted(f"{_short(name)} imports {_short(mod)}.{n}"
                   for name, tree in trees.items()
                   for mod, names in _imports(name, mods[name], tree)
                   if mod.startswith("claude_autoharness") and mod != name
                   for n in names if _private(n))
    for name, tree in trees.items():
        aliases = _module_aliases(name, mods[name], tree, mods)
        found += sorted({f"{_short(name)} uses {_short(aliases[node.value.id])}.{node.attr}"
                         for node in ast.walk(tree)
                         if isinstance(node, ast.Attribute) and _private(node.attr)
                         and isinstance(node.value, ast.Name) and node.value.id in aliases
                         and aliases[node.value.id] != name})
    assert found == [], "private names imported across modules (make them public, or move " \
        "the code that needs them):\n  " + "\n  ".join(found)


def test_the_checks_see_a_cycle_and_a_long_module():
    """The computation itself: a loop of three and a lazy import are cycles; a DAG is not."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []
    tree = ast.parse("import x.y\ndef f():\n    from . import z\n    from .w import _v\n")
    assert _imports("pkg.mod", Path("mod.py"), tree) == [("x.y", []), ("pkg", ["z"]),
                                                          ("pkg.w", ["_v"])]
    assert _package_dirs()["claude_autoharness.daemon.reflect"] == REPO / "daemon" / "reflect"
