"""One reflection, whoever runs it: cut the window, build the prompt, ask the backend, take
the reply into the intent queue, charge the tokens. The pool runs it for a session's jobs, the
batch runner for a backlog's windows (asking through the Message Batches API instead of
`backends.reflect`), and offline replay for a throwaway queue; all three go through these
steps, so a window is cut, prompted and taken in the same way wherever it came from.

Invariants: the prompt carries the project's live skills, the user's memory lessons and the
window's markers not queued yet; a proposal whose evidence is a lesson already queued from a
marker is left out (one lesson, one intent); every call's tokens are charged to the day and
recorded in the report's ledger before its reply is acted on.
"""

import builtins
import datetime
import os
import time
from collections.abc import Callable, Iterable
from typing import Protocol

import anyio

from ..capture.packet import Packet, build_packet
from ..live import Live
from ..promote import memory, skillfile
from ..promote.evidence import decode_escapes, normalize
from ..proposals import Intent
from ..sessions import Session
from . import backends, windows
from .prompt import Prompt, build_request
from .sessionloads import SessionLoads

USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read", "cache_creation")


def today(ts: float) -> str:
    """The day a token count is charged to."""
    return "day:" + datetime.date.fromtimestamp(ts).isoformat()


class Tokens(Protocol):
    """The daily token tallies the budget is judged by."""

    def tokens_on(self, day: str, backend: str = "") -> int: ...

    def add_tokens(self, day: str, n: int, backend: str = "") -> None: ...


class IntentSink(Protocol):
    """The durable intent queue, as far as reflection uses it."""

    def list(self, status: str | None = None) -> builtins.list[Intent]: ...

    def intake(self, job_id: str, session_id: str, source: str,
               raw_proposals: builtins.list[object], window: str, project_root: str | None,
               max_intents: int, redactor, raw_feedback=(), feedback_window: str | None = None,
               loaded_before=(), window_at: float = 0.0) -> builtins.list[Intent]: ...

    def job_recorded(self, job_id: str) -> bool: ...


class Ledger(Protocol):
    """The report's ledger, as reflection writes it (blocking)."""

    def record_usage(self, **call) -> None:
        """One model call's tokens."""

    def record_calls(self, s: Session) -> None:
        """A session's tool calls counted so far."""


