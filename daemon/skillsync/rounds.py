"""One sync round of the user layer: fetch, decide per skill, push, then take in.

Layout of the sync repository (nothing else of the machine is ever written there):

    skills/<name>/...            a live autoharness skill: SKILL.md, its supporting files, and
                                 .autoharness/ (provenance without local paths, evidence quotes,
                                 origin.json: which machine made this version, and when)
    archived/<name>/...          the same for an archived skill
    counts/<machine>.json        that machine's uses and turns per skill (one writer per file:
                                 counts never conflict; the lifecycle sums them)

A skill's history travels twice: its provenance lists every landing (when, which machine, why),
and the repository's own log holds every version it was sent in.

Order of a round, and why it survives kill -9 at any instant: everything this machine sends is
committed on top of the fetched tip and pushed *before* anything is taken in, so a refused or
unreachable remote leaves the library as it was; each take-in is an ordinary promoter landing
(journaled, recovered at start); the base (the commit both sides agreed on) is saved last. An
interrupted round is simply run again: its unpushed commit is dropped and made anew, a pushed
one is found on the remote (nothing to commit twice), and what was taken in compares equal.
Two rounds never run at once: a flock on the sync dir, taken without waiting.
"""

import json
import os
import secrets
import shutil
import time
from collections.abc import Callable

import msgspec

from ...protocol import paths
from ...protocol.config import SyncConfig
from ...protocol.replies import Finding, SyncConflict, SyncInfo, SyncRefusal
from ..persist.dirs import flocked
from ..persist.files import write_atomic
from ..promote import validate
from ..promote.land import Promoter
from ..promote.plan import PROVENANCE, PROVENANCE_DIR, SKILL_MD
from ..proposals import VERDICTS
from . import gitrepo, library
from .gitrepo import GitError
from .model import ARCHIVED, LIVE, Copy, decide

ORIGIN = f"{PROVENANCE_DIR}/origin.json"
PUSH_ATTEMPTS = 3
MAX_CONFLICTS = 20
BACKOFF_MAX_S = 6 * 3600.0
# what each machine counts per skill: its uses, its turns and the verdicts it accepted
COUNTED = ("uses", "turns", *VERDICTS)


class NotSetUp(Exception):
    """No sync repository yet: `autoharnessctl sync init REMOTE`."""


class Busy(Exception):
    """Another round is running (the daemon's or another `autoharnessctl sync`)."""


def repo_dir() -> str:
    return os.path.join(paths.sync_dir(), "repo")


def load() -> SyncInfo:
    """The sync state as the last round left it; `configured` is False when there is none."""
    try:
        with open(paths.sync_state_file(), "rb") as f:
            return msgspec.json.decode(f.read(), type=SyncInfo)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return SyncInfo()


def _base() -> str | None:
    try:
        with open(os.path.join(paths.sync_dir(), "base"), encoding="ascii") as f:
            text = f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if len(text) == 40 and all(c in "0123456789abcdef" for c in text) else None


def _save(info: SyncInfo, base: str | None = None) -> None:
    paths.make_private_dirs(paths.sync_dir())
    if base is not None:
        write_atomic(os.path.join(paths.sync_dir(), "base"), base.encode() + b"\n")
    write_atomic(paths.sync_state_file(), msgspec.json.encode(info))


def round_lock():
    return flocked(os.path.join(paths.sync_dir(), "lock"), busy=Busy("a sync round is already running"))


def init(remote: str, *, clock: Callable[[], float] = time.time) -> SyncInfo:
    """Set the sync repository up (or point it at another remote) and check that the remote
    answers; the first round is `autoharnessctl sync`."""
    with round_lock():
        info = load()
        gitrepo.init(repo_dir(), remote)
        try:
            gitrepo.fetch(repo_dir())  # raises with git's reason when the remote does not answer
        except GitError:
            if info.configured:  # the remote that worked stays in use
                gitrepo.init(repo_dir(), info.remote)
            raise
        info.configured, info.remote = True, remote
        info.machine = info.machine or secrets.token_hex(6)
        _save(info)
        return info


