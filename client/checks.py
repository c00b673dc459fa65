"""The checks `autoharnessctl doctor` runs on the daemon, its directories, config and backend.

Each check is a plain function of plain inputs (the daemon's typed status or None, paths, an
environment) returning a `Check`; the doctor verb (client/verbs/doctor.py) gathers the inputs
once and runs them. The daemon's own view (its status) wins over what this process can see,
because the daemon may run with another environment. A daemon whose status this client cannot
read (another version) is a `Foreign` answer: the version check names both versions and the
restart, the checks that need its status skip. The checks of the hooks and slash commands
wired into Claude Code are in client/setup_checks.py.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from ..protocol import PROTOCOL, VERSION, private, spool
from ..protocol import replies as r
from ..protocol.words import plural
from .conn import START_HINT, start_hint
from .preflight import writable_problem
from .verbs.sync import FIX_REMOTE

MIN_FREE_BYTES = 100 * 1024 * 1024
RESTART_HINT = ("restart it: `autoharnessctl restart` (`service stop`, then `service "
                "start` under a service manager), or let the next hook start it")


@dataclass
class Check:
    """One check's verdict. A `warning` passes (doctor still exits 0) but shows its fix."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False


class Foreign(NamedTuple):
    """A daemon answered `status` in a shape this client does not read (another version):
    its head (which daemon, where) and what did not decode."""

    head: r.Identity
    error: str


def read_status(data: object) -> r.Status | Foreign:
    """The status reply's data as this client's `Status`, or, when it does not decode, as a
    `Foreign` answer with whatever head it has (empty when even that is unreadable)."""
    try:
        return r.decode(data, r.Status)
    except r.ReplyMismatch as e:
        error = str(e)
    try:
        head = r.decode(data, r.Identity)
    except r.ReplyMismatch:
        head = r.Identity()
    return Foreign(head, error)


# Checks that read the daemon's status, or (without one) presume no daemon runs: they skip
# when it answers in another version's shape.
NEEDS_STATUS = frozenset({"spool", "persistence", "jobs", "delivery"})
UNREACHABLE = "not checked: the daemon is not reachable"
UNREADABLE = "not checked: the daemon's status is of another version (see the version check)"


def skipped(name: str, why: str = UNREACHABLE) -> Check:
    return Check(name, True, why)


# ---- the checks -----------------------------------------------------------------------------


LOG_TAIL_BYTES = 64 * 1024


def last_log_error(log_file: str) -> str:
    """The daemon log's most recent error, in one line ("" when there is none).

    The log holds JSON records from the running daemon and plain `autoharnessd: ...` lines from
    a start that was refused (those already carry their fix)."""
    try:
        with open(log_file, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - LOG_TAIL_BYTES))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("autoharnessd: "):
            return line[len("autoharnessd: "):]
        if not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("level") in ("error", "critical", "exception"):
            extra = ", ".join(f"{k}={v}" for k, v in rec.items()
                              if k not in ("event", "level", "timestamp", "exception"))
            return f"{rec.get('event')}" + (f" ({extra})" if extra else "")
    return ""


def check_daemon(status: r.Status | Foreign | None, error: str | None,
                 log_file: str | None = None, tries_file: str | None = None,
                 now: float | None = None) -> Check:
    if status is None:
        hint = start_hint()  # START_HINT, or what keeps the daemon from starting
        detail = (error or "not reachable").replace(f": {hint}", "")
        if hint == START_HINT:
            fix = ("start it: `autoharnessctl start` (in the background), `autoharnessctl "
                   "service start` (as a service) or `autoharnessd` (foreground); hooks also "
                   "start it on their own unless autostart is off")
        else:
            detail += f"; {hint}"
            fix = hint.removeprefix("it cannot start: ")  # the blocker, with its own fix
        last = last_log_error(log_file) if log_file else ""
        if last:
            detail += f"; last error in {log_file}: {last}"
            fix = f"fix what that error says, then {fix}"
        detail += _autostart_note(tries_file, time.time() if now is None else now)
        return Check("daemon", False, detail, fix)
    if isinstance(status, Foreign):
        return Check("daemon", True, f"running, pid {status.head.pid}, "
                     f"socket {status.head.socket}")
    return Check("daemon", True, f"running, pid {status.pid}, "
                 f"up {status.uptime_s:.0f}s, socket {status.socket}")


