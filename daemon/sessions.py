"""The per-session counter state machine. Pure: plain values in, plain values out.

A main session's tool call adds one unit of activity. Two witnesses report calls: the hook's
PreToolUse and the `tool_use` blocks of the session's main transcript; a call both report (same
`tool_use_id`) counts once. Stop at or over `reflect_every` resets the count and creates a
`threshold` job; SessionEnd (or an idle timeout, or an operator flush) with activity left creates
a job for the tail. Child sessions count nothing and trigger nothing.

Both witnesses agree on what is a main-session call: a subagent's calls (PreToolUse with an
`agent_id`; in the transcript, sidechain records and `subagents/` files) are tallied apart in
`subagent_calls` and never advance the cadence, and a Bash call that runs `autoharnessctl learn`
(the /learn command's own call, which makes its own job) is remembered but not counted.
"""

import re
from collections.abc import Callable, Iterable

import msgspec

SESSION_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
KEEP_TOOL_IDS = 256  # per session: more than the calls both witnesses can disagree on at once
MAX_BACKOFF_S = 3600.0

class Session(msgspec.Struct, kw_only=True, omit_defaults=True):
    # fields are only ever added at the end: a snapshot keeps sessions as rows of values
    session_id: str
    activity: int = 0
    watermark: int = 0
    wm_inode: int = 0  # the transcript's inode and size when the watermark was set:
    wm_size: int = 0  # a rewrite (compaction) since then makes the watermark meaningless
    transcript_path: str | None = None
    cwd: str | None = None  # where the session started: decides the project root
    last_event_at: float = 0.0
    ended_at: float | None = None
    context_sent: list[str] = []  # SessionStart context parts already delivered (e.g. "rule")
    started_at: float = 0.0  # when this session was first seen: older transcript calls are history
    calls_hook: int = 0  # tool calls counted from PreToolUse events
    calls_transcript: int = 0  # tool calls counted from the transcript (no hook event came)
    tool_ids: list[str] = []  # the latest counted tool_use ids, oldest first
    tool_at: list[float] = []  # when each of them was made (record time, or hook arrival)
    forgotten_until: float = 0.0  # calls made until then may have left tool_ids: history
    subagent_calls: int = 0  # PreToolUse events of this session's subagents (not activity)


class Job(msgspec.Struct, kw_only=True, omit_defaults=True):
    id: str
    session_id: str
    kind: str
    created_at: float
    transcript_path: str | None = None
    window_start: int = 0
    cwd: str | None = None
    status: str = "pending"
    attempts: int = 0
    last_error: str | None = None
    text: str | None = None  # /learn guidance
    layer: str | None = None
    window_end: int | None = None
    wm_inode: int = 0  # the transcript's inode and size when the window was cut
    wm_size: int = 0
    finished_at: float | None = None
    next_attempt_at: float = 0.0
    usage: dict[str, int] = {}
    intents: list[str] = []
    duplicates: int = 0  # proposals left out: their lesson was already queued from a marker
    event_id: str = ""  # the hook event that created it (one event, at most one job)
    # A Stop's job: the turn's final answer as Stop reported it (redacted, clipped) and the
    # turn's prompt id. The window waits for its record; if it never comes, this stands in.
    final_text: str | None = None
    prompt_id: str | None = None
    interrupted: int = 0  # times the daemon stopped (a crash, a kill) while it ran


class HookEvent(msgspec.Struct, kw_only=True):
    """The fields of a Claude Code hook payload that autoharness reads; the rest is ignored."""

    hook_event_name: str
    session_id: str
    transcript_path: str | None = None
    cwd: str | None = None
    source: str | None = None
    tool_name: str | None = None
    tool_input: msgspec.Raw = msgspec.Raw(b"null")  # kept raw: a Write can carry megabytes
    agent_id: str | None = None
    reason: str | None = None
    tool_use_id: str | None = None
    prompt_id: str | None = None
    last_assistant_message: str | None = None  # Stop: the turn's final text
    prompt: str | None = None  # UserPromptSubmit: what the user typed


KNOWN_EVENTS = frozenset({
    "SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure",
    "Stop", "SubagentStart", "SubagentStop", "PreCompact", "PostCompact", "SessionEnd",
    "Notification", "PermissionRequest",
})


REMINDED = "reminder:"  # a context part naming a skill a prompt was reminded of


def valid_session_id(sid: object) -> bool:
    return isinstance(sid, str) and SESSION_ID_RE.match(sid) is not None


class _BashInput(msgspec.Struct):
    command: str = ""


_bash_input = msgspec.json.Decoder(_BashInput)


def is_learn_command(command: str) -> bool:
    """Whether a shell command runs `autoharnessctl learn` (the /learn command's one call)."""
    words = command.split(None, 2)
    return len(words) >= 2 and words[0].rsplit("/", 1)[-1] == "autoharnessctl" \
        and words[1] == "learn"


