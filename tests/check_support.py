"""A window where the user corrects a bare `pytest` to `uv run pytest`, as Claude Code writes
it (assistant `tool_use` records, the user's tool results and words), and the check that
lesson carries; shared by the promoter, daemon and hook tests of checks."""

import json

WHEN = "2026-01-02T03:04:05.000Z"  # before any landing a test makes

CORRECTION = "No, never run bare pytest in this repo: use uv run pytest, it needs the venv."
MESSAGE = "Run the tests with `uv run pytest`, never bare `pytest` (it needs the venv)."
DESCRIPTION = "Use when running this project's tests: run them through uv."
BODY = "Run the tests with `uv run pytest`; bare `pytest` misses the project's venv.\n"


def tool_use(tid: str, command: str, name: str = "Bash") -> str:
    key = "command" if name == "Bash" else "file_path"
    return json.dumps({"type": "assistant", "timestamp": WHEN, "message": {
        "role": "assistant", "content": [
            {"type": "tool_use", "id": tid, "name": name, "input": {key: command}}]}})


def tool_result(tid: str, text: str) -> str:
    return json.dumps({"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": tid, "content": text}]}})


def user(text: str) -> str:
    return json.dumps({"type": "user", "message": {"role": "user", "content": text}})


def correction_records() -> list[str]:
    return [
        user("run the tests please"),
        tool_use("toolu_1", "ls"),
        tool_result("toolu_1", "src tests pyproject.toml"),
        tool_use("toolu_2", "pytest -q tests/"),
        tool_result("toolu_2", "ModuleNotFoundError: No module named 'attr'"),
        user(CORRECTION),
        tool_use("toolu_3", "uv run pytest -q tests/"),
        tool_result("toolu_3", "3 passed"),
    ]


WINDOW = "\n".join(correction_records()) + "\n"


def check(rule: str = "Bash(pytest *)", action: str = "deny", message: str = MESSAGE) -> dict:
    return {"rule": rule, "action": action, "message": message}


def proposal(**over) -> dict:
    """The reflector's proposal for that window (the tool input item, every field set)."""
    p = {"action": "create", "skill": "run-tests-with-uv", "layer": "project",
         "reason": "the user corrected a bare pytest call to uv run pytest",
         "evidence": CORRECTION, "description": DESCRIPTION, "body": BODY,
         "old": None, "new": None, "path": None, "content": None, "check": check()}
    p.update(over)
    return p