def due(info: SyncInfo, cfg: SyncConfig, now: float) -> bool:
    """Whether the daemon's next round is due: `every_s` after the last, backing off
    exponentially (to six hours) while rounds fail."""
    if not info.configured or cfg.every_s <= 0:
        return False
    return now >= next_try(info, cfg)


def next_try(info: SyncInfo, cfg: SyncConfig) -> float:
    last = info.last_round_at or 0.0
    wait = cfg.every_s * (2 ** min(info.failures, 16)) if info.failures else cfg.every_s
    return last + min(wait, max(BACKOFF_MAX_S, cfg.every_s))


def run(pr: Promoter, cfg: SyncConfig, *, counts: bool,
        clock: Callable[[], float] = time.time) -> SyncInfo:
    """One round. `counts`: this process knows the turns (the daemon), so this machine's
    counts file is written; an offline round carries skills only. Never raises for a remote
    that fails: the reason is recorded and returned."""
    with round_lock():
        info = load()
        if not info.configured:
            raise NotSetUp("no sync repository: run `autoharnessctl sync init REMOTE` first")
        now, layer = clock(), library.UserLayer(pr, info.machine)
        try:
            base, result = _round(layer, cfg, info, counts=counts, now=now)
        except (GitError, OSError) as e:
            if isinstance(e, GitError):  # the remote's: FIX_REMOTE says what to check
                return _failed(info, cfg, now, e.reason)
            fix = (f"make {e.filename} writable (or move what is in the way), then run "
                   "`autoharnessctl sync` again") if e.filename else ""
            return _failed(info, cfg, now, f"{e.strerror or e}: {e.filename}", fix)
        took, pushed, merged, conflicts, refused = result
        failed = [x for x in refused if any(f.family == "landing" and f.code == "io_error"
                                            for f in x.findings)]
        if failed:  # this machine could not write: a failed round, its base left as it was
            first = next(f for f in failed[0].findings if f.code == "io_error")
            info.refused = refused
            return _failed(info, cfg, now, f"could not take in "
                           f"{', '.join(x.skill for x in failed)}: {first.message}",
                           f"make {layer.root} a directory you can write, "
                           "then run `autoharnessctl sync` again")
        info.last_fix = ""
        info.took, info.pushed, info.merged, info.refused = took, pushed, merged, refused
        info.conflicts = (info.conflicts + conflicts)[-MAX_CONFLICTS:]
        info.last_error, info.failures = None, 0
        info.last_round_at = info.last_good_at = now
        info.next_try_at = next_try(info, cfg) if cfg.every_s > 0 else None
        _save(info, base)
        return info


def _failed(info: SyncInfo, cfg: SyncConfig, now: float, reason: str, fix: str = "") -> SyncInfo:
    """Record a failed round (its reason, and its fix when it is this machine's) and return
    the state; the last good round and the base stay as they were."""
    info.last_error, info.last_fix = reason, fix
    info.failures, info.last_round_at = info.failures + 1, now
    info.next_try_at = next_try(info, cfg) if cfg.every_s > 0 else None
    _save(info)
    return info


def _round(layer: library.UserLayer, cfg: SyncConfig, info: SyncInfo, *, counts: bool,
           now: float):
    repo, me = repo_dir(), info.machine
    for _ in range(PUSH_ATTEMPTS):
        tip = gitrepo.fetch(repo)
        base_sha = _base()
        if base_sha and not gitrepo.has_commit(repo, base_sha):
            base_sha = None  # a remote rewritten under us: every difference is a conflict
        base = parse_tree(gitrepo.tree_files(repo, base_sha, "skills") |
                          gitrepo.tree_files(repo, base_sha, "archived"))
        tree = gitrepo.tree_files(repo, tip)
        remote = parse_tree(tree)
        local = layer.read()
        steps = {}
        for name in sorted(set(local.copies) | set(remote)):
            if name in local.hand_written:
                continue  # never sent, never touched; a remote one is refused below
            steps[name] = decide(base.get(name), local.copies.get(name), remote.get(name),
                                 gitrepo.merge_text)
        gitrepo.reset_to(repo, tip)
        sent: dict[str, Copy] = {}
        for name, step in steps.items():
            if step.kind == "push" or (step.kind == "conflict" and step.winner == "local"):
                sent[name] = local.copies[name]
            elif step.kind == "merge":
                assert step.files is not None
                sent[name] = Copy(status=LIVE, files=step.files, changed_at=now, changed_by=me,
                                  extra=local.copies[name].extra)
        for name, copy in sent.items():
            _write_copy(repo, name, copy, evidence=cfg.evidence)
        if counts:
            _write_counts(layer, repo, me, local, _live_after(steps, local, remote))
        commit = gitrepo.commit_all(repo, f"autoharness: machine {me}: "
                                          f"{', '.join(sorted(sent)) or 'counts'}")
        if commit is not None:
            try:
                gitrepo.push(repo)
            except GitError as e:
                if e.rejected:
                    continue  # another machine pushed first: decide again on its tip
                raise
        if any(s.kind in ("take", "conflict") for s in steps.values()):
            _user_root_ready(layer.root)
        return commit or tip, _take_in(layer, steps, local, remote, sent, tree, now)
    raise GitError("the remote moved during each of 3 attempts; run `autoharnessctl sync` again")