class Reflection:
    """The shared steps. Blocking ones say so (run them in a worker thread); the async ones
    move their own blocking work to threads."""

    def __init__(self, tokens: Tokens, intents: IntentSink, live: Live, *,
                 ledger: Ledger,
                 save_window: Callable[[str, str], None] | None = None,
                 clock: Callable[[], float] = time.time):
        """`ledger` records each call's tokens and each session's calls (the pool's);
        `save_window(job_id, text)` keeps the evidence window for the promoter (default: in
        the state dir)."""
        self.tokens = tokens
        self.intents = intents
        self.live = live
        self.ledger = ledger
        self.save_window = save_window or windows.save_window
        self.clock = clock
        self.session_loads = SessionLoads()  # a `missed` verdict is grounded against these

    # ---- the budget ----------------------------------------------------------------------

    def tokens_left(self, backend: str = "") -> int | None:
        """What today's budget has left (None: no budget): the overall one, or the lower of it
        and `backend`'s own (`reflector.backend_budgets`)."""
        r = self.live.cfg.reflector
        day = today(self.clock())
        left = [r.daily_token_budget - self.tokens.tokens_on(day)] if r.daily_token_budget else []
        own = r.backend_budgets.get(backend, 0) if backend else 0
        if own:
            left.append(own - self.tokens.tokens_on(day, backend))
        return min(left) if left else None

    def budget_spent(self, what: str, backend: str = "") -> str:
        """Why `what` waits for tomorrow ("" while the budget lasts)."""
        left = self.tokens_left(backend)
        if left is None or left > 0:
            return ""
        r = self.live.cfg.reflector
        day = today(self.clock())
        own = r.backend_budgets.get(backend, 0) if backend else 0
        if own and self.tokens.tokens_on(day, backend) >= own:
            return (f"the {backend} backend's daily token budget of {own} reached: {what} "
                    "wait until tomorrow")
        return f"daily token budget of {r.daily_token_budget} reached: {what} wait until tomorrow"

    # ---- cut, prompt, ask ----------------------------------------------------------------

    def cut(self, path: str, start: int, **kw) -> Packet:
        """The packet of `path` from `start` as configured, redacted (blocking; `kw` as for
        `build_packet`)."""
        return build_packet(path, start, self.live.cfg.capture, self.live.redactor, **kw)

    def prompt(self, packet: Packet | None, guidance: str | None, root: str | None, *,
               skills: list[dict] | None = None) -> Prompt:
        """The reflection request for a packet of project `root` (blocking: lists skills,
        unless `skills` is that list already)."""
        return reflection_prompt(packet, guidance,
                                 self.skill_index(root) if skills is None else skills,
                                 max_intents=self.live.cfg.reflector.max_intents_per_job,
                                 queued_markers=queued_marker_texts(self.intents.list()),
                                 memory=self.memory_index(root))

    def skill_index(self, project_root: str | None) -> list[dict]:
        """Name, layer, owner and description of every live skill (blocking)."""
        out = []
        for info in self.live.promoter.list_skills(project_root):
            if info.status != "live":
                continue
            try:
                with open(os.path.join(info.path, "SKILL.md"), encoding="utf-8") as f:
                    fields, _ = skillfile.parse(f.read(64 * 1024))
                desc = fields.get("description", "")
            except (OSError, ValueError, skillfile.SkillFormatError):
                desc = ""
            out.append({"name": info.name, "layer": info.layer, "owner": info.owner,
                        "description": desc})
        return out

    def memory_index(self, project_root: str | None) -> list[dict]:
        """The lessons of the user's own memory (CLAUDE.md files, auto memory), redacted
        (blocking; bounded by `promote.memory`)."""
        redact = self.live.redactor.redact
        return [{"source": x.source, "text": redact(x.text)[0]}
                for x in memory.lessons(project_root)]

    def ask(self, backend: str, prompt: Prompt, cfg=None) -> backends.ReflectResult:
        """One reflection on `backend` with reflector config `cfg` (default: the live one;
        blocking; raises the backends' errors)."""
        return backends.reflect(backend, prompt, cfg or self.live.cfg.reflector)

    # ---- take in, charge -----------------------------------------------------------------

    async def charge(self, usage: dict, **call) -> None:
        """A call's tokens: charged to today, then recorded in the ledger (`call` names the
        job, attempt, kind, backend, model, ok, batch) before the reply is acted on, so a
        crash after the call loses no record of what it cost."""
        n = sum(int(usage.get(k) or 0) for k in USAGE_KEYS)
        if n:
            self.tokens.add_tokens(today(self.clock()), n, str(call.get("backend") or ""))
        await anyio.to_thread.run_sync(lambda: self.ledger.record_usage(usage=usage, **call))

    async def take_in(self, job_id: str, session_id: str, source: str,
                      result: backends.ReflectResult, window: str, root: str | None, *,
                      max_intents: int | None = None, drop_saved: bool = True,
                      keep_window: bool = True, feedback_window: str | None = None,
                      loaded_before: list[str] | tuple[str, ...] = (),
                      window_at: float = 0.0) -> tuple[list[Intent], int]:
        """The reply's proposals and verdicts into the queue (durable once this returns), with
        the lessons already queued from markers left out (`drop_saved`); the window kept first
        (`keep_window`: a batch item's was kept when it was sent). Verdicts may quote only
        `feedback_window` (the records no earlier window had; None: the whole window) and carry
        `loaded_before` (the session's loads up to the window's end) and `window_at` (when it
        ended). Returns the intents and how many proposals were left out."""
        proposals, dups = list(result.proposals), 0
        if drop_saved:
            proposals, dups = drop_saved_lessons(proposals, queued_marker_texts(self.intents.list()))
        if keep_window:
            await anyio.to_thread.run_sync(self.save_window, job_id, window)
        limit = self.live.cfg.reflector.max_intents_per_job if max_intents is None else max_intents
        redactor = self.live.redactor
        intents = await anyio.to_thread.run_sync(
            lambda: self.intents.intake(job_id, session_id, source, proposals, window, root,
                                        limit, redactor, raw_feedback=result.feedback,
                                        feedback_window=feedback_window,
                                        loaded_before=loaded_before,
                                        window_at=window_at))
        return intents, dups


# ---- the pure parts ------------------------------------------------------------------------

def queued_marker_texts(intents: Iterable[Intent]) -> list[str]:
    """The lessons already queued from the agent's own markers."""
    return [i.proposal.evidence for i in intents
            if i.source == "marker" and i.proposal is not None and i.proposal.evidence]


def evidence_of(packet: Packet | None) -> str:
    """What a proposal's evidence may quote: the window, and its markers whole (the agent's own
    words from the window's records, which a clip may have cut out of them)."""
    if packet is None:
        return ""
    return "\n".join([packet.window, *packet.markers]) if packet.markers else packet.window


def fresh_markers(markers: list[str], queued_markers: list[str]) -> list[str]:
    """The window's markers (the packet's: assistant text only, taken before any clip) not
    already queued as `marker` intents."""
    queued = {normalize(t) for t in queued_markers}
    return [mk for mk in markers if normalize(mk) not in queued]


def reflection_prompt(packet: Packet | None, guidance: str | None, skill_index: list[dict], *,
                      max_intents: int, queued_markers: list[str], memory=()) -> Prompt:
    """What the model is asked for one packet: its window and digest, the live skills, the
    user's own memory lessons, the user's guidance (/learn) and the markers in the window not
    yet queued."""
    window = packet.window if packet else ""
    return build_request(window, packet.digest if packet else "", skill_index,
                         guidance=guidance, max_intents=max_intents,
                         markers=fresh_markers(packet.markers if packet else [],
                                               queued_markers), memory=memory)


def drop_saved_lessons(proposals: list[object], marker_texts: list[str]) -> tuple[list[object], int]:
    """Leave out proposals whose evidence is a lesson already queued from a marker (one lesson,
    one intent). Returns the rest and how many were left out."""
    saved = [normalize(t) for t in marker_texts if t.strip()]
    if not saved:
        return list(proposals), 0
    keep = []
    for p in proposals:
        ev = normalize(decode_escapes(p.get("evidence") or "")) if isinstance(p, dict) else ""
        if ev and len(ev) >= 20 and any(ev in t or t in ev for t in saved):
            continue
        keep.append(p)
    return keep, len(proposals) - len(keep)
