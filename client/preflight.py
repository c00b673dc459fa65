"""Checks a command that changes several things runs before it changes any: each returns why
it could not finish ("" when it can), so the command stops with that reason and writes
nothing, instead of failing half-way."""

from __future__ import annotations

import os

from ..protocol import paths, private
from .files import private_dir


def writable_problem(d: str) -> str:
    """"" when a file can be created in the existing directory `d`, else the system's reason
    (read-only filesystem, permissions). Tried for real: root passes every permission check
    but not a read-only mount."""
    probe = os.path.join(d, f".autoharness-probe-{os.getpid()}")
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as e:
        return e.strerror or str(e)
    os.close(fd)
    os.unlink(probe)
    return ""


def _probe(d: str) -> str:
    why = writable_problem(d)
    return f"{d} is not writable ({why})" if why else ""


def dir_problem(d: str) -> str:
    """Why a file cannot be written into the directory `d` (made when missing): something not a
    directory on the way, or the nearest existing directory not writable."""
    why = private.unusable_dir(d)
    if why:
        return why
    existing = os.path.abspath(d)
    while not os.path.isdir(existing):
        existing = os.path.dirname(existing)
    return _probe(existing)


def state_problem(sub: str) -> str:
    """Why the state directory cannot hold `sub` (a private dir of it, made now when missing:
    it is autoharness's own, so making it changes nothing of the user's)."""
    state = paths.state_dir()
    why = private.unusable_dir(sub)
    if not why:
        try:
            private_dir(sub)  # checks each dir from the state dir down, before making any
            why = _probe(sub)
        except private.NotPrivate as e:
            why = str(e.unsafe)
        except OSError as e:
            why = f"cannot make {e.filename or sub}: {e.strerror}"
    if why:
        return (f"autoharness's state directory {state} cannot be used ({why}); "
                "`autoharnessctl doctor` checks it")
    return ""


def start_problem() -> str:
    """Why a daemon started now would not run: an invalid config (it refuses to start on one)
    or a state directory it cannot use. `restart` asks before it stops the running one."""
    from ..protocol.config import ConfigError, load

    try:
        load(paths.config_file())
    except ConfigError as e:
        return f"the config is invalid: {e}"
    why = private.unusable_dir(paths.state_dir())
    return f"the state directory cannot be used: {why}" if why else ""
