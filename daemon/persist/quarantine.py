"""The one quarantine: a file that does not read as ours (a corrupt snapshot, a journal with a
torn line, an unreadable spool record, intent file, batch journal, learnings state or skill
history) is set aside here, never deleted and never fatal, so the damage stays inspectable.

The quarantine directory is the registry: `status` lists what it holds (and `doctor` reads the
status, or the directory when no daemon runs), whichever process set a file aside and whenever.
Moving a file out of the directory is how the operator says it has been dealt with.
"""

import os
import time

import structlog

from ...protocol import paths
from .dirs import ensure_private_dir

log = structlog.get_logger("autoharness")


def set_aside(path: str, *, copy: bool = False, why: str = "unreadable") -> str:
    """Move (or copy, when the file stays in use) `path` into the quarantine; return where it
    went. The name keeps the file's own name first; a second file of that name set aside in
    the same second gets a counter, never replaces the first."""
    qdir = paths.quarantine_dir()
    ensure_private_dir(qdir)
    base = os.path.join(qdir, f"{os.path.basename(path)}.{time.strftime('%Y%m%dT%H%M%S')}"
                              f".{os.getpid()}")
    dest, n = base, 0
    while os.path.lexists(dest):
        n += 1
        dest = f"{base}.{n}"
    if copy:
        with open(path, "rb") as src, open(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                                                   0o600), "wb") as dst:
            dst.write(src.read())
    else:
        os.replace(path, dest)
    log.warning("quarantined", file=dest, source=path, why=why)
    return dest


def files() -> list[str]:
    """Every file set aside (full paths, by name), as `status` shows them."""
    qdir = paths.quarantine_dir()
    try:
        names = os.listdir(qdir)
    except OSError:
        return []
    return [os.path.join(qdir, n) for n in sorted(names)]


# Where older versions set a corrupt file aside in place, beside the file it was: the batch
# journal, a project's learnings state, a skill's history, a pending landing record (and a
# landing that could neither finish nor roll back, `.json.failed`).
LEGACY_PLACES = ("", "learnings", os.path.join("promote", "history"),
                 os.path.join("promote", "pending"))


def adopt_legacy() -> list[str]:
    """Move the files older versions set aside in place (`*.json.corrupt*`, `*.json.failed`)
    into the quarantine, so that status and doctor show them too; return where they went. At
    start, before anything reads those directories."""
    out = []
    for place in LEGACY_PLACES:
        d = os.path.join(paths.state_dir(), place)
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for name in names:
            path = os.path.join(d, name)
            legacy = ".json.corrupt" in name or name.endswith(".json.failed")
            if legacy and os.path.isfile(path) and not os.path.islink(path):
                out.append(set_aside(path, why="set aside by an older version"))
    return out
