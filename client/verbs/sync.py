"""`autoharnessctl sync [init REMOTE | status]`: the user layer travels through a git remote.

`init` works on files (no daemon needed). A round goes through the daemon when it runs (it
counts the turns, so its counts travel too) and runs here when it does not (skills only).
"""

import json

import msgspec

from ...protocol import messages as m
from ...protocol import paths
from ...protocol import replies as r
from ...protocol.words import doc, findings_text, when
from ..conn import DaemonNotRunning, ask
from ..errors import CtlError

ROUND_TIMEOUT_S = 600.0
FIX_REMOTE = ("check that the remote exists and that `git ls-remote REMOTE` works in a shell "
              "(credentials, ssh keys, network), then run `autoharnessctl sync` again")


def read_info() -> r.SyncInfo:
    """The sync state as the last round left it (no daemon needed)."""
    try:
        with open(paths.sync_state_file(), "rb") as f:
            return msgspec.json.decode(f.read(), type=r.SyncInfo)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return r.SyncInfo()


def format_info(info: r.SyncInfo) -> str:
    if not info.configured:
        return "sync: not set up (`autoharnessctl sync init REMOTE` to share the user layer)"
    every = f"every {info.every_s:g}s" if info.every_s else "on `autoharnessctl sync` only"
    lines = [f"sync: {info.remote} (this machine: {info.machine}; rounds {every})",
             f"  last round {when(info.last_round_at, 'never')}, last good round "
             f"{when(info.last_good_at, 'never')}"]
    if info.last_error:
        lines.append(f"  FAILING ({info.failures} in a row): {info.last_error}")
        lines.append(f"  fix: {info.last_fix or FIX_REMOTE}")
    for label, names in (("took in", info.took), ("sent", info.pushed), ("merged", info.merged)):
        if names:
            lines.append(f"  {label}: {', '.join(names)}")
    for c in info.conflicts[-5:]:
        lines.append(f"  conflict {c.skill} ({when(c.at, 'never')}): machine {c.kept}'s version "
                     f"is live, machine {c.other}'s is in its history (`autoharnessctl skills history "
                     f"{c.skill}`, `skills revert {c.skill} --to N`)")
    for x in info.refused:
        lines.append(f"  refused {x.skill} from machine {x.machine}: {findings_text(x.findings)}")
    return "\n".join(lines)


def do_sync(args) -> int:
    if args.op not in OPS:
        raise CtlError(f"unknown OP {args.op!r}: one of {', '.join(OPS)}", code=2, verb="sync")
    return OPS[args.op](args)


def _status(args) -> int:
    _print_info(_ask(m.Sync(op="status")) or read_info(), args)
    return 0


def _round(args) -> int:
    """A round the remote failed is a negative answer (exit 1), printed like any round."""
    info = _ask(m.Sync(op="round")) or _offline_round()
    _print_info(info, args)
    return 1 if info.last_error else 0


def _print_info(info: r.SyncInfo, args) -> None:
    if args.json:
        print(json.dumps(msgspec.to_builtins(info), indent=2, sort_keys=True))
    else:
        print(format_info(info))


def _ask(req: m.Sync) -> r.SyncInfo | None:
    try:
        return ask(req, r.SyncInfo, timeout=ROUND_TIMEOUT_S)
    except DaemonNotRunning:
        return None


def _offline_round() -> r.SyncInfo:
    from ...daemon import offline

    try:
        return offline.sync_round()
    except ValueError as e:
        raise CtlError(str(e), verb="sync") from None


def _init(args) -> int:
    from ...daemon import offline

    if not args.remote:
        raise CtlError("name the git remote to sync through (a URL, an ssh path, or a local "
                       "bare repository)", code=2, verb="sync init")
    try:
        info = offline.sync_init(args.remote)
    except ValueError as e:
        raise CtlError(f"{e}\n  fix: {FIX_REMOTE}", verb="sync init") from None
    print(f"sync set up: {info.remote} (this machine is {info.machine}). Run "
          "`autoharnessctl sync` for a round; set `sync.every_s` in the config to let the "
          f"daemon run them. What travels: {doc('privacy.md#sync-the-user-layer-across-machines')}")
    return 0


OPS = {"round": _round, "init": _init, "status": _status}


def add_parser(sub) -> None:
    s = sub.add_parser("sync", help="share the user layer's learned skills across your "
                       "machines through a git remote",
                       description="Share autoharness's user-layer skills, their history and "
                       "their counts through a git remote of yours. `sync init REMOTE` sets it "
                       "up; `sync` runs one round (fetch, take in what other machines landed, "
                       "send what this one did); `sync status` shows the last rounds. "
                       "Hand-written skills never leave this machine.")
    s.add_argument("op", nargs="?", default="round", metavar="OP",
                   help="round (default): one round now; init REMOTE: set up; "
                   "status: the last rounds, conflicts and refusals")
    s.add_argument("remote", nargs="?", metavar="REMOTE",
                   help="init: a git remote (URL, ssh path, or a local bare repository)")
    s.add_argument("--json", action="store_true", help="print JSON instead of text")
    s.set_defaults(func=do_sync)
