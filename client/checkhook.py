"""The check hook: a PreToolUse hook that holds the call against the lessons' checks.

Run as `autoharness-hook` with AUTOHARNESS_HOOK=check, synchronously, by its own hook entry
(the counting hook stays asynchronous and decides nothing). It reads the compiled table the
daemon writes (`<state>/checks.table`, see daemon/promote/checktable.py) — no socket round
trip — and answers, for the strongest check the call matches:

- `remind`: `additionalContext` (the model reads it with the tool's result; the call runs);
- `ask` / `deny`: `permissionDecision` with the lesson as `permissionDecisionReason`.

It fails open: no table, an unreadable or damaged one, an event it cannot parse, a call it
cannot read (checkrule says None), autoharness's own calls and its reflector sessions all
print nothing. A call whose tool no check names stops after the table's first line. JSON is
read and written with the C scanner and string encoder of `_json` alone: `json` itself imports
`re`, which is most of the hook's cost above a bare start. Adherence is counted by the daemon
from the counting hook's copy of the same event and the same table, so this hook sends nothing.
"""

import os
import sys

MAX_TABLE = 1 << 20


def read_table(path: str) -> bytes | None:
    """The table's bytes: only a regular file of the user's own, not writable by others,
    never through a symlink; None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid() or st.st_mode & 0o022 or (st.st_mode & 0o170000) != 0o100000:
            return None
        chunks, n = [], 0
        while n <= MAX_TABLE:
            b = os.read(fd, 1 << 16)
            if not b:
                break
            chunks.append(b)
            n += len(b)
        return b"".join(chunks) if n <= MAX_TABLE else None
    except OSError:
        return None
    finally:
        os.close(fd)


def tool_name(raw: bytes) -> bytes:
    """The event's `tool_name`, found without parsing (b"" when not plainly there)."""
    i = raw.find(b'"tool_name"')
    if i < 0:
        return b""
    i = raw.find(b'"', raw.find(b":", i + 11) + 1)
    j = raw.find(b'"', i + 1)
    return raw[i + 1: j] if 0 <= i < j and j - i < 64 else b""


class _Context:
    """What `_json.make_scanner` reads off a decoder: the standard library's defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float


def loads(data: bytes):
    """One JSON document, as `json.loads` reads it (ValueError when it is not one)."""
    import _json

    text = data.decode("utf-8")
    start = len(text) - len(text.lstrip())
    try:
        value, end = _json.make_scanner(_Context())(text, start)  # type: ignore[arg-type]
    except StopIteration:
        raise ValueError("not JSON") from None
    if text[end:].strip():
        raise ValueError("extra data after the JSON document")
    return value


def output(action: str, c: dict) -> str:
    """The hook's answer: a reminder as `additionalContext`, or an ask/deny decision."""
    from _json import encode_basestring_ascii as q

    text = f"autoharness lesson `{c.get('skill')}` ({c.get('rule')}): {c.get('message')}"
    if action == "remind":
        inner = '"additionalContext":' + q(text)
    else:
        inner = f'"permissionDecision":{q(action)},"permissionDecisionReason":{q(text)}'
    return '{"hookSpecificOutput":{"hookEventName":"PreToolUse",' + inner + "}}"


def main(raw: bytes) -> None:
    from ..protocol import paths

    table = read_table(paths.checks_table_file())
    if not table:
        return
    head, _, body = table.partition(b"\n")
    tool = tool_name(raw)
    if not tool or tool not in head.split():
        return  # no check is about this tool: decided without json
    try:
        ev = loads(raw)
        data = loads(body)
    except (ValueError, RecursionError):
        return
    if not isinstance(ev, dict) or ev.get("hook_event_name") != "PreToolUse" \
            or not isinstance(data, dict) or not isinstance(data.get("checks"), list):
        return
    from ..protocol.checkcall import decide

    found = decide(ev, data["checks"], os.path.expanduser("~"))
    if found is not None:
        sys.stdout.write(output(*found) + "\n")
