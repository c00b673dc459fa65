"""The digest: orientation from before the window, for a model that sees only the window.

It keeps what the people said: user prompts (prompts queued while the agent worked too) and
assistant text (each clipped) and `[tool: Name]` for each tool use. Never tool inputs, tool
outputs or `tool_result` content; never thinking, meta records, sidechain (subagent) records,
summaries. It covers the last `exchanges` user
prompts and what followed them, capped at `max_bytes`.

It is also where a window that overflowed sends what did not fit: the packet builds it before
the window's first kept record, not before the watermark, and `mark` (the watermark) puts a
note between what earlier windows had and what this one dropped. `reach` says how far back
it read, so a packet can say how much of the span nobody saw.

The transcript is read backward from `before` in chunks, and the total bytes read are bounded by
`max_scan_bytes`: a transcript can hold a gigabyte of tool output and almost no prompts. A line
longer than `max_line_bytes` is skipped without being buffered whole (only its head is kept
while its start is searched for). Garbage lines and non-UTF-8 lines are skipped.

Handles both transcript shapes in the corpus: old (1.0.x: `summary` lines, inline sidechains,
several content blocks per record) and new (2.x: one content block per line, `progress`,
`system/compact_boundary`, `isCompactSummary` users).
"""

import os
from collections.abc import Sequence

import msgspec

from .lines import BackwardLines, find_end
from .source import open_transcript

MAX_LINE_BYTES = 1024 * 1024


class Digest(msgspec.Struct, frozen=True, kw_only=True):
    text: str  # one entry per line, chronological
    records: int  # transcript records that contributed an entry
    scanned_bytes: int
    exchanges: int = 0  # user prompts included
    reach: int = 0  # the offset it read back to: [reach, before) is covered
    skipped_lines: int = 0  # garbage, non-UTF-8 or over-long lines passed over
    redactions: dict[str, int] = {}  # what the redactor replaced in the entries kept


class _Block(msgspec.Struct):
    type: str = ""
    text: str | None = None
    name: str | None = None


class _Message(msgspec.Struct):
    role: str | None = None
    content: str | list[_Block] | None = None


class _Attachment(msgspec.Struct):
    type: str = ""
    prompt: str | list[_Block] | None = None


class _Record(msgspec.Struct):
    type: str = ""
    subtype: str | None = None
    isSidechain: bool | None = None
    isMeta: bool | None = None
    isCompactSummary: bool | None = None
    message: _Message | None = None
    attachment: _Attachment | None = None


_decoder = msgspec.json.Decoder(_Record)
# user-role texts that carry command or task *output*, not anything the person said
_GENERATED = ("<local-command-stdout>", "<local-command-stderr>", "<bash-stdout>",
              "<bash-stderr>", "<task-notification>", "<system-reminder>")


_TOOLS_ONLY = "assistant: [tool: "
MARK_NOTE = "[earlier windows ended here; what follows did not fit in this window]"


def _cost(entry: str) -> int:
    """Bytes an entry takes in the digest text (with its newline)."""
    return len(entry.encode("utf-8", "replace")) + 1


def _clean(text: str, max_chars: int) -> str:
    """One line, whitespace collapsed, clipped with a visible ellipsis."""
    text = " ".join(text.split())
    if len(text) > max_chars:
        text = text[: max(0, max_chars - 1)].rstrip() + "…"
    return text


def _entry(rec: _Record) -> tuple[str, str, list[str]] | None:
    """(role, text, tool names) this record contributes, or None.

    role is "user" (a prompt: starts an exchange), "assistant", or "note".
    """
    if rec.isSidechain or rec.isMeta:
        return None
    if rec.type == "system":
        if rec.subtype == "compact_boundary":
            return "note", "[context compacted]", []
        return None
    if rec.type == "attachment" and rec.attachment is not None \
            and rec.attachment.type == "queued_command":
        return _said("user", rec.attachment.prompt)  # typed while the agent worked
    if rec.type not in ("user", "assistant") or rec.message is None:
        return None
    if rec.isCompactSummary:
        return None  # a generated summary of older context, not something anyone said
    return _said(rec.type, rec.message.content)


def _said(role: str, content: str | list[_Block] | None) -> tuple[str, str, list[str]] | None:
    """(role, text, tool names) of one message's content, or None when it holds neither."""
    texts: list[str] = []
    tools: list[str] = []
    if isinstance(content, str):
        texts.append(content)
    elif content:
        for block in content:
            if block.type == "text" and block.text:
                texts.append(block.text)
            elif block.type == "tool_use":
                tools.append(block.name or "?")
            elif block.type == "image" and role == "user":
                texts.append("[image]")
            # tool_result, thinking, redacted_thinking, …: never in the digest
    if role == "user":  # outputs Claude Code injects as user text are not prompts
        texts = [t for t in texts if not t.lstrip().startswith(_GENERATED)]
    text = " ".join(t for t in texts if t.strip())
    if not text and not tools:
        return None
    return role, text, tools


