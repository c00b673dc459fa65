"""`autoharnessctl capture`: print exactly the packet a model would receive, so a user can
audit what leaves. A transcript works offline too (the daemon's code runs here)."""

from __future__ import annotations

import msgspec

from ...protocol import messages as m
from ...protocol import replies as r
from ..conn import DaemonUnreachable, ask
from ..errors import CtlError
from .common import JSON_HELP, print_json


def add_parser(sub) -> None:
    s = sub.add_parser("capture", help="print exactly what would be sent to the model")
    s.add_argument("--session", metavar="ID", help="a session the daemon knows")
    s.add_argument("--transcript", metavar="PATH", help="a transcript file (works offline)")
    s.add_argument("--from", dest="start", type=int, metavar="OFFSET",
                   help="byte offset to start from (default: the session's watermark, or 0)")
    s.add_argument("--json", action="store_true", help=JSON_HELP)
    s.set_defaults(func=do_capture)


def do_capture(args) -> int:
    from ...daemon import offline

    if bool(args.session) == bool(args.transcript):
        raise CtlError("name exactly one of --session ID or --transcript PATH", code=2)
    try:
        packet = ask(m.Capture(session_id=args.session, start=args.start,
                               transcript_path=args.transcript), r.Packet)
        destination = ask(m.Status(sessions_limit=0), r.Status).reflector.destination
    except DaemonUnreachable:
        if args.session:
            raise
        try:
            packet = offline.capture_packet(args.transcript, args.start or 0)
        except offline.OfflineError as e:
            raise CtlError(str(e)) from None
        destination = offline.destination() + " (by the config file and this shell's " \
            "environment: the daemon is not running)"
    if args.json:
        print_json(msgspec.to_builtins(packet))  # the Packet as it is (`status --json` has the destination)
    else:
        print(offline.format_packet(packet))
        print(f"sent to: {destination}")
    return 0
