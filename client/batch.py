"""`autoharnessctl replay --batch` / `--cancel`: hand many transcripts to the daemon, which
reflects on them through Message Batches and lands the results like any job's."""

import datetime
import json
import os
import time

import msgspec

from ..protocol import messages as m
from ..protocol import paths
from ..protocol import replies as r
from .conn import ask
from .errors import CtlError


def collect(names: list[str], all_: bool, since: str | None) -> list[str]:
    """Transcript files: the files named, every *.jsonl under the directories named, and with
    `all_` every one under $CLAUDE_CONFIG_DIR/projects; `since` keeps those modified on or
    after that date."""
    roots = list(names) + ([paths.claude_projects_dir()] if all_ else [])
    out: list[str] = []
    for root in roots:
        if os.path.isdir(root):
            for here, dirs, files in os.walk(root):
                dirs.sort()
                out += [os.path.join(here, f) for f in sorted(files) if f.endswith(".jsonl")]
        elif os.path.isfile(root):
            out.append(root)
        else:
            raise FileNotFoundError(root)
    if since:
        cut = datetime.datetime.strptime(since, "%Y-%m-%d").timestamp()
        out = [p for p in out if os.stat(p).st_mtime >= cut]
    seen, uniq = set(), []
    for p in map(os.path.abspath, out):
        if p not in seen:
            seen.add(p)
            uniq.append(p)
    return uniq


def batch_replay(args) -> int:
    if args.cancel:
        canceled = ask(m.Batch(op="cancel"), r.BatchCanceled)
        print(f"canceled {canceled.batches} batch(es) in flight; dropped "
              f"{canceled.waiting_dropped} item(s) not yet sent (results that came back before "
              "the cancel still land)")
        return 0
    if not args.transcripts and not args.all:
        raise CtlError("name transcripts or directories, or pass --all", code=2,
                       verb="replay --batch")
    try:
        files = collect(args.transcripts, args.all, args.since)
    except FileNotFoundError as e:
        raise CtlError(f"no such transcript or directory: {e}", verb="replay") from None
    except ValueError:
        raise CtlError(f"--since {args.since!r}: use YYYY-MM-DD", code=2, verb="replay") from None
    project = os.path.abspath(args.project) if args.project else None
    out = ask(m.Batch(op="submit", transcripts=files, project=project), r.BatchSubmitted,
              timeout=600)
    print(f"{len(files)} transcript(s): {out.items} window(s) queued for Message Batches, "
          f"{out.skipped} already sent before" +
          (f", {out.reflected} already reflected (nothing new in them)" if out.reflected
           else "") +
          (f", {len(out.missing)} missing" if out.missing else ""))
    wait = args.wait or 0.0
    end = time.monotonic() + wait
    st = ask(m.Batch(op="status"), r.BatchesInfo)
    while wait and time.monotonic() < end:
        if not st.in_flight and not st.items.get("waiting"):
            break
        time.sleep(0.2)
        st = ask(m.Batch(op="status"), r.BatchesInfo)
    if args.json:
        print(json.dumps(msgspec.to_builtins(st), indent=2))
    else:
        print(f"batches in flight: {len(st.in_flight)}; items: " +
              ", ".join(f"{v} {k}" for k, v in st.items.items()) +
              "; see `autoharnessctl status` and `autoharnessctl queue list`")
        if st.waiting:
            print(f"waiting: {st.waiting}")
    return 0
