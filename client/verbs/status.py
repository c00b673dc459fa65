"""`autoharnessctl status`: sessions, events, jobs, spool, persistence, library, as the
daemon counts them (`--json`: its reply as sent, the pages joined with `--all`)."""

from __future__ import annotations

import os
import time

from ...protocol import PROTOCOL, VERSION
from ...protocol import messages as m
from ...protocol import replies as r
from ...protocol.words import adherence_line, plural, waiting_reason
from ..conn import call, typed
from .common import (
    ago,
    count,
    print_json,
    waiting_note,
)
from .skills import check_line
from .sync import format_info


def add_parser(sub) -> None:
    s = sub.add_parser("status", help="show sessions, events, jobs, spool and persistence")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.add_argument("--all", action="store_true",
                   help="list every live session (default: the newest --limit, and a count)")
    s.add_argument("--limit", type=count, default=50, metavar="N",
                   help="live sessions to list, newest first (default 50)")
    s.add_argument("--offset", type=count, default=0, metavar="N",
                   help="skip the N newest sessions (page with --limit)")
    s.set_defaults(func=do_status)


def do_status(args) -> int:
    limit = m.STATUS_MAX_SESSIONS if args.all else args.limit
    req = m.Status(sessions_limit=limit, sessions_offset=args.offset)
    data = call(req)
    if args.all:  # every live session, a page at a time: each reply stays small
        pages = [data]
        while (got := sum(len(p["sessions"]) for p in pages)) < pages[0].get("sessions_total", 0) \
                and pages[-1]["sessions"]:
            pages.append(call(m.Status(sessions_limit=m.STATUS_MAX_SESSIONS,
                                       sessions_offset=args.offset + got)))
        data = dict(pages[-1], sessions=[s for p in pages for s in p["sessions"]],
                    sessions_offset=args.offset)
    from ..files import worktree_top
    from ..listing import listing_or_none

    listing = listing_or_none(worktree_top(os.getcwd()))  # a session started here
    if args.json:  # as the daemon sent it (the pages joined with --all), and the listing
        import msgspec

        print_json(dict(data, listing=msgspec.to_builtins(listing) if listing else None))
    else:
        print(format_status(typed(data, r.Status, req)))
        if listing is not None:
            print(f"listing: {listing.text}" + (f"\n  fix: {listing.fix}" if listing.fix else ""))
    return 0


def seen_share(seen: dict[str, int]) -> str:
    """`100%/0%`: the share of a session's windowed bytes sent as records (or a summary
    standing for them) / only as the digest; `-` before its first window."""
    total = seen.get("bytes", 0)
    if not total:
        return "-"
    sent = seen.get("window_bytes", 0) + seen.get("summarised_bytes", 0)
    return f"{100 * sent // total}%/{100 * seen.get('digest_bytes', 0) // total}%"


def format_status(st: r.Status, now: float | None = None) -> str:
    now = time.time() if now is None else now
    parts = (_head, _jobs, _reflector, _stores, _library, _sessions)
    return "\n".join(line for part in parts for line in part(st, now))


def _head(st: r.Status, now: float) -> list[str]:
    lines = [
        f"autoharnessd {st.version} (protocol {st.protocol}), pid {st.pid}, "
        f"up {st.uptime_s:.0f}s, socket {st.socket}"
    ]
    if st.protocol != PROTOCOL or st.version != VERSION:
        lines.append(f"WARNING: daemon {st.version}/protocol {st.protocol} differs from this "
                     f"client {VERSION}/protocol {PROTOCOL}: restart the daemon")
    if st.paused:
        lines.append("PAUSED: hooks count nothing (`autoharnessctl resume`)")
    ev = st.events
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(ev.by_kind.items())) or "none"
    copies = f", {ev.duplicates} repeated copies dropped" if ev.duplicates else ""
    lines.append(f"events: {ev.received} received, {ev.rejected} rejected{copies} ({kinds})")
    if st.delivery.both:
        lines.append(f"TWICE: {plural(st.delivery.both, 'session')} had every hook run twice, "
                     "by the plugin and by the settings install; keep one "
                     "(`autoharnessctl doctor` says how)")
    return lines


def _jobs(st: r.Status, now: float) -> list[str]:
    j = st.jobs
    lines = [f"jobs: {j.pending} pending, {j.running} running, {j.done} done, {j.failed} failed"]
    for f in j.recent_failures:
        where = f", session {f.session_id}" if f.session_id else ""
        lines.append(f"  failed {f.kind or 'job'} job {f.job}{where} "
                     f"({ago(f.finished_at, now)}): {f.error or 'no reason recorded'}")
    if j.failed > len(j.recent_failures) and j.recent_failures:
        lines.append(f"  ({plural(j.failed - len(j.recent_failures), 'earlier failure')} not "
                     "shown)")
    if j.pending:
        note = waiting_note(st)
        if note:
            lines.append(f"WAITING: {note}")
    elif waiting_reason(st):  # nothing queued yet: say what will happen to the first job
        lines.append(f"reflector: {waiting_reason(st)}; jobs will wait until there is one")
    return lines