def _user_root_ready(root: str) -> None:
    """The user layer's skills dir exists before anything is taken in: a fresh machine has no
    `~/.claude/skills` (nor, before Claude Code's first run, `~/.claude`). Raises OSError when
    it cannot be made, so the round fails before it takes anything in."""
    os.makedirs(root, mode=0o700, exist_ok=True)
    if not os.access(root, os.W_OK | os.X_OK):
        raise PermissionError(13, "cannot write the user layer's skills", root)


def _take_in(layer: library.UserLayer, steps, local, remote, sent, tree, now):
    me = layer.machine
    took, merged, conflicts, refused = [], [], [], []
    for name, step in steps.items():
        mine = local.copies.get(name)
        if step.kind == "take":
            there = remote[name]
            if there.status == ARCHIVED and (mine is None or mine.status == ARCHIVED):
                continue  # archived there, not live here: nothing to do
            out = layer.take(name, there, mine)
            if out.status == "landed":
                if not there.same(mine):
                    took.append(name)
            else:
                refused.append(SyncRefusal(skill=name, machine=there.changed_by,
                                           findings=out.findings))
        elif step.kind == "merge":
            out = layer.take(name, sent[name], mine)
            merged.append(name)
        elif step.kind == "conflict":
            there = remote[name]
            if step.winner == "remote":
                layer.take(name, there, mine)
                kept, other = there.changed_by, me
            else:
                layer.keep_in_history(name, there, mine)
                kept, other = me, there.changed_by
            conflicts.append(SyncConflict(
                skill=name, at=now, kept=kept, other=other,
                note="the other version is in `autoharnessctl skills history " + name + "`"))
    for name in sorted(set(remote) & local.hand_written):
        refused.append(SyncRefusal(skill=name, machine=remote[name].changed_by, findings=[
            Finding(family="owned", code="not_owned",
                            message=f"{name} is a hand-written skill on this machine")]))
    _merge_counts(layer, tree)
    pushed = sorted(n for n in sent if steps[n].kind != "merge")
    return took, pushed, merged, conflicts, refused


# ---- the repository's files -------------------------------------------------------------------


def parse_tree(files: dict[str, bytes]) -> dict[str, Copy]:
    """The skills a tree holds, by name (a live copy wins over an archived one of the same
    name); entries that are not of our shape are ignored, never trusted."""
    groups: dict[tuple[str, str], dict[str, bytes]] = {}
    for path, data in files.items():
        parts = path.split("/", 2)
        if len(parts) != 3 or parts[0] not in ("skills", "archived"):
            continue
        kind, name, rel = parts
        if not validate.name_is_contained(name):
            continue
        groups.setdefault((kind, name), {})[rel] = data
    out: dict[str, Copy] = {}
    for (kind, name), fs in sorted(groups.items(), key=lambda kv: kv[0][0] != "skills"):
        if name in out or SKILL_MD not in fs:
            continue
        try:
            origin = json.loads(fs.pop(ORIGIN, b"{}"))
        except (ValueError, RecursionError):
            origin = {}
        if not isinstance(origin, dict):
            origin = {}
        at = origin.get("at")
        out[name] = Copy(
            status=LIVE if kind == "skills" else ARCHIVED,
            files={r: b for r, b in fs.items() if not r.startswith(PROVENANCE_DIR + "/")},
            extra={r: b for r, b in fs.items() if r.startswith(PROVENANCE_DIR + "/")},
            changed_at=float(at) if isinstance(at, int | float) else 0.0,
            changed_by=str(origin.get("machine") or ""), reason=str(origin.get("reason") or ""))
    return out


