"""`autoharnessctl flush SESSION_ID... | --all`: queue a reflection job now for sessions with
activity."""

from __future__ import annotations

from ...protocol import messages as m
from ...protocol import replies as r
from ..conn import call, typed
from ..errors import CtlError
from .common import JSON_HELP, print_json, warn_if_waiting


def add_parser(sub) -> None:
    s = sub.add_parser("flush", help="queue a reflection job now for sessions with activity")
    s.add_argument("session_ids", nargs="*", metavar="SESSION_ID",
                   help="a session to reflect on (`autoharnessctl status` lists them)")
    s.add_argument("--all", action="store_true", help="every session with activity")
    s.add_argument("--json", action="store_true", help=JSON_HELP)
    s.set_defaults(func=do_flush)


def do_flush(args) -> int:
    """The named sessions' jobs are queued even when another name is unknown; the unknown
    ones are the error (exit 1), after the queued jobs are printed."""
    if not args.all and not args.session_ids:
        raise CtlError("name one or more SESSION_IDs, or pass --all", code=2, verb="flush")
    req = m.Flush(session_ids=args.session_ids, all=args.all)
    data = call(req)
    if args.json:
        print_json(data)
        return 0
    out = typed(data, r.Flushed, req)
    for job in out.jobs:
        print(f"queued {job.kind} job {job.id} for session {job.session_id}")
    queued = {job.session_id for job in out.jobs}
    idle = [s for s in dict.fromkeys(args.session_ids) if s not in queued and s not in out.unknown]
    if args.all and not out.jobs:
        print("nothing to flush: no session has activity that was not reflected on yet")
    elif idle:
        print(f"nothing to flush for {', '.join(idle)}: no activity that was not reflected on "
              "yet")
    if out.jobs:
        warn_if_waiting()
    if out.unknown:
        raise CtlError("; ".join(f"unknown session: {sid}" for sid in out.unknown)
                       + " (`autoharnessctl status` lists the active ones)")
    return 0
