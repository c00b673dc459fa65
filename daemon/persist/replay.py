"""Replaying the daemon state's journal onto the snapshot it follows.

Records carry post-states: applying one twice changes nothing, except a turn, whose record is
applied once (its seq is newer than the snapshot's only until a snapshot covers it).
"""

from claude_autoharness.daemon import sessions as sm
from claude_autoharness.daemon.persist import state as st
from claude_autoharness.daemon.persist.parts import PartsReplay


def apply_records(state: st.State, records: list[st.Record]) -> list[str]:
    """Apply `records` (journal order) to `state`; return the event ids they carry, in order."""
    parts = PartsReplay(state)
    eids = []
    for rec in records:
        match rec:
            case st.EventRecord():
                _put(state, rec.jobs, [rec.session] if rec.session else [], rec.calls, rec.at)
                if rec.turn:
                    state.turns.add(rec.project)
                if rec.kind:  # the counters a snapshot would have carried
                    parts.count_event(rec.kind)
                if rec.eid:
                    eids.append(rec.eid)
            case st.CallsRecord():
                _put(state, [], [rec.session] if rec.session else [], rec.calls, rec.at)
            case st.JobsRecord():
                _put(state, ([rec.job] if rec.job else []) + rec.jobs,
                     rec.sessions + ([rec.session] if rec.session else []), [], rec.at)
            case st.PartsRecord():
                _put(state, [], rec.sessions, [], rec.at)
                parts.add(rec)
            case st.ForgetRecord():
                for sid in rec.forget_sessions:
                    state.sessions.pop(sid, None)
                for jid in rec.forget_jobs:
                    state.jobs.pop(jid, None)
            case st.CarryRecord():
                _put(state, [rec.job] if rec.job else [], [rec.session] if rec.session else [],
                     [], rec.at)
            case st.SessionRecord():
                _put(state, [], [rec.session] if rec.session else [], [], rec.at)
            case st.TurnRecord():
                state.turns.add(rec.project)
    parts.finish()
    return eids


def _put(state: st.State, jobs: list[sm.Job], sessions: list[sm.Session], calls: list[str],
         at: float) -> None:
    """Post-states replayed: a session keeps the tool ids it remembered, and the last one (the
    record's own session) adds the calls it counted, made no later than `at`."""
    for job in jobs:
        state.jobs[job.id] = job
    for s in sessions:
        prev = state.sessions.get(s.session_id)
        # the replaced post-state is dropped: its lists move over, uncopied
        s.tool_ids = prev.tool_ids if prev is not None else []
        s.tool_at = prev.tool_at if prev is not None else []
        state.sessions[s.session_id] = s
    if calls and sessions:
        for tool_use_id in calls:
            sm.remember_call(sessions[-1], tool_use_id, at)