def is_learn_call(tool_name: str | None, tool_input: "bytes | msgspec.Raw") -> bool:
    """Whether a tool call (name, raw JSON input) is a Bash call of `autoharnessctl learn`: it
    queues its own job, so it is no activity of the session (a /learn-only session costs one
    model call, not a second one at SessionEnd)."""
    if tool_name != "Bash":
        return False
    data = bytes(tool_input)
    if b"autoharnessctl" not in data:
        return False
    try:
        return is_learn_command(_bash_input.decode(data).command)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False


def _session(sessions: dict[str, Session], ev: HookEvent, now: float) -> Session:
    s = sessions.get(ev.session_id)
    if s is None or s.ended_at is not None:
        prev = s
        s = Session(session_id=ev.session_id, cwd=ev.cwd, transcript_path=ev.transcript_path,
                    started_at=now)
        if prev is not None:  # a resumed session keeps reading where the last job stopped
            s.watermark, s.wm_inode, s.wm_size = prev.watermark, prev.wm_inode, prev.wm_size
            s.cwd = prev.cwd or ev.cwd
            s.activity, s.tool_ids = prev.activity, prev.tool_ids  # calls seen after its end
            s.tool_at, s.forgotten_until = prev.tool_at, prev.forgotten_until
            # a skill the session was reminded of is not named again after a resume
            s.context_sent = [p for p in prev.context_sent if p.startswith(REMINDED)]
        sessions[ev.session_id] = s
    if ev.transcript_path and ev.transcript_path != s.transcript_path:
        s.transcript_path = ev.transcript_path
    if s.cwd is None and ev.cwd:
        s.cwd = ev.cwd
    if ev.hook_event_name == "SessionStart" and ev.source == "startup" and ev.cwd:
        s.cwd = ev.cwd
    s.last_event_at = now
    return s


def new_job(s: Session, kind: str, now: float, make_id: Callable[[], str], **extra) -> Job:
    return Job(
        id=make_id(),
        session_id=s.session_id,
        kind=kind,
        created_at=now,
        transcript_path=s.transcript_path,
        window_start=s.watermark,
        cwd=s.cwd,
        **extra,
    )


def apply_event(
    sessions: dict[str, Session],
    ev: HookEvent,
    *,
    now: float,
    reflect_every: int,
    make_id: Callable[[], str],
    counting: bool = True,
) -> list[Job]:
    """Apply one validated event of a main session; return the jobs it creates.

    `counting=False` (paused, disabled project, child session) records nothing at all.
    """
    if not counting:
        return []
    name = ev.hook_event_name
    if name == "SessionEnd":
        s = sessions.get(ev.session_id)
        if s is None or s.ended_at is not None:
            return []
        s.last_event_at = now
        s.ended_at = now
        if s.activity > 0:
            job = new_job(s, "session_end", now, make_id)
            s.activity = 0
            return [job]
        return []
    s = _session(sessions, ev, now)
    if name == "PreToolUse" and ev.agent_id:  # a subagent's call: shown, never activity
        s.subagent_calls += 1
    elif name == "PreToolUse" and is_learn_call(ev.tool_name, ev.tool_input):
        if ev.tool_use_id:  # known, so the transcript does not count it either
            remember_call(s, ev.tool_use_id, now)
    elif name == "PreToolUse":
        if not ev.tool_use_id or remember_call(s, ev.tool_use_id, now):
            s.activity += 1
            s.calls_hook += 1
    elif name == "Stop" and s.activity >= reflect_every:
        s.activity = 0
        return [new_job(s, "threshold", now, make_id)]
    return []


def remember_call(s: Session, tool_use_id: str, at: float) -> bool:
    """Note a counted call made at `at`; False if it was counted already (the other witness
    saw it). An id pushed out of the memory moves `forgotten_until` up to its time, and the
    transcript takes calls up to then for history: a long session whose transcript is read
    late (a catch-up after an outage, read offsets lost) counts none twice."""
    if tool_use_id in s.tool_ids:
        return False
    _append_calls(s, [(tool_use_id, at)])
    return True


def replay_calls(s: Session, calls: list[tuple[str, float]]) -> None:
    """Remember a session's counted calls, (tool_use_id, time) in the order they were
    counted, in one pass (a journal replay brings them back in a batch): the memory and
    `forgotten_until` end as `remember_call` one by one leaves them, an id already remembered
    skipped. Only an id pushed out and counted again within the batch (a copy of an event
    arriving after KEEP_TOOL_IDS other calls) is not taken again."""
    known, first = set(s.tool_ids), dict[str, float]()
    for tool_use_id, at in calls:
        first.setdefault(tool_use_id, at)
    _append_calls(s, [(i, at) for i, at in first.items() if i not in known])


def _append_calls(s: Session, calls: list[tuple[str, float]]) -> None:
    """Append new calls to the memory, then push out the oldest past KEEP_TOOL_IDS (their
    latest time becomes `forgotten_until`)."""
    if not calls:
        return
    if len(s.tool_at) != len(s.tool_ids):  # ids kept without their times: take them as now
        s.tool_at = [calls[0][1]] * len(s.tool_ids)
    s.tool_ids += [tool_use_id for tool_use_id, _ in calls]
    s.tool_at += [at for _, at in calls]
    if len(s.tool_ids) > KEEP_TOOL_IDS:
        s.forgotten_until = max(s.forgotten_until, *s.tool_at[:-KEEP_TOOL_IDS])
        del s.tool_ids[:-KEEP_TOOL_IDS], s.tool_at[:-KEEP_TOOL_IDS]