def _autostart_note(tries_file: str | None, now: float) -> str:
    """The hooks' autostart back-off, in words ("" when no spawn is outstanding)."""
    from . import hook

    tries, last = hook.autostart_tries(tries_file) if tries_file else (0, 0.0)
    if not tries:
        return ""
    left = last + hook.autostart_wait(tries) - now
    when = f"the next hook tries again in {left:.0f}s" if left > 0 else "the next hook tries again"
    return (f"; the hooks started it {plural(tries, 'time')} without it coming up (the last "
            f"{max(0.0, now - last):.0f}s ago), so they back off: {when}")


def check_version(status: r.Status | Foreign | None, version: str = VERSION,
                  protocol: int = PROTOCOL) -> Check:
    if status is None:
        return skipped("version")
    if isinstance(status, Foreign):
        theirs = status.head.version or "of an unknown version"
        return Check("version", False, f"daemon {theirs} (protocol {status.head.protocol}) "
                     f"answers `status` in a shape this client {version} (protocol {protocol}) "
                     f"does not read ({status.error})", "the daemon runs another installation: "
                     "restart it with `autoharnessctl restart` "
                     "(`autoharnessctl service start` under a service manager)")
    dv, dp = status.version, status.protocol
    if dv == version and dp == protocol:
        return Check("version", True, f"daemon and client {version}, protocol {protocol}")
    return Check("version", False, f"daemon {dv} (protocol {dp}) differs from this client "
                 f"{version} (protocol {protocol})", f"the daemon runs another installation: "
                 f"{RESTART_HINT}")


def check_socket(sock_path: str, uid: int | None = None, lstat=os.lstat) -> Check:
    uid = os.getuid() if uid is None else uid
    d = os.path.dirname(sock_path)
    try:
        bad = private.private_problem(d, uid=uid, lstat=lstat, fixes={
            "not_dir": f"move it away (`mv {d} {d}.old`) and restart the daemon",
            "not_owner": f"remove it (`sudo rm -r {d}`) and restart the daemon"})
    except FileNotFoundError:
        return Check("socket", True, f"no socket directory yet ({d}): the daemon creates it")
    except OSError as e:  # a file where a directory on the way should be
        blocker = _file_on_the_way(d)
        return Check("socket", False, f"cannot reach {d}: {e.strerror}"
                     + (f" ({blocker} is a file)" if blocker else ""),
                     f"move it away (`mv {blocker} {blocker}.old`) and restart the daemon"
                     if blocker else "check that path, then restart the daemon")
    if bad:
        return Check("socket", False, bad.what, bad.fix)
    try:
        bad = private.private_problem(sock_path, socket=True, uid=uid, lstat=lstat, fixes={
            "not_socket": f"move it away (`mv {sock_path} {sock_path}.old`) and restart the daemon",
            "not_owner": f"stop that daemon, remove the socket (`sudo rm {sock_path}`), "
                         "restart yours"})
    except FileNotFoundError:
        return Check("socket", True, f"{d} is private (700); no socket in it (daemon not running)")
    if bad:
        return Check("socket", False, bad.what, bad.fix)
    return Check("socket", True, f"{sock_path}: socket 600 in a 700 directory, yours")


def _file_on_the_way(path: str) -> str:
    """The first existing component of `path` that is not a directory ("" when none is)."""
    parts = os.path.abspath(path).split(os.sep)
    for i in range(2, len(parts) + 1):
        p = os.sep.join(parts[:i])
        try:
            st = os.stat(p)
        except OSError:
            return ""
        if not stat.S_ISDIR(st.st_mode):
            return p
    return ""