def _reflector(st: r.Status, now: float) -> list[str]:
    rf = st.reflector
    lines = []
    if rf.backend != "none":
        how = {"tools": " (tool calls)", "json_schema": " (JSON-schema output)",
               "auto": " (output mode found at the first reply)"}.get(rf.output or "", "")
        lines.append(f"reflector: {rf.backend} {rf.model}{how}; windows go to {rf.destination}")
    lines += [f"  {work} runs on {where}" for work, where in sorted(rf.routes.items())]
    b = st.batches
    items = b.items
    if b.in_flight or items.get("waiting"):
        lines.append(f"batches: {len(b.in_flight)} in flight, "
                     f"{plural(items.get('waiting', 0), 'item')} waiting, "
                     f"{items.get('done', 0)} done, {items.get('failed', 0)} failed; "
                     f"{plural(b.tokens, 'token')} (at the batch price: {b.tokens_at_batch_price} "
                     "standard-token equivalents)" + (f" — {b.waiting}" if b.waiting else ""))
    return lines


def _stores(st: r.Status, now: float) -> list[str]:
    sp = st.spool
    lost = (f"; LOST: {plural(sp.lost, 'event')} the hooks could neither deliver nor spool "
            "(a full disk?)" if sp.lost else "")
    p = st.persistence
    q = ", ".join(p.quarantined) or "none"
    lines = [f"spool: {sp.pending} pending, {sp.replayed} replayed{lost}",
             f"persistence: last snapshot {ago(p.last_snapshot_at, now)}; quarantined: {q}"]
    if p.failing:
        lines.append(f"PERSISTENCE FAILING since {ago(p.failing.since, now)}: "
                     f"{p.failing.reason}")
    return lines


def _library(st: r.Status, now: float) -> list[str]:
    lib = st.library
    by = ", ".join(f"{k} {v}" for k, v in sorted(lib.archived_by_reason.items()))
    lines = [f"library: {lib.probation} on probation, {lib.graduated} graduated, "
             f"{lib.hand_written} hand-written, {lib.archived} archived"
             + (f" ({by})" if by else "") + f"; {plural(lib.turns.user, 'turn')}"]
    if st.sync.configured:
        lines.append(format_info(st.sync))
    for lc in lib.checks:
        lines.append(f"check {lc.skill} [{lc.layer}]: {check_line(lc.check)}")
        lines += [f"  {a.project or '(no project)'}: {adherence_line(a)}"
                  for a in lc.check.adherence]
    fb = lib.feedback
    lines.append(f"evidence (verdicts on autoharness's skills, live and archived, each on its "
                 f"current version): {fb.helped} helped, {fb.ignored} ignored, {fb.harmful} "
                 f"harmful, {fb.missed} missed; {lib.verdicts_refused} verdicts refused; "
                 f"{lib.stale} live skills stale")
    return lines


def _sessions(st: r.Status, now: float) -> list[str]:
    if not st.sessions:
        return ["sessions: none active"]
    shown = len(st.sessions)
    total = max(st.sessions_total, st.sessions_offset + shown)
    more = "" if shown == total else (
        f" ({shown} of {total} shown, newest first from {st.sessions_offset + 1}; "
        "`autoharnessctl status --all` lists every one)")
    # CALLS: tool calls counted from hook events / from the transcript (none reported);
    # SUBAGENT: its subagents' calls, which are not activity
    # SEEN: of the bytes its windows spanned, the share sent as records (or a compaction
    # summary standing for them) / the share that reached the reflector only as the digest
    lines = [f"sessions:{more}",
             f"  {'SESSION':<38} {'ACTIVITY':>8} {'WATERMARK':>10} "
             f"{'CALLS HOOK/TRANSCRIPT':>21} {'SUBAGENT':>8} {'SEEN WINDOW/DIGEST':>18}"
             "  LAST EVENT"]
    for s in sorted(st.sessions, key=lambda s: -s.last_event_at):
        calls = f"{s.calls.hook}/{s.calls.transcript}"
        lines.append(f"  {s.session_id:<38} {s.activity:>8} {s.watermark:>10} {calls:>21} "
                     f"{s.subagent_calls:>8} {seen_share(s.seen):>18}  "
                     f"{ago(s.last_event_at, now)}")
    return lines
