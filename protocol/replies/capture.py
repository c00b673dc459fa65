"""`autoharnessctl capture`: the evidence packet a model would receive."""

import msgspec


class Packet(msgspec.Struct, frozen=True, kw_only=True):
    """Exactly what a model receives about a stretch of a session, redacted: the window, the
    digest of what came before it, and what was left out and why (`autoharnessctl capture`)."""

    window: str  # redacted raw JSONL (UTF-8, undecodable bytes replaced), markers included
    digest: str  # redacted orientation from before the window
    watermark_from: int  # the window's span is [watermark_from, watermark_to)
    watermark_to: int  # the session's next watermark once the job completes
    dropped_bytes: int
    dropped_records: int  # as far as they were seen
    fallback: bool
    redactions: dict[str, int]
    inode: int
    size: int
    clipped_records: int = 0
    kept_records: int = 0
    fallback_reason: str = ""
    digest_records: int = 0
    scanned_bytes: int = 0  # window + digest bytes read from the transcript
    # Claude Code's bookkeeping records left out of the window (not conversation), by type
    bookkeeping_records: int = 0
    bookkeeping_bytes: int = 0
    bookkeeping_types: dict[str, int] = {}
    # records left out because a reflector already had them (a fork's copies of its parent)
    reflected_records: int = 0
    reflected_bytes: int = 0
    uuids: list[str] = []  # of the window's records: remembered once it is reflected
    final_from_stop: bool = False  # the window ends with the Stop event's final answer
