"""Which install delivered each session's hook events: the plugin's hooks (an enabled plugin,
or `claude --plugin-dir`) say `via=plugin`, the settings hooks `via=settings`. A session heard
through both had every hook run twice by Claude Code; the daemon counts each call once
anyway, but the user should keep one install. No settings file shows a command-line flag, so
only the daemon can tell, and `status` (and `doctor`) say it.

Advisory and in memory (a day's worth, bounded): not state, nothing journaled.
"""

from __future__ import annotations

from ..protocol.replies import DeliveryInfo

WINDOW_S = 86_400.0
MAX_SESSIONS = 1_000


class Deliveries:
    def __init__(self) -> None:
        self._via: dict[str, tuple[set[str], float]] = {}  # session -> (vias, last seen)

    def seen(self, session_id: str, via: str, now: float) -> None:
        if via not in ("plugin", "settings"):
            return  # an older hook, or a replay: it says nothing of the install
        vias, _ = self._via.pop(session_id, (set(), now))
        vias.add(via)
        self._via[session_id] = (vias, now)  # re-inserted: the dict stays oldest first
        while len(self._via) > MAX_SESSIONS:
            del self._via[next(iter(self._via))]

    def info(self, now: float) -> DeliveryInfo:
        both = [(at, sid) for sid, (vias, at) in self._via.items()
                if len(vias) > 1 and now - at < WINDOW_S]
        if not both:
            return DeliveryInfo()
        at, sid = max(both)
        return DeliveryInfo(both=len(both), last_session=sid, last_at=at)