def check_state(state_dir: str, uid: int | None = None, writable=writable_problem) -> Check:
    """The state directory can hold the daemon's files: a private, writable directory.
    The daemon refuses to start otherwise, and its refusal is only in its log."""
    uid = os.getuid() if uid is None else uid
    move = ("or keep autoharness's files elsewhere: AUTOHARNESS_HOME=DIR for the hooks, the "
            "daemon and the CLI")
    blocker = _file_on_the_way(state_dir)
    if blocker:
        what = private.unusable_dir(state_dir).split(" where a directory belongs")[0]
        return Check("state", False, f"{what or blocker + ' is a file'}, so the state directory "
                     f"{state_dir} cannot exist; the daemon cannot start",
                     f"move it away (`mv {blocker} {blocker}.old`), {move}")
    try:
        bad = private.private_problem(state_dir, uid=uid, fixes={
            "not_dir": f"move it away (`mv {state_dir} {state_dir}.old`), {move}",
            # another user's: never take it over (what they planted inside would stay)
            "not_owner": f"do not take it over: remove it (`sudo rm -r {state_dir}`), {move}"})
    except FileNotFoundError:
        return Check("state", True, f"{state_dir} does not exist yet: the daemon creates it")
    except OSError as e:
        return Check("state", False, f"cannot read {state_dir}: {e.strerror}",
                     f"check the permissions on the way to it, {move}")
    if bad:
        return Check("state", False, bad.what + ("; the daemon refuses to start"
                                                 if bad.kind == "open" else ""), bad.fix)
    locked = private.unusable_dir(state_dir)
    if locked:  # mode 000: private, but not even its owner can use it
        what, _, fix = locked.partition(": its owner (you) cannot list or write it: ")
        return Check("state", False, f"{what}: you cannot list or write it, so the daemon "
                     "cannot start", fix or locked)
    why = writable(state_dir)
    if why:
        return Check("state", False, f"{state_dir} is not writable ({why}); the daemon cannot "
                     "keep its state", f"make it writable (remount, or `chmod u+w {state_dir}`), "
                     f"{move}")
    return Check("state", True, f"{state_dir}: private (700) and writable")


def check_config(config_file: str, error: str | None, fix: str = "") -> Check:
    """The same validation the daemon runs at start; `fix` is the error's own (the key's file
    line or variable, what it accepts)."""
    if error:
        return Check("config", False, error, (fix or f"fix it in {config_file}")
                     + "; the daemon refuses to start until it is valid")
    exposed = _key_open_to_others(config_file)
    if exposed:
        return Check("config", False, f"{config_file} holds reflector.api_key and {exposed}: "
                     "anyone on this machine can read the key",
                     f"`chmod 600 {config_file}` (or move the key to ANTHROPIC_API_KEY in the "
                     "daemon's environment)")
    where = config_file if os.path.exists(config_file) else f"defaults ({config_file} absent)"
    return Check("config", True, where)


def _key_open_to_others(config_file: str) -> str:
    """How the config file that holds an API key is open to others ("" when it is not, or
    holds none): readable by its group or by everyone."""
    import tomllib

    try:
        st = os.stat(config_file)
        with open(config_file, "rb") as f:
            data = tomllib.load(f)
    except (OSError, ValueError):
        return ""
    reflector = data.get("reflector")
    if not (isinstance(reflector, dict) and reflector.get("api_key")):
        return ""
    mode = stat.S_IMODE(st.st_mode)
    if not mode & 0o044:
        return ""
    who = "everyone" if mode & 0o004 else "its group"
    return f"is readable by {who} (mode {mode:03o})"


def check_project(project: str) -> Check:
    """The project's off switch (`.claude/autoharness.toml`) is well formed; the daemon takes
    a malformed one as off, so it is a failure with the exact fix."""
    from ..daemon.offline import project_switch

    enabled, problem, path = project_switch(project)
    if problem:
        return Check("project", False, problem + ("" if enabled else
                                                  f"; autoharness counts nothing in {project}"),
                     f"correct {path} (`enabled = false` turns the project off, `enabled = "
                     "true` on; `[promoter]` takes `mode` and `git_branch`), or remove it")
    if not enabled:
        return Check("project", True, f"off in {project} (`enabled = false` in {path})")
    return Check("project", True, f"on in {project}" + (f" (`enabled = true` in {path})"
                                                        if os.path.exists(path) else ""))


