"""`autoharnessctl curate`: run the curator now (merge near-duplicate skills, archive obsolete
ones, as proposals the promoter checks); `--dry-run` says what it would do."""

from __future__ import annotations

import os

from ...protocol import messages as m
from ...protocol import replies as r
from ...protocol.words import plural
from ..conn import call, typed
from ..errors import CtlError
from .common import JSON_HELP, print_json


def add_parser(sub) -> None:
    s = sub.add_parser("curate", help="run the curator now: merge near-duplicate skills and "
                       "archive obsolete ones (as proposals the promoter checks)")
    s.add_argument("--layer", choices=("project", "user"), help="default: both")
    s.add_argument("--project", metavar="DIR", help="project directory (default: cwd)")
    s.add_argument("--dry-run", action="store_true",
                   help="say what a lifecycle pass (archives and why) and a curator run "
                   "(repairs, stale skills) would do now; change nothing")
    s.add_argument("--json", action="store_true", help=JSON_HELP)
    s.set_defaults(func=do_curate)


def do_curate(args) -> int:
    project = os.path.abspath(args.project) if args.project else os.getcwd()
    if not os.path.isdir(project):
        raise CtlError(f"no such project directory: {project} (pass an existing one with "
                       "--project DIR)", code=2, verb="curate")
    req = m.Curate(layer=args.layer, project=project, dry_run=args.dry_run)
    data = call(req)
    if args.json:
        print_json(data)
        return 0
    if args.dry_run:
        plan = typed(data, r.CuratePlan, req)
        for a in plan.archives:
            print(f"would archive {a.name} [{a.layer}] ({a.why})")
        if plan.held_back:
            print(f"{plan.held_back} more archives are due but over one pass's share of a layer "
                  "(library.max_archive_share): later passes take them")
        for name in plan.repairs:
            print(f"would ask the curator to repair the description of {name} (missed)")
        for name, missing in sorted(plan.stale.items()):
            print(f"would send stale {name} to the curator: names missing {', '.join(missing)}")
        shown = [f"{plural(n, 'skill')} of the {layer} layer"
                 for layer, n in sorted(plan.curator_skills.items()) if n]
        print(f"a curator run would look at {' and '.join(shown) or 'no skills'}; nothing "
              "was done")
        return 0
    out = typed(data, r.CuratorQueued, req)
    for job in out.jobs:
        where = f" for {job.project}" if job.project else ""
        print(f"queued curator job {job.id} ({job.layer} layer{where}); "
              "see `autoharnessctl queue list` once it has run")
    if not out.jobs:
        print("a curator job for these layers is already waiting")
    return 0
