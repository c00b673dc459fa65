"""Say what a file is before it is cut: a Claude Code transcript, or what else it looks like.

A path can name any file of ours under the roots: a Codex CLI rollout, another agent's log, a
hook's log of payloads, a chat export. Cutting one would send the reflector records it cannot
read as a session, with nothing to say so; `check_transcript` refuses it instead, naming what
it looks like. A transcript that holds nothing but a title (`summary` / `ai-title` records: a
session started and left) is refused too, saying so: there is no work in it.

Only the file's first `HEAD_BYTES` are read, and only to decide this.
"""

import os
from collections.abc import Sequence

import msgspec

from .source import TranscriptRefused, open_transcript

HEAD_BYTES = 256 * 1024
_MAX_LINES = 200
# top-level record types Claude Code writes (1.0.x to 2.1.x); one of them is enough
CLAUDE_TYPES = frozenset({
    "user", "assistant", "system", "summary", "attachment", "progress",
    "file-history-snapshot", "queue-operation", "last-prompt", "ai-title", "custom-title",
    "agent-name", "api-request", "api-request-shape", "api-request-blob", "cost-state",
    "tools-used", "atis-latch", "mode", "permission-mode", "pr-link", "worktree-state",
})
TITLE_TYPES = frozenset({"summary", "ai-title", "custom-title", "agent-name"})
# a Codex CLI rollout: `{"timestamp", "type", "payload"}` envelopes
CODEX_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context",
                         "compacted"})


def _records(head: bytes, whole: bool) -> list[dict] | str:
    """The head's complete lines that are JSON objects, or what the head looks like when none
    is (a garbage line among records is a damaged transcript, not another kind of file)."""
    lines = head.splitlines()
    if not whole and not head.endswith(b"\n"):
        lines = lines[:-1]  # a line cut by the head's end
    out, values = [], 0
    for line in lines[:_MAX_LINES]:
        try:
            rec = msgspec.json.decode(line)
        except msgspec.DecodeError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
        else:
            values += 1
    if out or not any(x.strip() for x in lines):
        return out
    if values:
        return "JSON values that are not objects on each line, not a Claude Code transcript"
    return _not_jsonl(head)


def _not_jsonl(head: bytes) -> str:
    text = head.lstrip()
    if text[:1] in (b"{", b"["):
        return "a JSON document spread over lines, not JSON Lines (one record a line)"
    if text[:1] == b"#" or b"\n#### " in head:
        return "Markdown or plain text (a chat history?), not JSON Lines"
    return "not JSON Lines: a line is not JSON"


def _other(recs: list[dict]) -> str:
    """What JSON records that are not Claude Code's look like."""
    if any(r.get("type") in CODEX_TYPES and "payload" in r for r in recs) or (
            "instructions" in recs[0] and any(r.get("type") in ("message", "function_call",
                                                               "reasoning") for r in recs)):
        return ("a Codex CLI rollout (`session_meta` / `response_item` records), not a Claude "
                "Code transcript")
    if all("hook_event_name" in r or ("event" in r and "session_id" in r) for r in recs):
        return "hook payloads (a hook's log), not a Claude Code transcript"
    if all("role" in r and "content" in r for r in recs):
        return "chat messages (`role` / `content` records) of another tool, not a Claude Code transcript"
    keys = ", ".join(list(recs[0])[:5])
    return f"JSON records of another kind (first keys: {keys}), not a Claude Code transcript"


def transcript_problem(head: bytes, whole: bool = False) -> str:
    """Why `head` (a file's first bytes; `whole`: all of it) is not a Claude Code transcript
    with work in it, or "" when it is one (or still empty)."""
    recs = _records(head, whole)
    if isinstance(recs, str):
        return recs
    if not recs:
        return ""
    types = [r.get("type") for r in recs]
    if not any(t in CLAUDE_TYPES for t in types):
        return _other(recs)
    if whole and all(t in TITLE_TYPES for t in types):
        return ("a Claude Code transcript that holds only a title (`summary` / `ai-title` "
                "records): no conversation to reflect on")
    return ""


def check_transcript(path: str | os.PathLike, roots: Sequence[str] | None) -> None:
    """Raise TranscriptRefused naming what the file looks like unless it is a Claude Code
    transcript with work in it (or still empty). Reads its first `HEAD_BYTES` only."""
    fd = open_transcript(path, roots)
    try:
        size = os.fstat(fd).st_size
        head = os.pread(fd, min(size, HEAD_BYTES), 0)
    finally:
        os.close(fd)
    problem = transcript_problem(head, whole=len(head) >= size)
    if problem:
        raise TranscriptRefused(os.fspath(path), problem)