def transcript_calls(s: Session, calls: list[tuple[str, float]]) -> list[str]:
    """Count the main-chain `tool_use` blocks read from the session's transcript, as
    (tool_use_id, record time), that no PreToolUse counted. Calls older than the session's
    first event are history (a resumed transcript, a first scan), never counted, and so are
    calls no newer than the ids the session has forgotten (see `remember_call`). A call read
    after SessionEnd still counts: headless runs end before their last records are read.
    Returns the ids newly counted."""
    added = []
    for tool_use_id, at in calls:
        if at < s.started_at or at <= s.forgotten_until \
                or not remember_call(s, tool_use_id, at):
            continue
        s.activity += 1
        s.calls_transcript += 1
        added.append(tool_use_id)
    return added


def flush(sessions: dict[str, Session], session_ids: list[str], *, now: float, kind: str,
          make_id: Callable[[], str]) -> list[Job]:
    """Operator flush / idle flush: a job for each named session with activity, counter reset."""
    jobs = []
    for sid in session_ids:
        s = sessions.get(sid)
        if s is None or s.activity <= 0:
            continue
        jobs.append(new_job(s, kind, now, make_id))
        s.activity = 0
    return jobs


def idle_sessions(sessions: dict[str, Session], *, now: float, idle_after: float,
                  last_growth: Callable[[Session], float]) -> list[str]:
    """Sessions with activity whose events and transcript have both been quiet for `idle_after`
    (an ended session has activity only from calls its transcript showed after SessionEnd)."""
    out = []
    for s in sessions.values():
        if s.activity <= 0:
            continue
        quiet_since = max(s.last_event_at, last_growth(s))
        if now - quiet_since >= idle_after:
            out.append(s.session_id)
    return out


def drop_finished(jobs: dict[str, Job], *, keep: int) -> list[str]:
    """Drop the finished (done or failed) jobs beyond the `keep` that finished last; return
    their ids."""
    finished = sorted((j for j in jobs.values() if j.status in ("done", "failed")),
                      key=lambda j: j.finished_at or j.created_at)
    dropped = [j.id for j in finished[:max(0, len(finished) - keep)]]
    for jid in dropped:
        del jobs[jid]
    return dropped


def prune_sessions(sessions: dict[str, Session], *, now: float, keep_ended_s: float,
                   retention_s: float, busy: set[str]) -> list[str]:
    """Drop sessions no job still needs (`busy`) whose count is spent (activity 0: what they
    counted is a journaled job already): ended ones after `keep_ended_s`, and any quiet for
    `retention_s` (Claude Code killed without a SessionEnd). Returns the ids dropped."""
    stale = []
    for sid, s in sessions.items():
        if sid in busy or s.activity > 0:
            continue
        ended = s.ended_at is not None and now - s.ended_at > keep_ended_s
        if ended or now - max(s.last_event_at, s.started_at, s.ended_at or 0.0) > retention_s:
            stale.append(sid)
    for sid in stale:
        del sessions[sid]
    return stale


def expire_jobs(jobs: Iterable[Job], *, now: float, max_age_s: float, why: str) -> list[Job]:
    """End the unfinished jobs created more than `max_age_s` ago: they can never run (their
    transcript long rewritten, the backend missing for weeks, parked too often). Each is
    failed with a reason saying so; returns them."""
    out = []
    for j in jobs:
        if j.status in ("pending", "running") and now - j.created_at > max_age_s:
            j.status, j.finished_at = "failed", now
            j.last_error = (f"expired: not done {max_age_s / 86_400:g} days after it was queued "
                            f"({why}); last error: {j.last_error or 'none'}")
            out.append(j)
    return out


def backoff(attempt: int, base: float, rand: Callable[[], float]) -> float:
    """Exponential backoff with full jitter on the upper half, capped."""
    d = min(MAX_BACKOFF_S, base * (2 ** max(0, attempt - 1)))
    return d * (0.5 + rand() / 2)


def resume_interrupted(job: Job, *, now: float, park_after: int,
                       wait: Callable[[int], float]) -> None:
    """A job found running at start was interrupted (a crash, a kill, a stop): it runs again.
    Its `attempts` (model calls answered with an error) do not change: a call in flight when
    the daemon died was never answered. Interrupted more than `park_after` times, it is parked
    for `wait(times over)` with the reason in `last_error`, then retried: never dropped."""
    job.interrupted += 1
    job.status = "pending"
    if job.interrupted > park_after:
        delay = wait(job.interrupted - park_after)
        job.next_attempt_at = now + delay
        job.last_error = (f"interrupted {job.interrupted} times while running (the daemon "
                          f"crashed or was killed); parked, retried in {delay:.0f} s")