def _decode(line: bytes, n: int, max_line_bytes: int) -> tuple[_Record | None, int]:
    """The record of one line, and 1 when the line is skipped as over-long or garbage."""
    if n > max_line_bytes:
        return None, 1
    try:
        return _decoder.decode(line), 0
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None, 1 if line.strip() else 0


def _format(role: str, text: str, tools: list[str], max_chars: int) -> tuple[str, list[str]]:
    """The entry's line, and its parts (the clipped text, the tool names)."""
    parts = []
    if text:
        parts.append(_clean(text, max_chars))
    if tools:
        parts.append(" ".join(f"[tool: {_clean(t, 60)}]" for t in tools))
    return (parts[0] if role == "note" else f"{role}: {' '.join(parts)}"), parts


class _Entries:
    """The digest's lines, newest first, under `max_bytes`."""

    def __init__(self, max_bytes: int):
        self.lines: list[str] = []
        self.used = 0
        self.max_bytes = max_bytes

    def put(self, entry: str) -> bool:
        """Add `entry`; False (nothing added) when it does not fit."""
        cost = _cost(entry)
        if self.used + cost > self.max_bytes:
            return False
        self.lines.append(entry)
        self.used += cost
        return True

    def fold(self, tools: str) -> bool | None:
        """Put an older tool-only assistant entry's `tools` in front of the newest line when
        that is tool-only too; None when it is not, False when the result does not fit."""
        if not self.lines or not self.lines[-1].startswith(_TOOLS_ONLY):
            return None
        merged = f"assistant: {tools} {self.lines[-1][len('assistant: '):]}"
        grown = _cost(merged) - _cost(self.lines[-1])
        if self.used + grown > self.max_bytes:
            return False
        self.used += grown
        self.lines[-1] = merged
        return True


def build_digest(
    path: str | os.PathLike,
    before: int,
    *,
    exchanges: int = 20,
    max_chars: int = 200,
    max_bytes: int = 20_000,
    max_scan_bytes: int = 4 * 1024 * 1024,
    max_line_bytes: int = MAX_LINE_BYTES,
    redactor=None,
    roots: Sequence[str] | None = None,
    mark: int | None = None,
) -> Digest:
    """The digest of the transcript before byte offset `before` (the window's first record).

    `mark` (an offset below `before`: the watermark) gets a note line where the entries from
    before it (earlier windows had them) meet those after it (this window dropped them).

    `redactor` (a `Redactor`), when given, redacts each entry before it is clipped, so a clip
    can never cut a secret in half and leave its start unredacted. Raises OSError only if the
    file cannot be opened.
    """
    fd = open_transcript(path, roots)
    try:
        size = os.fstat(fd).st_size
        before = max(0, min(int(before), size))
        budget = max(0, int(max_scan_bytes))
        # a partial line right before `before` belongs to the window, not to the digest
        end, scanned, tail = find_end(fd, 0, before, budget)
        lines = BackwardLines(fd, 0, end, max_line_bytes + 1, budget - scanned, tail)
        out = _Entries(max_bytes)
        records = prompts = skipped = 0
        reach = end
        redactions: dict[str, int] = {}
        while prompts < exchanges:
            item = lines.next()
            if item is None:
                reach = 0 if not lines.exhausted else reach
                break
            s, e, line = item
            if mark is not None and s < mark <= e and out.lines and not out.put(MARK_NOTE):
                break
            reach = s
            rec, bad = _decode(line, e - s, max_line_bytes)
            skipped += bad
            got = _entry(rec) if rec is not None else None
            if got is None:
                continue
            role, text, tools = got
            counts: dict[str, int] = {}
            if redactor is not None and text:
                text, counts = redactor.redact(text)
            entry, parts = _format(role, text, tools, max_chars)
            # consecutive tool-only assistant records read as one line (nothing redacted)
            folded = out.fold(parts[0]) if role == "assistant" and not text else None
            if folded is None and out.put(entry):
                for k, n in counts.items():
                    redactions[k] = redactions.get(k, 0) + n
                prompts += role == "user"
            elif not folded:
                reach = e
                break
            records += 1
        scanned += lines.scanned
    finally:
        os.close(fd)
    return Digest(text="\n".join(reversed(out.lines)), records=records, scanned_bytes=scanned,
                  exchanges=prompts, skipped_lines=skipped, redactions=redactions, reach=reach)
