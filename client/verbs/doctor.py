"""`autoharnessctl doctor [--json]`: check an installation and say how to fix what is wrong.

The runner: it gathers the inputs once (the daemon's status, the config, the settings files),
runs every check of client/checks.py and client/setup_checks.py, and prints them. A check that
raises fails alone, with what it hit: doctor itself never crashes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict
from functools import partial

from ...protocol import messages as m
from ...protocol import paths, trust
from ...protocol import replies as r
from ...protocol.words import printable
from .. import settings
from ..checks import (
    NEEDS_STATUS,
    UNREADABLE,
    Check,
    Foreign,
    check_config,
    check_daemon,
    check_delivery,
    check_disk,
    check_jobs,
    check_persistence,
    check_project,
    check_quarantine,
    check_reflector,
    check_socket,
    check_spool,
    check_state,
    check_sync,
    check_version,
    read_status,
    skipped,
)
from ..conn import DaemonError, DaemonUnreachable, call
from ..files import worktree_top
from ..listing import check_listing
from ..settings_check import check_settings
from ..setup_checks import check_commands, check_duplicates, check_hooks
from .sync import read_info as sync_info


def add_parser(sub) -> None:
    s = sub.add_parser("doctor", help="check the installation and say how to fix what is wrong",
                       description="Check the daemon, socket, hooks, slash commands, config, "
                       "reflector backend, spool, quarantine, jobs and disk space; each failure "
                       "comes with its fix. Exit 0 when all pass, 1 otherwise.")
    s.add_argument("--json", action="store_true",
                   help='print {"ok": bool, "checks": [{name, ok, detail, fix}]}')
    s.add_argument("--project", metavar="DIR",
                   help="project whose .claude/settings.json to check too (default: the git "
                   "worktree of the current directory)")
    s.set_defaults(func=do_doctor)


def gather(project: str | None, env: Mapping[str, str] | None = None) -> list[Check]:
    env = os.environ if env is None else env
    answer: r.Status | Foreign | None = None
    error = None
    try:
        answer = read_status(call(m.Status(), timeout=5))
    except (DaemonUnreachable, DaemonError) as e:
        error = str(e)
    status = answer if isinstance(answer, r.Status) else None
    cfg_file = paths.config_file()
    cfg, cfg_error, cfg_fix = None, None, ""
    cfg_sources: dict[str, str] = {}
    try:
        from ...protocol.config import ConfigError, load

        cfg = load(cfg_file, dict(env), cfg_sources)
    except ConfigError as e:
        cfg_error, cfg_fix = e.what, e.fix
    if cfg is None:
        from ...protocol.config import Config

        cfg = Config()
    sources = settings.settings_sources(project)
    plugin = any(s.data is not None and settings.enabled_plugin(s.data) for s in sources)
    command_dirs = [paths.user_commands_dir()]
    if project:
        command_dirs.append(paths.project_commands_dir(project))
    checks: list[tuple[str, Callable[[], Check]]] = [
        ("daemon", lambda: check_daemon(answer, error, paths.log_file(),
                                        paths.autostart_tries_file())),
        ("version", lambda: check_version(answer)),
        ("state", lambda: check_state(paths.state_dir())),
        ("socket", lambda: check_socket(paths.socket_path())),
        ("config", lambda: check_config(cfg_file, cfg_error, cfg_fix)),
        ("settings", lambda: check_settings(cfg, cfg_sources, status,
                                            trust.untrusted_location(env, os.getcwd()))),
        ("hooks", lambda: check_hooks(sources, env)),
        ("duplicates", lambda: check_duplicates(sources)),
        ("delivery", lambda: check_delivery(status)),
        ("commands", lambda: check_commands(command_dirs, plugin, env)),
        ("reflector", lambda: check_reflector(status, cfg.reflector, env, cfg_file)),
        ("spool", lambda: check_spool(status, paths.spool_dir(), paths.state_dir())),
        ("quarantine", lambda: check_quarantine(status, paths.quarantine_dir())),
        ("persistence", lambda: check_persistence(status)),
        ("jobs", lambda: check_jobs(status)),
        ("disk", lambda: check_disk(paths.state_dir())),
        ("sync", lambda: check_sync(status, sync_info)),
        ("listing", lambda: check_listing(project, cfg)),
    ]
    if project:
        checks.append(("project", lambda: check_project(project)))
    if isinstance(answer, Foreign):
        checks = [(name, partial(skipped, name, UNREADABLE) if name in NEEDS_STATUS else fn)
                  for name, fn in checks]
    return [_guarded(name, fn) for name, fn in checks]


def _guarded(name: str, fn) -> Check:
    """One check that raises fails alone, with what it hit: doctor itself never crashes."""
    try:
        return fn()
    except Exception as e:
        what = f"{e.strerror}: {e.filename}" if isinstance(e, OSError) and e.strerror else e
        return Check(name, False, f"could not check ({type(e).__name__}: {what})",
                     "see the other checks (state, socket) for the path at fault")


def format_human(checks: list[Check]) -> str:
    lines = []
    for c in checks:
        label = "FAIL" if not c.ok else "warn" if c.warning else "ok"
        lines.append(f"{label:<5} {c.name}: {printable(c.detail)}")
        if (not c.ok or c.warning) and c.fix:
            lines.append(f"      fix: {printable(c.fix)}")
    bad = sum(not c.ok for c in checks)
    lines.append("all checks passed" if not bad else f"{bad} of {len(checks)} checks failed")
    return "\n".join(lines)


def do_doctor(args) -> int:
    project = (os.path.abspath(args.project) if args.project
               else worktree_top(os.getcwd()))
    checks = gather(project)
    ok = all(c.ok for c in checks)
    if args.json:
        print(json.dumps({"ok": ok, "checks": [asdict(c) for c in checks]}, indent=2))
    else:
        print(format_human(checks))
    return 0 if ok else 1
