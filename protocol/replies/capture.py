"""`autoharnessctl capture`: the evidence packet a model would receive."""

import msgspec


class Packet(msgspec.Struct, frozen=True, kw_only=True):
    """Exactly what a model receives about a stretch of a session, redacted: the window, the
    digest of what came before it, and what was left out and why (`autoharnessctl capture`)."""

    window: str  # redacted JSONL records, each with only its work (UTF-8), markers included
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
    # bytes before a compaction whose summary the window holds (the summary stands for them)
    summarised_bytes: int = 0
    # the learning markers the marker rule finds in the window (assistant text only), whole
    # and redacted, taken before any record was clipped
    markers: list[str] = []
    # how far back the digest read (it covers what the window dropped, from its first record
    # back), and the bytes after the watermark neither window nor digest covers
    digest_from: int = 0
    unseen_bytes: int = 0
    final_from_stop: bool = False  # the window ends with the Stop event's final answer
