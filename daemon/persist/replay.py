"""Replaying the daemon state's journal onto the snapshot it follows.

Records carry post-states: applying one twice changes nothing, except a turn, whose record is
applied once (its seq is newer than the snapshot's only until a snapshot covers it).
"""

from .. import sessions as sm
from . import state as st
from .parts import PartsReplay


def apply_records(state: st.State, records: list[st.Record]) -> list[str]:
    """Apply `records` (journal order) to `state`; return the event ids they carry, in order.
    The calls each session counted are remembered at the end, in one batch per session."""
    parts = PartsReplay(state)
    eids: list[str] = []
    calls: dict[str, list[tuple[str, float]]] = {}  # session id -> its calls, journal order
    for rec in records:
        match rec:
            case st.EventRecord():
                _put(state, rec.jobs, [rec.session] if rec.session else [], rec.calls, rec.at,
                     calls)
                if rec.turn:
                    state.turns.add(rec.project)
                if rec.kind:  # the counters a snapshot would have carried
                    parts.count_event(rec.kind)
                if rec.eid:
                    eids.append(rec.eid)
            case st.CallsRecord():
                _put(state, [], [rec.session] if rec.session else [], rec.calls, rec.at, calls)
            case st.JobsRecord():
                _put(state, ([rec.job] if rec.job else []) + rec.jobs,
                     rec.sessions + ([rec.session] if rec.session else []), [], rec.at, calls)
            case st.PartsRecord():
                _put(state, [], rec.sessions, [], rec.at, calls)
                parts.add(rec)
            case st.ForgetRecord():
                for sid in rec.forget_sessions:
                    state.sessions.pop(sid, None)
                    calls.pop(sid, None)
                for jid in rec.forget_jobs:
                    state.jobs.pop(jid, None)
            case st.CarryRecord():
                _put(state, [rec.job] if rec.job else [], [rec.session] if rec.session else [],
                     [], rec.at, calls)
            case st.SessionRecord():
                _put(state, [], [rec.session] if rec.session else [], [], rec.at, calls)
            case st.TurnRecord():
                state.turns.add(rec.project)
    parts.finish()
    for sid, counted in calls.items():
        if (s := state.sessions.get(sid)) is not None:
            sm.replay_calls(s, counted)
    return eids


def _put(state: st.State, jobs: list[sm.Job], sessions: list[sm.Session], calls: list[str],
         at: float, counted: dict[str, list[tuple[str, float]]]) -> None:
    """Post-states replayed: a session keeps the tool ids it remembered, and the last one (the
    record's own session) adds the calls it counted, made no later than `at`, to `counted`."""
    for job in jobs:
        state.jobs[job.id] = job
    for s in sessions:
        prev = state.sessions.get(s.session_id)
        # the replaced post-state is dropped: its lists move over, uncopied
        s.tool_ids = prev.tool_ids if prev is not None else []
        s.tool_at = prev.tool_at if prev is not None else []
        state.sessions[s.session_id] = s
    if calls and sessions:
        counted.setdefault(sessions[-1].session_id, []).extend((c, at) for c in calls)
