"""`autoharnessctl`: the operator CLI. One `do_<verb>` per command; most talk RPC to the daemon."""

import argparse
import json
import sys
import time

from autoharness.protocol import PROTOCOL, VERSION
from autoharness.protocol import messages as m
from autoharness.client.conn import DaemonError, DaemonUnreachable, call


class CtlError(Exception):
    """A problem the operator can fix; printed without a traceback, exit 1."""


def _ago(ts: float | None, now: float) -> str:
    if not ts:
        return "never"
    d = max(0.0, now - ts)
    if d < 60:
        return f"{d:.0f}s ago"
    if d < 3600:
        return f"{d / 60:.0f}m ago"
    return f"{d / 3600:.1f}h ago"


def _print_json(obj) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True, default=str))


def format_status(st: dict, now: float | None = None) -> str:
    now = time.time() if now is None else now
    lines = [
        f"autoharnessd {st['version']} (protocol {st['protocol']}), pid {st['pid']}, "
        f"up {st['uptime_s']:.0f}s, socket {st['socket']}"
    ]
    if st["protocol"] != PROTOCOL or st["version"] != VERSION:
        lines.append(f"WARNING: daemon {st['version']}/protocol {st['protocol']} differs from this "
                     f"client {VERSION}/protocol {PROTOCOL}: restart the daemon")
    if st.get("paused"):
        lines.append("PAUSED: hooks count nothing (`autoharnessctl resume`)")
    ev = st["events"]
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(ev["by_kind"].items())) or "none"
    lines.append(f"events: {ev['received']} received, {ev['rejected']} rejected ({kinds})")
    j = st["jobs"]
    lines.append(f"jobs: {j['pending']} pending, {j['running']} running, {j['done']} done, "
                 f"{j['failed']} failed")
    sp = st["spool"]
    lines.append(f"spool: {sp['pending']} pending, {sp['replayed']} replayed")
    p = st["persistence"]
    q = ", ".join(p["quarantined"]) or "none"
    lines.append(f"persistence: last snapshot {_ago(p['last_snapshot_at'], now)}; quarantined: {q}")
    sessions = st["sessions"]
    if sessions:
        lines.append("sessions:")
        lines.append(f"  {'SESSION':<38} {'ACTIVITY':>8} {'WATERMARK':>10}  LAST EVENT")
        for s in sorted(sessions, key=lambda s: -s["last_event_at"]):
            lines.append(f"  {s['session_id']:<38} {s['activity']:>8} {s['watermark']:>10}  "
                         f"{_ago(s['last_event_at'], now)}")
    else:
        lines.append("sessions: none active")
    return "\n".join(lines)


def do_status(args) -> int:
    st = call(m.Status())
    if args.json:
        _print_json(st)
    else:
        print(format_status(st))
    return 0


def do_flush(args) -> int:
    if not args.all and not args.session_ids:
        raise CtlError("name one or more SESSION_IDs, or pass --all")
    out = call(m.Flush(session_ids=args.session_ids, all=args.all))
    if args.json:
        _print_json(out)
        return 0
    for job in out["jobs"]:
        print(f"queued {job['kind']} job {job['id']} for session {job['session_id']}")
    if not out["jobs"]:
        print("nothing to flush (no named session has unreflected activity)")
    for sid in out["unknown"]:
        print(f"unknown session: {sid}", file=sys.stderr)
    return 0


def do_stop(args) -> int:
    out = call(m.Stop())
    print(f"stopping autoharnessd (pid {out['pid']})")
    return 0


def do_pause(args) -> int:
    call(m.Pause(paused=True))
    print("paused: hooks count nothing until `autoharnessctl resume`")
    return 0


def do_resume(args) -> int:
    call(m.Pause(paused=False))
    print("resumed: hooks count again")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="autoharnessctl",
        description="Operate the autoharness daemon: see what it counted, flush sessions, "
        "inspect what it learned.",
    )
    p.add_argument("--version", action="version", version=f"autoharnessctl {VERSION}")
    sub = p.add_subparsers(dest="verb", metavar="COMMAND", required=True)

    s = sub.add_parser("status", help="show sessions, events, jobs, spool and persistence")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=do_status)

    s = sub.add_parser("flush", help="queue a reflection job now for sessions with activity")
    s.add_argument("session_ids", nargs="*", metavar="SESSION_ID")
    s.add_argument("--all", action="store_true", help="every session with activity")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=do_flush)

    s = sub.add_parser("stop", help="stop the daemon cleanly (state is persisted)")
    s.set_defaults(func=do_stop)
    s = sub.add_parser("pause", help="make hooks count nothing until resume")
    s.set_defaults(func=do_pause)
    s = sub.add_parser("resume", help="undo pause")
    s.set_defaults(func=do_resume)
    return p


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        code = args.func(args)
    except DaemonUnreachable as e:
        print(f"autoharnessctl: {e}", file=sys.stderr)
        code = 1
    except (DaemonError, CtlError) as e:
        print(f"autoharnessctl: {e}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)
