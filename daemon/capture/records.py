"""What a record sent to the reflector keeps: the work, not the bookkeeping.

A transcript record carries the work (its type and role, the message text, tool_use names and
inputs, tool results, thinking text, summaries) beside bookkeeping and second copies (ids and
parent ids, timestamps, usage, model and request ids, version, cwd, git branch, slug,
signatures, `toolUseResult` with its `originalFile`, ...). `slim` keeps the first and leaves out
the second (a message's `role` too where it repeats the record's `type`). The lists below are
the one place that says which is which (docs/privacy.md shows them): they are allow-lists, so
a key a later Claude Code adds is left out until it is named here.

`slim` also decides which records are work at all, beyond their top-level type: a `system`
record only for the subtypes in `WORK_SUBTYPES`, an `attachment` only for a prompt the user
queued while the agent worked (`queued_command`). Everything it returns is still a JSONL-shaped
record of the transcript's own type, never a reconstructed chat.
"""

from typing import Any

import msgspec

# top-level keys a record keeps (flags only when true)
RECORD_KEYS = ("type", "subtype", "message", "content", "summary", "attachment")
FLAG_KEYS = ("isSidechain", "isMeta", "isCompactSummary")
# keys of `message`, of each content block (nested tool_result content too; `is_error` only
# when true), of an attachment
MESSAGE_KEYS = ("role", "content")  # `role` only where it is not the record's type
BLOCK_KEYS = ("type", "text", "thinking", "name", "input", "content", "is_error")
ATTACHMENT_KEYS = ("type", "prompt")
# The record types that can carry work; any other type is bookkeeping, left out by its type
# alone (read from the record's head or tail, without decoding it).
WORK_TYPES = frozenset({"user", "assistant", "system", "summary", "attachment"})
# `system` subtypes that carry work: where a compaction replaced the past, a slash command the
# user ran and its output, a scheduled prompt firing. Turn timings, stop-hook summaries, away
# summaries, API retries, bridge status, informational lines and 1.0.x hook-status lines (no
# subtype) are bookkeeping.
WORK_SUBTYPES = frozenset({"compact_boundary", "local_command", "scheduled_task_fire"})
# attachment types that carry work: a prompt the user typed while the agent worked
WORK_ATTACHMENTS = frozenset({"queued_command"})
# tools whose input is the agent's own words (a plan, questions for the user, a subagent's
# brief): their calls are bounded like text, not like tool inputs
WORD_TOOLS = frozenset({"ExitPlanMode", "AskUserQuestion", "Task", "Agent"})


def _blocks(content: Any) -> Any:
    """Content (a string or a list of blocks) with each block reduced to `BLOCK_KEYS`."""
    if not isinstance(content, list):
        return content
    out = []
    for block in content:
        if not isinstance(block, dict):
            out.append(block)
            continue
        kept = {k: block[k] for k in BLOCK_KEYS if k in block}
        if kept.get("is_error") is False:
            del kept["is_error"]  # only an error says something
        if "content" in kept:
            kept["content"] = _blocks(kept["content"])
        out.append(kept)
    return out


def work_kind(record: dict) -> str | None:
    """None when the record carries work, else the label it is counted under when left out
    (its type, with the subtype or attachment type: `system/turn_duration`)."""
    rtype = record.get("type")
    if rtype == "system":
        sub = record.get("subtype")
        return None if sub in WORK_SUBTYPES else f"system/{sub or '(none)'}"
    if rtype == "attachment":
        att = record.get("attachment")
        kind = att.get("type") if isinstance(att, dict) else None
        return None if kind in WORK_ATTACHMENTS else f"attachment/{kind or '(none)'}"
    if rtype in WORK_TYPES:
        return None
    return str(rtype) if isinstance(rtype, str) else "(unknown)"


def slim(record: dict) -> dict:
    """The record with only what the work is (see the module's lists)."""
    out: dict[str, Any] = {k: record[k] for k in RECORD_KEYS if k in record}
    for flag in FLAG_KEYS:
        if record.get(flag) is True:
            out[flag] = True
    msg = out.get("message")
    if isinstance(msg, dict):  # a role that is the record's type is a second copy of it
        out["message"] = {k: msg[k] for k in MESSAGE_KEYS
                          if k in msg and not (k == "role" and msg[k] == record.get("type"))}
        if "content" in out["message"]:
            out["message"]["content"] = _blocks(out["message"]["content"])
    att = out.get("attachment")
    if isinstance(att, dict):
        out["attachment"] = {k: att[k] for k in ATTACHMENT_KEYS if k in att}
        if "prompt" in out["attachment"]:
            out["attachment"]["prompt"] = _blocks(out["attachment"]["prompt"])
    if isinstance(out.get("content"), list):
        out["content"] = _blocks(out["content"])
    return out


def tool_blocks(record: dict) -> list[dict]:
    """The `tool_use` and `tool_result` blocks of a record's message, the parts bounded tighter
    than its text. Not among them, so bounded like text: a call of a tool in `WORD_TOOLS` and
    a result that is an error (a failure is where a lesson most often starts)."""
    msg = record.get("message")
    content = msg.get("content") if isinstance(msg, dict) else None
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and (
        (b.get("type") == "tool_use" and b.get("name") not in WORD_TOOLS)
        or (b.get("type") == "tool_result" and b.get("is_error") is not True))]


def is_compact_summary(record: dict) -> bool:
    """The user record that holds a compaction's summary of the context before it."""
    return record.get("isCompactSummary") is True


def is_compact_boundary(record: dict) -> bool:
    return record.get("type") == "system" and record.get("subtype") == "compact_boundary"


def assistant_texts(record: dict) -> list[str]:
    """The text blocks of a main-chain assistant record (where the marker rule looks)."""
    msg = record.get("message")
    if record.get("type") != "assistant" or record.get("isSidechain") is True \
            or not isinstance(msg, dict):
        return []
    content = msg.get("content")
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [b["text"] for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)]


# ---- typed decoding: the few fields readers of assistant records use ------------------------
# msgspec skips every field not declared (tool inputs and results are often huge) without
# building Python objects for them. Fields a transcript might hold in any shape are `object`:
# each reader checks the type of what it uses, so an odd field never loses the record.


class Block(msgspec.Struct):
    type: str = ""
    text: object = None
    id: str = ""
    name: str = ""
    input: msgspec.Raw = msgspec.Raw(b"null")  # read only for a Bash call's command


class Message(msgspec.Struct):
    role: str = ""
    content: str | list[Block] | None = None


class Record(msgspec.Struct):
    type: str = ""
    isSidechain: object = None
    timestamp: object = ""
    sessionId: object = ""
    message: Message | None = None


decode_record = msgspec.json.Decoder(Record).decode


def main_assistant(line: bytes) -> Record | None:
    """The record of a JSONL line if it is a main-chain assistant record with a message (a
    malformed or half-written line is none)."""
    try:
        rec = decode_record(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    ok = rec.type == "assistant" and rec.isSidechain is not True and rec.message is not None
    return rec if ok else None
