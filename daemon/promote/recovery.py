"""Landing records, applied: the only code that changes the skill tree.

A landing record (in `pending/`, written before anything in the tree changes) names the
target, every file it writes or removes with the blob of its new and old bytes, and the
history entry to append. `complete` applies it: supporting files, evidence, `SKILL.md` (the
commit point), provenance; then the git commit (git mode), the history entry, and the record
removed. `rollback` puts back what a failed landing replaced. `recover` at start finishes (or,
when the tree no longer looks like ours, abandons) whatever a crash interrupted.
"""

import json
import os
import shutil

import msgspec

from ..persist import quarantine
from ..persist.dirs import write_private
from ..persist.files import fsync_dir
from . import fileops, gitmode, records, skilltree
from .observe import is_owned
from .plan import SKILL_MD, TMP_PREFIX
from .records import (
    ArchiveLanding,
    GitPlan,
    Landing,
    WriteLanding,
)
from .statedir import StateDir


class Recovered(msgspec.Struct, kw_only=True):
    landing: str
    intent_id: str | None
    target: str
    result: str  # completed | rolled_back | abandoned


def attach_git(sd: StateDir, rec: Landing) -> None:
    """A landing into a git-mode mirror carries the commit it is planned on and its
    message, so a crash between the mirror and the branch can finish the commit."""
    t = gitmode.target_of_root(os.path.dirname(rec.target))
    if t is None:
        return
    writes = rec.writes if isinstance(rec, WriteLanding) else []
    ev = next((sha for rel, sha, _ in writes if rel == rec.history.get("evidence")), None)
    evidence = sd.get_blob(ev).decode("utf-8", "replace") if ev else None
    rec.git = GitPlan(base=gitmode.mirrored_tip(t), message=gitmode.message(rec, evidence))


def complete(sd: StateDir, rec: Landing) -> None:
    """Apply the record to the tree (idempotent), record it in history and drop it."""
    if isinstance(rec, ArchiveLanding):
        _apply_archive(rec)
    else:
        _apply_writes(sd, rec)
    if rec.git is not None:  # the mirror holds the result: commit it to the review branch
        t = gitmode.target_of_root(os.path.dirname(rec.target))
        if t is None:
            raise OSError(f"git mode: no target recorded for {rec.target}")
        rec.history["commit"] = gitmode.commit_landing(rec, t, rec.git.message)
    sd.append_history(rec.history)
    sd.drop(rec)


def _apply_writes(sd: StateDir, rec: WriteLanding) -> None:
    root, name = os.path.split(rec.target)
    if not root_intact(rec):
        # Never recreate a deleted project, nor write through a re-pointed path.
        raise OSError(f"{root} is gone or no longer resolves to itself")
    os.makedirs(root, exist_ok=True)
    for rel, _gone in rec.removes:
        fileops.unlink_at(root, [name, *rel.split("/")])
    # In record order: supporting files, evidence, SKILL.md (the commit point), provenance.
    for rel, sha, _prev in rec.writes:
        data = sd.get_blob(sha)
        if skilltree.read_nofollow(rec.target, rel) != data:
            fileops.write_at(root, [name, *rel.split("/")], data)


def _apply_archive(rec: ArchiveLanding) -> None:
    target, dest = rec.target, rec.archive_to
    if not os.path.isdir(dest):
        tmp = os.path.join(os.path.dirname(dest), TMP_PREFIX + os.path.basename(dest))
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(os.path.join(tmp, "skill"), mode=0o700)
        for rel in fileops.all_files(target):
            data = skilltree.read_nofollow(target, rel)
            if data is not None:
                fileops.write_at(os.path.join(tmp, "skill"), rel.split("/"), data, create=True)
        meta = dict(rec.meta, path=dest)
        write_private(os.path.join(tmp, "meta.json"), json.dumps(meta, indent=1).encode())
        os.rename(tmp, dest)  # fails rather than overwrite: archives are never replaced
        fsync_dir(os.path.dirname(dest))
    root, name = os.path.split(target)
    if os.path.isdir(target) and not os.path.islink(target):
        fileops.unlink_at(root, [name, SKILL_MD])  # the commit point: gone from discovery
        shutil.rmtree(target)
        fsync_dir(root)


