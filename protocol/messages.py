"""Wire messages: tagged msgspec Structs, one reused encoder/decoder per direction.

Requests and replies are separate unions so each side decodes only what it may receive.
New fields are additive with defaults; a field's type never changes (a sub-operation is a
literal: the values a client may send are the type, so an unknown one is refused at decoding).

The daemon dispatches a sub-operation one way: a `match` on the literal whose last case is
`assert_never`. The cases read top to bottom where the work is done, and mypy refuses a handler
that misses a value (a table of functions needs a test to say as much, and an if-chain's last
branch silently takes whatever value is added next).
"""

from typing import Annotated, Any, Literal

import msgspec

from . import PROTOCOL

QueueOp = Literal["list", "show", "approve", "reject", "feedback"]
SkillsOp = Literal["list", "show", "history", "revert", "restore", "approve_check", "forget"]
LearningsOp = Literal["report", "save"]
BatchOp = Literal["submit", "cancel", "status"]
SyncOp = Literal["round", "status"]


class _Req(msgspec.Struct, tag_field="type", kw_only=True, omit_defaults=True):
    v: int = PROTOCOL


class Hook(_Req, tag="hook"):
    """One Claude Code hook event; `payload` is the hook's stdin, forwarded unparsed."""

    payload: msgspec.Raw
    id: Annotated[str, msgspec.Meta(max_length=64)] = ""  # the hook's random event id
    ts: float = 0.0
    replayed: bool = False  # `autoharnessctl replay`: counts, but is no real session's use
    # which install ran the hook: "plugin" (the plugin's shim) or "settings"; "" unknown (an
    # older hook). It decides how the slash commands are named to the model.
    via: Annotated[str, msgspec.Meta(max_length=16)] = ""


class Status(_Req, tag="status"):
    """Live sessions come newest first, `sessions_limit` of them (at most STATUS_MAX_SESSIONS)
    from `sessions_offset`: the reply stays small however many sessions the daemon holds."""

    sessions_limit: int = 50
    sessions_offset: int = 0


STATUS_MAX_SESSIONS = 1000  # sessions in one status reply, whatever the request asks


class Flush(_Req, tag="flush"):
    session_ids: list[str] = []
    all: bool = False


class Stop(_Req, tag="stop"):
    pass


class Capture(_Req, tag="capture"):
    session_id: str | None = None
    transcript_path: str | None = None
    start: int | None = None


class Learn(_Req, tag="learn"):
    text: str
    session_id: str | None = None
    layer: str | None = None


class Queue(_Req, tag="queue"):
    """Intent queue operations: list, show, approve, reject."""

    op: QueueOp = "list"
    intent_id: str | None = None
    why: str | None = None


class Skills(_Req, tag="skills"):
    """Skill library operations: list, show, history, revert, restore, approve_check, forget."""

    op: SkillsOp = "list"
    name: str | None = None
    to: str | None = None
    layer: str | None = None
    project: str | None = None


class Learnings(_Req, tag="learnings"):
    """Marker operations: report, save (the daemon owns marker state)."""

    op: LearningsOp = "report"
    project: str | None = None
    transcripts: list[str] = []
    dry_run: bool = False


class Batch(_Req, tag="batch"):
    """`replay --batch` / `replay --cancel`: reflect on transcripts through Message Batches."""

    op: BatchOp = "submit"
    transcripts: list[str] = []
    project: str | None = None


class Pause(_Req, tag="pause"):
    paused: bool = True


class Curate(_Req, tag="curate"):
    """Run the curator now: one layer, or both (the project layer needs `project`)."""

    layer: str | None = None
    project: str | None = None
    dry_run: bool = False  # say what a lifecycle pass and a curator run would do; do nothing


class Sync(_Req, tag="sync"):
    """`autoharnessctl sync`: run one round of the user layer's sync now, or say how the last went."""

    op: SyncOp = "round"


class Report(_Req, tag="report"):
    """What was learned and what it cost over the last `days` days; recall over `turns`
    (0: the library's probation length)."""

    days: int = 30
    turns: int = 0


Request = (Hook | Status | Flush | Stop | Capture | Learn | Queue | Skills | Learnings | Pause
           | Curate | Batch | Sync | Report)


class _Rep(msgspec.Struct, tag_field="type", kw_only=True, omit_defaults=True):
    v: int = PROTOCOL


class HookReply(_Rep, tag="hook_reply"):
    """`output` is the JSON Claude Code should read on the hook's stdout, if any."""

    output: str | None = None


class Ok(_Rep, tag="ok"):
    data: Any = None


class Error(_Rep, tag="error"):
    """`retry` False: the request itself is at fault (not JSON, nested too deep, no request
    this daemon serves), so the same bytes would be refused again: a hook drops such an event
    instead of spooling it. True (the default, also from older daemons): a failure of the
    moment (the journal could not be written), worth spooling and replaying."""

    code: str
    message: str
    retry: bool = True


Reply = HookReply | Ok | Error

_encoder = msgspec.json.Encoder()
request_decoder = msgspec.json.Decoder(Request)
reply_decoder = msgspec.json.Decoder(Reply)


def encode(msg: msgspec.Struct) -> bytes:
    return _encoder.encode(msg)
