"""What share of a transcript record is conversation and action: the measure the window
benchmark reports and the capture tests hold the slimmed records to (slimming leaves it
unchanged). The daemon never measures it: it keeps or leaves out keys (`records.slim`)."""

from typing import Any

import msgspec


def _value_bytes(value: Any) -> int:
    """UTF-8 bytes of the strings (and scalars) under `value`."""
    if isinstance(value, str):
        return len(value.encode("utf-8", "replace"))
    if isinstance(value, dict):
        return sum(_value_bytes(v) for v in value.values())
    if isinstance(value, list):
        return sum(_value_bytes(v) for v in value)
    return len(str(value)) if value is not None else 0


def _content_bytes(content: Any) -> int:
    if isinstance(content, str):
        return _value_bytes(content)
    if not isinstance(content, list):
        return 0
    n = 0
    for block in content:
        if not isinstance(block, dict):
            continue
        for key in ("text", "thinking", "name"):
            n += _value_bytes(block.get(key)) if isinstance(block.get(key), str) else 0
        if "input" in block:  # a tool's input is action, keys and all
            n += len(msgspec.json.encode(block["input"]))
        n += _content_bytes(block.get("content"))
    return n


def conversation_bytes(record: dict) -> int:
    """Bytes of the record's conversation and action: message text, thinking text, tool names
    and inputs (as JSON), tool results, summaries, queued prompts, a system record's content.
    The record's own keys and punctuation and every bookkeeping field count as not
    conversation."""
    n = _value_bytes(record.get("summary"))
    msg = record.get("message")
    if isinstance(msg, dict):
        n += _content_bytes(msg.get("content"))
    att = record.get("attachment")
    if isinstance(att, dict):
        n += _content_bytes(att.get("prompt"))
    if record.get("type") == "system":
        n += _content_bytes(record.get("content"))
    return n
