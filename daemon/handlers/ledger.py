"""The report's ledger, written by the part that sees each fact (blocking: worker threads).
A record is appended before the fact is acted on further (usage: fsynced); one that cannot be
written (a full disk) is logged and skipped: the figures are advisory and never fail the work."""

import os
import time
from collections.abc import Callable

import structlog

from ...protocol import paths
from ..live import Live
from ..reportlog import ReportLog
from ..sessions import Session

log = structlog.get_logger("autoharness")


class Ledger:

    def __init__(self, live: Live, *, clock: Callable[[], float] = time.time):
        self.live = live
        self.log = ReportLog(clock=clock)

    def _append(self, what: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except OSError as e:
            log.warning(f"{what} not recorded", error=str(e))

    def record_usage(self, **call) -> None:
        """One model call's tokens (see `ReportLog.usage`)."""
        self._append("usage", lambda: self.log.usage(**call))

    def record_context(self, chars: int, parts: list[str]) -> None:
        """A SessionStart context about to be sent; compacts the ledger past its bound."""
        def write() -> None:
            self.log.append("context", chars=chars, parts=parts)
            self.log.compact()  # a stat, unless the ledger outgrew its bound
        self._append("context size", write)

    def record_reminder(self, session: str, root: str | None, skills: list[str]) -> None:
        """A prompt's reminder of these skills (`<layer>/<name>`) in a session of `root`."""
        self._append("reminder", lambda: self.log.append(
            "reminder", session=session, project=root, skills=skills))

    def record_calls(self, s: Session) -> None:
        """A session's tool calls counted so far (its latest total counts)."""
        self._append("call count", lambda: self.log.append(
            "calls", session=s.session_id, started=s.started_at,
            total=s.calls_hook + s.calls_transcript))

    def record_load(self, skill_dir: str, root: str | None, session: str = "") -> None:
        """A skill load with its layer's turn count and session, so recall can say which
        skills were loaded within the last N turns, and whether after a reminder."""
        user = os.path.realpath(paths.user_skills_dir())
        layer = "user" if os.path.dirname(skill_dir) == user else "project"
        scope = root if layer == "project" else None
        self._append("skill load", lambda: self.log.append(
            "use", dir=skill_dir, layer=layer, scope=scope,
            turn=self.live.promoter.turns(layer, scope), session=session))