def _write_copy(repo: str, name: str, copy: Copy, *, evidence: bool) -> None:
    for kind in ("skills", "archived"):
        shutil.rmtree(os.path.join(repo, kind, name), ignore_errors=True)
    top = os.path.join(repo, "skills" if copy.status == LIVE else "archived", name)
    files = dict(copy.files)
    for rel, data in copy.extra.items():
        if rel.startswith(library.EVIDENCE_PREFIX) and not evidence:
            continue
        if rel == PROVENANCE:
            data = _portable_provenance(data, evidence=evidence)
        if rel != ORIGIN:
            files[rel] = data
    files[ORIGIN] = json.dumps({"machine": copy.changed_by, "at": copy.changed_at,
                                "status": copy.status, "reason": copy.reason},
                               sort_keys=True).encode()
    for rel, data in files.items():
        path = os.path.join(top, *rel.split("/"))
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


def _portable_provenance(data: bytes, *, evidence: bool) -> bytes:
    """Provenance as it travels: no local paths; without evidence, no quote references."""
    try:
        prov = json.loads(data)
    except (ValueError, RecursionError):
        return b"{}"
    if not isinstance(prov, dict):
        return b"{}"
    prov.pop("target", None)
    if not evidence:
        for landing in prov.get("landings") or []:
            if isinstance(landing, dict):
                landing["evidence"] = None
    return json.dumps(prov, indent=1, sort_keys=True).encode()


def _write_json(repo: str, rel: str, obj: object) -> None:
    path = os.path.join(repo, *rel.split("/"))
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, sort_keys=True)


def _live_after(steps, local: library.Local, remote: dict[str, Copy]) -> set[str]:
    """The names live here once this round has taken in what it decided to."""
    out = {n for n, c in local.copies.items() if c.status == LIVE}
    for name, step in steps.items():
        if step.kind == "take" or (step.kind == "conflict" and step.winner == "remote"):
            if remote[name].status == LIVE:
                out.add(name)
            else:
                out.discard(name)
    return out


def _write_counts(layer: library.UserLayer, repo: str, me: str, local: library.Local,
                  live: set[str]) -> None:
    """This machine's own counts (never the sums it read from others), as they will be after
    the round: a skill taken in starts at zero here."""
    here = {n: os.path.join(layer.root, n) for n in live
            if (c := local.copies.get(n)) is not None and c.status == LIVE}
    own = layer.promoter.own_counts(list(here.values()))
    # none yet (taken in this round, or not stamped): its probation starts with the take-in
    skills = {n: own.get(here.get(n, ""), {"uses": 0, "turns": 0}) for n in sorted(live)}
    _write_json(repo, f"counts/{me}.json", {"machine": me, "skills": skills})


def _merge_counts(layer: library.UserLayer, tree: dict[str, bytes]) -> None:
    """Sum every other machine's counts per skill into the promoter's state, where the
    listing (and so the lifecycle) adds them to this machine's own."""
    me = layer.machine
    total: dict[str, dict[str, int]] = {}
    for path, data in tree.items():
        parts = path.split("/")
        if len(parts) != 2 or parts[0] != "counts" or parts[1] == f"{me}.json":
            continue
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError):
            continue
        skills = doc.get("skills") if isinstance(doc, dict) else None
        if not isinstance(skills, dict):
            continue
        for name, c in skills.items():
            if not validate.name_is_contained(name) or not isinstance(c, dict):
                continue
            t = total.setdefault(os.path.join(layer.root, name), {})
            for k in COUNTED:
                v = c.get(k)
                if type(v) is int and v > 0:
                    t[k] = t.get(k, 0) + v
    layer.promoter.take_synced_counts(total)
