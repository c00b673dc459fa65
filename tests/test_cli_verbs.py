"""`autoharnessctl` is one module per verb and words its errors one way: each module of
client/verbs/ adds one sub-parser whose func is its `do_<verb>`, ctl.py lists them all, and no
client module prints an error and returns a failure itself: it raises, and `main` prints
`autoharnessctl[ VERB]: MESSAGE` on stderr with the error's exit code."""

import ast
import importlib

import pytest

from claude_autoharness.client import ctl
from conftest import REPO
from harness import ctl as run_ctl

VERBS_DIR = REPO / "client" / "verbs"
HELPERS = {"__init__", "common"}  # modules of the package that are not a verb


def test_each_verb_is_one_module_with_its_parser_and_do_verb():
    """Every verb module adds exactly the sub-parser named after it, whose func is the module's
    own `do_<verb>`; ctl.VERBS lists every verb module, and the parser has no other verb."""
    names = sorted(p.stem for p in VERBS_DIR.glob("*.py") if p.stem not in HELPERS)
    assert sorted(v.__name__.rsplit(".", 1)[1] for v in ctl.VERBS) == names
    parser = ctl.build_parser()
    sub = next(a for a in parser._actions if a.dest == "verb")
    assert sorted(sub.choices) == names
    for name in names:
        mod = importlib.import_module(f"claude_autoharness.client.verbs.{name}")
        func = sub.choices[name].get_default("func")
        assert func is getattr(mod, f"do_{name}"), name


def _prints_to_stderr(node: ast.stmt) -> bool:
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", "") == "print"
            and any(k.arg == "file" and ast.unparse(k.value) == "sys.stderr"
                    for k in node.value.keywords))


def _fails(node: ast.stmt) -> bool:
    """`return N` with N a non-zero number, or `raise SystemExit(...)`."""
    if isinstance(node, ast.Return) and isinstance(node.value, ast.Constant):
        return node.value.value not in (0, None)
    return isinstance(node, ast.Raise) and "SystemExit" in ast.unparse(node)


def test_no_client_module_prints_an_error_and_fails_itself():
    """A print to stderr followed by `return 1` (or a SystemExit) is the error style the CLI
    no longer has: errors are raised (CtlError) and printed once, by ctl.py (skipped: it is
    that one place). The hook has its own rules (it never fails a tool call) and is no verb."""
    found = []
    for path in sorted((REPO / "client").rglob("*.py")):
        if path.relative_to(REPO).as_posix() in ("client/hook.py", "client/ctl.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            body = getattr(node, "body", None)
            if not isinstance(body, list):
                continue
            for this, nxt in zip(body, body[1:], strict=False):
                if _prints_to_stderr(this) and _fails(nxt):
                    found.append(f"{path.relative_to(REPO)}:{this.lineno}")
    assert found == []


def test_errors_are_one_line_with_the_verb_and_its_code(home, short_tmp):
    """A verb's error is one stderr line naming the command when the message needs it, with
    the code it carries: a usage error 2, a missing file 1; nothing on stdout, no traceback."""
    r = run_ctl("sync", "init")
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.startswith("autoharnessctl sync init: name the git remote")
    assert r.stderr.count("\n") == 1
    missing = short_tmp / "nope.jsonl"
    r = run_ctl("replay", str(missing))
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == f"autoharnessctl replay: no such transcript: {missing}\n"
    r = run_ctl("capture")
    assert r.returncode == 2
    assert r.stderr == "autoharnessctl: name exactly one of --session ID or --transcript PATH\n"


@pytest.mark.parametrize("argv", [
    ["flush"], ["capture"], ["learn", " "], ["queue", "show"], ["queue", "approve"],
    ["skills", "show"], ["skills", "revert"], ["skills", "export"], ["replay"],
    ["replay", "a.jsonl", "b.jsonl"], ["replay", "a.jsonl", "--since", "2026-01-01"],
    ["replay", "--batch"], ["replay", "--batch", "--all", "--since", "yesterday"],
    ["sync", "init"], ["sync", "bogus"], ["report", "--days", "0"], ["status", "--limit", "x"],
    ["skills", "revert", "x", "--to", "latest"], ["skills", "forget"],
])
def test_every_usage_error_exits_2(home, argv):
    """The docs promise 2 for a usage error, whichever verb: missing or conflicting
    arguments, a value of the wrong form. One line on stderr, nothing on stdout."""
    r = run_ctl(*argv)
    assert r.returncode == 2, (argv, r.returncode, r.stderr)
    assert r.stdout == "" and "Traceback" not in r.stderr


def test_a_request_the_daemon_refuses_for_its_arguments_exits_2(home):
    """Arguments only the daemon can judge (a number of days over its limit, a malformed
    session id) are usage errors too; a project directory that does not exist is one."""
    from harness import Daemon

    d = Daemon(home["home"])
    try:
        r = run_ctl("report", "--days", "99999")
        assert r.returncode == 2 and "--days wants" in r.stderr, r.stderr
        r = run_ctl("flush", "not a session id!")
        assert r.returncode == 2 and "invalid session id" in r.stderr, r.stderr
        r = run_ctl("curate", "--project", "/nonexistent-dir")  # checked here: no job queued
        assert r.returncode == 2 and "no such project directory" in r.stderr, r.stderr
        assert d.status()["jobs"]["by_kind"].get("curate") is None
    finally:
        d.stop()
