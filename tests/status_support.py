"""A daemon's typed status for tests of what the CLI and doctor make of one."""

from claude_autoharness.protocol import PROTOCOL, VERSION
from claude_autoharness.protocol import replies as r


def healthy_status(**parts) -> r.Status:
    """A daemon's typed status with nothing pending or failing, the `parts` named replaced."""
    healthy = dict(
        version=VERSION, protocol=PROTOCOL, pid=1, uptime_s=2.0, socket="/s", paused=False,
        sessions=[], events=r.EventCounts(received=0, rejected=0, by_kind={}, unknown_kinds=0,
                                          malformed_frames=0, peer_rejected=0),
        jobs=r.JobCounts(), connections={}, spool=r.SpoolInfo(replayed=0, pending=0),
        persistence=r.PersistenceInfo(last_snapshot_at=None, quarantined=[], failing=None),
        watcher={}, capture={}, intents={},
        reflector=r.ReflectorInfo(backend="api", configured="auto", model="m", reason=None,
                                  tokens_today=0, tokens_total=0, daily_token_budget=None),
        promoter=r.PromoterInfo(mode="auto", landed=0, rejected=0, held=0,
                                last_landing_at=None, findings={}),
        library=r.LibraryInfo(), learnings=r.LearningsInfo(markers_seen=0, unprocessed=0,
                                                           projects=0))
    return r.Status(**(healthy | parts))
