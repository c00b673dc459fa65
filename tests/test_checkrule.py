"""The check rule: Claude Code's permission-rule syntax, parsed and held against tool calls."""

import pytest

from claude_autoharness.protocol import checkrule as cr

ROOT = "/p/proj"
HOME = "/h/me"


def held(rule: str, tool: str, **tool_input):
    r, why = cr.parse(rule)
    assert r is not None, why
    return cr.match(r, tool, tool_input, ROOT, HOME)


@pytest.mark.parametrize("cmd, expect", [
    ("pytest", True),
    ("pytest -q tests/", True),
    ("cd sub && pytest -x", True),
    ("make lint; pytest", True),
    ("FOO=1 PYTHONPATH=src pytest -q", True),
    ("uv run pytest -q", False),
    ("pytestify", False),
    ("echo pytest", False),
    ("python -m pytest", False),
])
def test_bash_prefix_rule_matches_the_command_wherever_it_runs(cmd, expect):
    assert held("Bash(pytest *)", "Bash", command=cmd) is expect


def test_bash_forms_exact_legacy_prefix_and_inner_wildcards():
    assert held("Bash(git push --force*)", "Bash", command="git push --force-with-lease") is True
    assert held("Bash(git push --force*)", "Bash", command="git push origin main") is False
    assert held("Bash(npm run build)", "Bash", command="npm run build") is True
    assert held("Bash(npm run build)", "Bash", command="npm run build:prod") is False
    assert held("Bash(npm:*)", "Bash", command="npm install left-pad") is True
    assert held("Bash(npm:*)", "Bash", command="pnpm install") is False
    assert held("Bash(git * main)", "Bash", command="git push origin main") is True
    # quoted operators are words, not separators
    assert held("Bash(pytest *)", "Bash", command="echo 'a && pytest'") is False


def test_a_call_that_cannot_be_read_decides_nothing():
    for cmd in ("pytest $(cat args)", "echo `pytest`", "pytest 'unclosed", "cat <<EOF\nx\nEOF"):
        assert held("Bash(pytest *)", "Bash", command=cmd) is None, cmd
    assert held("Bash(pytest *)", "Bash", command=3) is None
    assert held("Edit(src/**)", "Edit", old_string="x") is None


def test_a_rule_is_held_only_against_its_tools():
    assert held("Bash(pytest *)", "Edit", file_path=ROOT + "/pytest") is False
    assert held("Write(**/*.lock)", "Edit", file_path=ROOT + "/a/b.lock") is False
    # Edit covers every tool that edits a file
    for tool in ("Edit", "MultiEdit", "Write"):
        assert held("Edit(src/generated/**)", tool, file_path=ROOT + "/src/generated/a.py")
    assert held("Edit(src/generated/**)", "NotebookEdit",
                notebook_path=ROOT + "/src/generated/n.ipynb")


@pytest.mark.parametrize("rule, path, expect", [
    ("Edit(src/generated/**)", ROOT + "/src/generated/api/x.py", True),
    ("Edit(src/generated/**)", ROOT + "/src/main.py", False),
    ("Edit(src/generated/**)", "/elsewhere/src/generated/x.py", False),
    ("Edit(/src/generated/**)", ROOT + "/src/generated/x.py", True),
    ("Edit(./src/generated/**)", ROOT + "/src/generated/x.py", True),
    ("Write(**/*.lock)", ROOT + "/uv.lock", True),
    ("Write(**/*.lock)", ROOT + "/a/b/poetry.lock", True),
    ("Write(**/*.lock)", ROOT + "/a/b/lock.txt", False),
    ("Write(*.lock)", ROOT + "/deep/x.lock", True),  # no slash: any depth
    ("Write(/*.lock)", ROOT + "/deep/x.lock", False),  # anchored at the base
    ("Write(/*.lock)", ROOT + "/x.lock", True),
    ("Edit(//etc/**)", "/etc/hosts", True),
    ("Edit(~/.bashrc)", HOME + "/.bashrc", True),
    ("Edit(~/.bashrc)", ROOT + "/.bashrc", False),
    ("Edit(src/generated/**)", ROOT + "/src/x/../generated/y.py", True),
])
def test_path_rules_as_gitignore_globs(rule, path, expect):
    tool = rule.split("(")[0]
    assert held(rule, tool, file_path=path) is expect


@pytest.mark.parametrize("rule", ["Bash", "Bash()", "Bash(*)", "Bash(:*)", "Edit(**)",
                                  "Edit(*)", "Write(/**)", "Write(./**)", "Edit(**/*)"])
def test_a_rule_that_matches_every_call_is_refused(rule):
    r, why = cr.parse(rule)
    assert r is None
    assert "matches every" in why and "e.g." in why


@pytest.mark.parametrize("rule, words", [
    ("", "required"), ("Grep(foo)", "must be one of"), ("Bash(pytest *", "must end with"),
    ("Bash(pytest\x07)", "control"), ("Bash(" + "x" * 300 + ")", "at most"),
])
def test_malformed_rules_say_how_to_write_one(rule, words):
    r, why = cr.parse(rule)
    assert r is None and words in why


def test_parse_keeps_the_rule_as_written():
    r, _ = cr.parse("  Bash(pytest *) ")
    assert r is not None and r.text() == "Bash(pytest *)" and r.tools() == ("Bash",)
    assert cr.call_text("Bash", {"command": "ls"}) == "ls"
    assert cr.call_text("Write", {"file_path": "/a"}) == "/a"
