"""`autoharnessctl queue list|show|approve|reject|feedback`: proposed skill changes (intents)
and what the promoter made of them, and the reflector's verdicts on skills."""

from __future__ import annotations

from ...protocol import messages as m
from ...protocol import replies as r
from ...protocol.words import finding_text, findings_text, indent, when
from ..conn import call, typed
from ..errors import CtlError
from .common import JSON_HELP, print_json


def add_parser(sub) -> None:
    s = sub.add_parser("queue", help="list, show, approve or reject proposed skill changes",
                       description="Proposed skill changes (intents) and what the promoter "
                       "made of them.")
    s.add_argument("op", choices=tuple(OPS), metavar="OP",
                   help="list: every intent; show ID: one in full; approve ID: land a held one "
                   "(validated again first); reject ID: drop a held one; feedback: the "
                   "reflector's verdicts on skills, accepted or refused (and why)")
    s.add_argument("id", nargs="?", metavar="ID", help="an intent id from `queue list`")
    s.add_argument("--status", choices=("queued", "landed", "rejected", "held"),
                   help="list: only intents in this state (default: all)")
    s.add_argument("--why", metavar="TEXT", help="reject: the reason, kept with the intent")
    s.add_argument("--json", action="store_true", help=JSON_HELP)
    s.set_defaults(func=do_queue)


def do_queue(args) -> int:
    return OPS[args.op](args)


def _feedback(args) -> int:
    req = m.Queue(op="feedback")
    data = call(req)
    verdicts = typed(data, list[r.VerdictRecord], req)
    if args.json:
        print_json(data)
    elif not verdicts:
        print("no verdicts")
    for v in verdicts if not args.json else ():
        print(verdict_line(v))
    return 0


def _list(args) -> int:
    req = m.Queue(op="list")
    data = call(req)
    items = typed(data, list[r.Intent], req)
    if args.status:
        data = [d for d, i in zip(data, items, strict=True) if i.status == args.status]
        items = [i for i in items if i.status == args.status]
    if args.json:
        print_json(data)
    elif not items:
        print("no intents")
    else:
        for i in items:
            print(intent_line(i))
    return 0


def _ask(args):
    if not args.id:
        raise CtlError(f"queue {args.op} needs an intent ID (see `autoharnessctl queue list`)",
                       code=2)
    req = m.Queue(op=args.op, intent_id=args.id, why=args.why)
    return req, call(req)


def _show(args) -> int:
    req, data = _ask(args)
    if args.json:
        print_json(data)
    else:
        print(format_intent(typed(data, r.Intent, req)))
    return 0


def _decide(args) -> int:
    """approve or reject: a held intent that re-validation refuses to land is a negative
    answer (exit 1), printed like any outcome."""
    req, data = _ask(args)
    out = typed(data, r.Outcome, req)
    if args.json:
        print_json(data)
    else:
        why = findings_text(out.findings)
        print(f"{args.id}: {out.status}" + (f": {why}" if why else ""))
    if args.op == "approve" and out.status != "landed":
        return 1  # re-validation against today's tree said no
    return 0


OPS = {"list": _list, "show": _show, "approve": _decide, "reject": _decide,
       "feedback": _feedback}


def intent_line(i: r.Intent) -> str:
    """One `queue list` row: id, status, source, what was proposed, the first finding."""
    p = i.proposal
    what = f"{p.action} {p.skill} [{p.layer}]" if p else "(malformed)"
    why = findings_text(i.findings, limit=1)
    return f"{i.id:<20} {i.status:<9} {i.source:<9} {what}" + (f"  {why}" if why else "")


def verdict_line(v: r.VerdictRecord) -> str:
    """One `queue feedback` row: id, status, source, the verdict, the first finding; then its
    quote."""
    what = f"{v.verdict.verdict} {v.verdict.skill} [{v.verdict.layer}]" if v.verdict else "(malformed)"
    why = findings_text(v.findings, limit=1)
    line = f"{v.id:<20} {v.status:<9} {v.source:<9} {what}" + (f"  {why}" if why else "")
    if v.verdict and v.verdict.evidence:
        line += f"\n    quote: \"{v.verdict.evidence}\""
    return line


def format_intent(i: r.Intent) -> str:
    """`queue show ID` for people: what was proposed, from where, what became of it, when."""
    lines = [f"intent {i.id}: {i.status} (from {i.source}, {when(i.created_at)}"
             + (f"; updated {when(i.updated_at)}" if i.updated_at else "") + ")"]
    for label, value in (("session", i.session_id), ("job", i.job_id),
                         ("project", i.project_root)):
        if value:
            lines.append(f"{label}: {value}")
    for f in i.findings:
        lines.append(f"finding: {finding_text(f)}")
    p = i.proposal
    if p is None:
        lines.append("proposal: malformed" + (f":\n{indent(i.raw)}" if i.raw else ""))
        return "\n".join(lines)
    lines.append(f"proposal: {p.action} {p.skill} [{p.layer} layer]")
    for label, value in (("reason", p.reason), ("evidence", p.evidence),
                         ("description", p.description), ("path", p.path)):
        if value:
            lines.append(f"{label}: {value}")
    for label, value in (("body", p.body), ("old", p.old), ("new", p.new),
                         ("content", p.content)):
        if value:
            lines.append(f"{label}:\n{indent(value)}")
    return "\n".join(lines)
