"""The client reaches the daemon's code only through `daemon/offline.py`, the daemon never
reaches the client's, and the verbs that only talk to the socket load none of the daemon's
dependencies."""

import ast
import json
import subprocess
import sys

from conftest import REPO

DAEMON = "claude_autoharness.daemon"
FACADE = DAEMON + ".offline"


def _from_module(path, node: ast.ImportFrom) -> str:
    """The dotted module a `from … import` names, relative ones resolved from the file's place
    in the checkout (whose top level is the package's)."""
    if not node.level:
        return node.module or ""
    here = ["claude_autoharness", *path.relative_to(REPO).with_suffix("").parts[:-1]]
    base = here[:len(here) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _daemon_imports(path, package: str = DAEMON) -> list[str]:
    """Every module under `package` (the daemon's, unless named) a source file imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (module := _from_module(path, node)):
            if module == package:
                found += [f"{package}.{a.name}" for a in node.names]
            elif module.startswith(package + "."):
                found.append(module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith(package)]
    return found


def test_client_imports_nothing_from_the_daemon_but_the_facade():
    """Each client module, and the hook script, imports daemon code only as `offline`."""
    sources = sorted((REPO / "client").rglob("*.py")) + [REPO / "client" / "autoharness-hook"]
    wrong = {str(p.relative_to(REPO)): [i for i in _daemon_imports(p) if i != FACADE]
             for p in sources}
    assert {k: v for k, v in wrong.items() if v} == {}
    assert any(_daemon_imports(p) for p in sources)  # the scan does see the facade's users


def test_the_daemon_imports_nothing_from_the_client():
    """What both sides need (messages, replies, paths, wording) lives in protocol/: the daemon's
    modules import none of the client's."""
    wrong = {str(p.relative_to(REPO)): _daemon_imports(p, "claude_autoharness.client")
             for p in sorted((REPO / "daemon").rglob("*.py"))}
    assert {k: v for k, v in wrong.items() if v} == {}


def test_the_facade_is_light_to_import():
    """Importing `offline` loads no third-party module (each function imports its own)."""
    code = ("import sys; before = set(sys.modules); "
            "import claude_autoharness.daemon.offline; "
            "import json; print(json.dumps(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    loaded = json.loads(out)
    assert not [m for m in loaded if m.split(".")[0] in ("anyio", "structlog", "msgspec",
                                                         "anthropic", "watchfiles")], loaded


def test_the_facade_hands_out_only_what_it_defines_with_types():
    """No module `__getattr__` hands out daemon internals: every `offline.X` the client reads
    is defined in the facade, and each such function says what it returns."""
    import inspect

    from claude_autoharness.daemon import offline

    assert not hasattr(offline, "__getattr__")
    used = set()
    for path in sorted((REPO / "client").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id == "offline"):
                used.add(node.attr)
    assert {"list_skills", "skill_files", "review_branch"} <= used  # export and publish
    assert sorted(n for n in used if not hasattr(offline, n)) == []
    untyped = sorted(n for n in used if inspect.isfunction(getattr(offline, n))
                     and "return" not in getattr(offline, n).__annotations__)
    assert untyped == []


SOCKET_VERBS = [["status"], ["status", "--json"], ["flush", "--all"], ["queue", "list"],
                ["skills", "list"], ["pause"], ["resume"], ["stop"], ["learn", "a lesson"]]


def test_socket_verbs_load_neither_anyio_nor_structlog(home):
    """With no daemon to answer, every verb that only talks to the socket runs and fails
    cleanly without ever importing anyio or structlog (the daemon's runtime)."""
    code = f"""
import json, sys
from claude_autoharness.client import ctl
out = []
for argv in {SOCKET_VERBS!r}:
    try:
        rc = ctl.main(argv)
    except SystemExit as e:
        rc = e.code
    out.append([argv, rc, sorted(m for m in ("anyio", "structlog") if m in sys.modules)])
print(json.dumps(out))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    results = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(results) == len(SOCKET_VERBS)
    assert [(argv, mods) for argv, _, mods in results if mods] == []
    # no daemon: each one says so (`stop` succeeds: there is nothing to stop)
    assert all((rc == 0) == (argv == ["stop"]) for argv, rc, _ in results), results


def _normalized_body(fn) -> str:
    """A function's body without its docstring, `mod.CONST` read as `CONST` (so a copy that
    imports a constant another way is still the same code)."""
    class Norm(ast.NodeTransformer):
        def visit_Attribute(self, node):
            self.generic_visit(node)
            if isinstance(node.value, ast.Name) and node.attr.isupper():
                return ast.copy_location(ast.Name(id=node.attr, ctx=node.ctx), node)
            return node

    body = [b for b in fn.body
            if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
    return ast.dump(Norm().visit(ast.Module(body=body, type_ignores=[])))


def test_no_function_is_written_twice():
    """No two functions of the package (client, daemon, protocol) have the same body: one
    place for each thing, e.g. the list of a skill's files that git mode and `skills export`
    both need is one function (the client reaches it through the facade)."""
    seen: dict[str, list[str]] = {}
    for pkg in ("client", "daemon", "protocol"):
        for path in sorted((REPO / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    body = _normalized_body(node)
                    if body.count("(") >= 30:  # skip one-liners that may well coincide
                        seen.setdefault(body, []).append(
                            f"{path.relative_to(REPO)}:{node.name}")
    assert [names for names in seen.values() if len(names) > 1] == []