def rollback(sd: StateDir, rec: Landing) -> None:
    """Put back what a failed landing replaced, from the blobs it saved first."""
    target = rec.target
    if isinstance(rec, ArchiveLanding):
        dest = rec.archive_to
        if os.path.isdir(dest) and not os.path.exists(os.path.join(target, SKILL_MD)):
            raise OSError(f"archive of {target} is past its commit point: recover() ends it")
        shutil.rmtree(os.path.join(os.path.dirname(dest), TMP_PREFIX + os.path.basename(dest)),
                      ignore_errors=True)
        shutil.rmtree(dest, ignore_errors=True)
        return
    if not root_intact(rec):
        return  # the path now leads elsewhere: touch nothing through it
    if rec.created_dir:
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target)
        return
    root, name = os.path.split(target)
    restore = [(rel, prev) for rel, _new, prev in reversed(rec.writes)] + list(rec.removes)
    for rel, prev in restore:
        live = skilltree.read_nofollow(target, rel)
        if fileops.sha_or_none(live) == prev:
            continue  # never reached, or already put back: touch nothing
        parts = [name, *rel.split("/")]
        if prev is None:
            fileops.unlink_at(root, parts)
        else:
            fileops.write_at(root, parts, sd.get_blob(prev))


def root_intact(rec: Landing) -> bool:
    """The landing's layer root is where it was planned: its project (if any) still exists,
    and the skills dir (resolved when planned) still resolves to itself — no component on
    the way was deleted, or swapped for a symlink, since."""
    if rec.anchor is not None and not os.path.isdir(rec.anchor):
        return False
    root = os.path.dirname(rec.target)
    return os.path.realpath(root) == root


# -- at start ----------------------------------------------------------------------------------

def recover(sd: StateDir) -> list[Recovered]:
    """Finish or abandon landings a crash interrupted; sweep temp files. Call at start."""
    with sd.locked():
        recs = []
        for fn in sorted(os.listdir(sd.p("pending"))):
            path = sd.p("pending", fn)
            if fn.startswith(TMP_PREFIX):
                fileops.unlink(path)
                continue
            if not fn.endswith(".json"):
                continue  # set aside by an older version (`.failed`, `.corrupt`): never retried
            try:
                with open(path, "rb") as f:
                    rec = records.read_landing(f.read())
            except OSError:
                rec = None
            if rec is None or f"{rec.id}.json" != fn:
                quarantine.set_aside(path, why="not a landing record")  # never retried
                continue
            recs.append(rec)
        out = []
        for rec in recs:
            fileops.sweep_temps(rec.target)
            out.append(_recover_one(sd, rec))
        sd.sweep()
        return out


def _recover_one(sd: StateDir, rec: Landing) -> Recovered:
    def result(r):
        return Recovered(landing=rec.id, intent_id=rec.history.get("intent"),
                         target=rec.target, result=r)

    ours = _looks_like_ours(rec) if isinstance(rec, WriteLanding) else _archive_is_ours(sd, rec)
    if not ours:
        sd.drop(rec)
        return result("abandoned")
    try:
        complete(sd, rec)
        return result("completed")
    except OSError:
        try:
            rollback(sd, rec)
            sd.drop(rec)
            return result("rolled_back")
        except OSError:
            # never retried; kept for the operator where status and doctor show it
            quarantine.set_aside(sd.pending_path(rec),
                                 why="a landing that could neither finish nor roll back")
            return result("abandoned")


def _looks_like_ours(rec: WriteLanding) -> bool:
    # Every file we were changing is still either its old or its new self, and no
    # symlink was planted meanwhile; otherwise someone else has touched it since.
    target = rec.target
    if not root_intact(rec) or os.path.islink(target) or skilltree.scan_tree(target)[1]:
        return False
    for rel, new, prev in rec.writes:
        if fileops.sha_or_none(skilltree.read_nofollow(target, rel)) not in (new, prev):
            return False
    return True


def _archive_is_ours(sd: StateDir, rec: ArchiveLanding) -> bool:
    """Whether an interrupted archive may still remove what sits at its target.

    Before the archive copy exists, the skill must be the owned one the archive was
    planned on (same SKILL.md); once it exists, every file left at the target must be in
    the copy, so removing them loses nothing. Anything else is someone else's now."""
    target, dest = rec.target, rec.archive_to
    if not os.path.lexists(target):
        return os.path.isdir(dest)  # only the history entry is missing
    if (not root_intact(rec) or os.path.islink(target) or not os.path.isdir(target)
            or skilltree.scan_tree(target)[1]):
        return False
    if os.path.isdir(dest):
        copy = os.path.join(dest, "skill")
        return all(skilltree.read_nofollow(target, rel) == skilltree.read_nofollow(copy, rel)
                   for rel in fileops.all_files(target))
    md = skilltree.read_nofollow(target, SKILL_MD)
    return (md is not None and fileops.sha(md) == rec.history.get("previous")
            and is_owned(target, sd.path))