def _local_reflector(cfg, env: Mapping[str, str]) -> tuple[str, str]:
    """(backend, reason) from this process's view, when the daemon cannot tell us."""
    from ..daemon import offline

    info = offline.reflector_available(cfg, env)
    return info["backend"], info.get("reason") or ""


def check_reflector(status: r.Status | None, cfg, env: Mapping[str, str],
                    config_file: str) -> Check:
    """Reflection needs a backend: an API key, or `claude` on PATH."""
    fix = (f"set reflector.api_key in {config_file} (a daemon a hook autostarts never sees "
           "ANTHROPIC_API_KEY; one you start does), or install Claude Code so `claude` is on "
           "the daemon's PATH; check reflector.backend is `auto`")
    info = status.reflector if status is not None and status.reflector.backend else None
    if info is not None:
        backend, reason, who = info.backend, info.reason or "", "daemon"
    else:
        backend, reason = _local_reflector(cfg, env)
        who = "this environment"
    if backend in ("none", "", None):
        return Check("reflector", False, f"{reason or 'no reflector backend'} ({who}); jobs "
                     "wait until one is available", fix)
    model = info.model if info is not None else getattr(cfg, "model", "")
    suffix = f", model {model}" if model else ""
    return Check("reflector", True, f"{backend} backend ({who}){suffix}")


def check_spool(status: r.Status | None, spool_dir: str, state_dir: str | None = None) -> Check:
    lost = status.spool.lost if status is not None else len(spool.lost(state_dir or ""))
    if lost:  # a warning: the loss is past, and said once the disk has room again
        since = ("since the daemon started (its log says when)" if status is not None
                 else "and not yet counted by a daemon")
        return Check("spool", True, f"{plural(lost, 'hook event')} lost {since}: the hooks "
                     "could neither deliver nor spool them (was the disk full?)",
                     "keep free space where the state directory is (`df -h`); lost events "
                     "cannot be recovered", warning=True)
    n = status.spool.pending if status is not None else spool.count(spool_dir)
    if not n:
        return Check("spool", True, "empty")
    if status is not None:
        return Check("spool", False, f"{plural(n, 'event')} waiting in {spool_dir}; a "
                     "healthy daemon replays them within seconds", f"if they stay, {RESTART_HINT}")
    return Check("spool", False, f"{plural(n, 'event')} spooled in {spool_dir} while the "
                 "daemon was down", f"{START_HINT[0].upper()}{START_HINT[1:]}: it replays them first")


def check_quarantine(status: r.Status | None, quarantine_dir: str) -> Check:
    if status is not None:
        files = list(status.persistence.quarantined)
    else:
        try:
            files = sorted(os.listdir(quarantine_dir))
        except OSError:
            files = []
    if not files:
        return Check("quarantine", True, "no corrupt files set aside")
    shown = ", ".join(os.path.basename(f) for f in files[:3]) + (" ..." if len(files) > 3 else "")
    return Check("quarantine", False, f"{plural(len(files), 'corrupt file')} set aside in "
                 f"{quarantine_dir}: {shown}", f"inspect them in {quarantine_dir} (autoharness "
                 "already runs without them), then move them out of that directory")


def check_persistence(status: r.Status | None, now: float | None = None) -> Check:
    """The daemon's state writes succeed (a read-only or full state dir fails this)."""
    if status is None:
        return skipped("persistence")
    failing = status.persistence.failing
    if not failing:
        return Check("persistence", True, "the daemon's snapshot and journal writes succeed")
    age = max(0.0, (time.time() if now is None else now) - failing.since)
    return Check("persistence", False, f"the daemon cannot save its state for {age:.0f}s: "
                 f"{failing.reason}",
                 "fix that (free space, make the state dir writable, move the odd file away); "
                 "the daemon retries on its own and this check passes once a save succeeds")


def check_jobs(status: r.Status | None) -> Check:
    if status is None:
        return skipped("jobs")
    jobs = status.jobs
    pending = jobs.pending
    waiting = jobs.waiting or ""
    if not waiting and status.reflector.backend == "none":
        waiting = status.reflector.reason or "no reflector backend"
    if pending and waiting:
        return Check("jobs", False, f"{plural(pending, 'job')} pending and none can start: "
                     f"{waiting}", "see the reflector check's fix, then restart the daemon "
                     "(`autoharnessctl restart`)")
    # recent failures only: the lifetime counter would keep doctor failing forever
    failed = jobs.failed_24h
    if not failed:
        return Check("jobs", True, f"{jobs.done} done, {pending} "
                     "pending, none failed in the last 24 h")
    err = jobs.last_error.error if jobs.last_error else ""
    return Check("jobs", False, f"{plural(failed, 'reflection job')} failed in the last 24 h"
                 + (f" (last: {err})" if err else ""),
                 "see why in `autoharnessctl status --json` (jobs), fix the backend (key, "
                 "network, budget); queue a session again with `autoharnessctl flush SESSION_ID`")


def check_disk(state_dir: str, min_free: int = MIN_FREE_BYTES, usage=shutil.disk_usage,
               statvfs=os.statvfs) -> Check:
    d = state_dir
    while not os.path.isdir(d) and os.path.dirname(d) != d:
        d = os.path.dirname(d)
    try:
        if statvfs(d).f_flag & os.ST_RDONLY:
            return Check("disk", False, f"{d} is on a read-only filesystem: autoharness cannot "
                         "write its state", "remount it read-write, or keep autoharness's files "
                         "elsewhere with AUTOHARNESS_HOME=DIR")
        free = usage(d).free
    except OSError as e:
        return Check("disk", False, f"cannot stat {d}: {e.strerror}", f"check that {d} exists")
    mb = free // (1024 * 1024)
    if free < min_free:
        return Check("disk", False, f"{mb} MB free for {state_dir} (need {min_free // 2**20} MB)",
                     "free space on that filesystem, or move autoharness's files with "
                     "AUTOHARNESS_HOME=DIR")
    return Check("disk", True, f"{mb} MB free for {state_dir}")


def check_delivery(status: r.Status | None) -> Check:
    """Each hook event arrives once: a session heard through both the plugin's hooks (an
    enabled plugin, or `claude --plugin-dir`, which no settings file shows) and the settings
    install had every hook run twice."""
    if status is None:
        return skipped("delivery")
    d = status.delivery
    if not d.both:
        return Check("delivery", True, "each session's events arrive through one install")
    return Check("delivery", False,
                 f"{plural(d.both, 'session')} in the last day had every hook event delivered "
                 f"twice, by the plugin's hooks and by the settings install (the latest: "
                 f"{d.last_session}); each call is counted once, but every tool call starts "
                 "two hooks",
                 "keep one: `autoharnessctl install --remove` (the plugin's hooks stay), or "
                 "drop `--plugin-dir` from the `claude` command line (or disable the plugin "
                 "with /plugin)")


def check_sync(status: r.Status | None, offline: Callable[[], r.SyncInfo],
               now: float | None = None) -> Check:
    """The user layer's sync rounds, when set up: the last one completed."""
    info = status.sync if status is not None and status.sync.configured else offline()
    if not info.configured:
        return Check("sync", True, "not set up (optional: `autoharnessctl sync init REMOTE`)")
    if not info.last_error:
        when = "no round yet" if not info.last_round_at else \
            f"last round {max(0.0, (now or time.time()) - info.last_round_at):.0f}s ago"
        return Check("sync", True, f"{info.remote}: {when}")
    good = (f"last good round {max(0.0, (now or time.time()) - info.last_good_at):.0f}s ago"
            if info.last_good_at else "no round has completed yet")
    return Check("sync", False, f"{info.remote}: the last {plural(info.failures, 'round')} "
                 f"failed: {info.last_error} ({good}); the library is as it was",
                 info.last_fix or FIX_REMOTE)
