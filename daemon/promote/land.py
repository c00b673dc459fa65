"""The promoter: the only writer of the skill tree.

A change is shaped in memory, validated, and only then landed:

1. every byte to be written (and every byte it replaces) goes into a content-addressed blob
   store in the state dir;
2. a landing record naming target, files and hashes is written to `pending/` (fsynced) —
   before anything in the skill tree changes, so a crash is always recognised as ours;
3. supporting files, then evidence, then `SKILL.md` (the commit point), then the provenance
   file are written, each temp + fsync + rename + directory fsync, through directory fds that
   refuse symlinks;
4. the version is appended to the skill's history and the landing record removed.

`recover()` at start finishes (or, when the tree no longer looks like ours, abandons) whatever
a crash interrupted, and sweeps temp files. State layout under `<state dir>/promote/`:

    lock                      flock: one writer across processes (daemon, offline CLI)
    pending/<landing>.json    landing records in flight
    blobs/<sha256>            file contents, landed and replaced
    history/<key>.json        per target path: every version, for history/revert
    archive/<name>/<landing>/ archived skills (meta.json + skill/), outside Claude Code's discovery
    uses.json                 skill dir → use count (since it landed or was restored)
    lifecycle.json            skill dir → its layer's turn count when it landed or was restored

The library's lifecycle (probation, dormancy, capacity: see `lifecycle`) is applied here too,
as archives with a recorded reason, so it is journaled, listed and restorable like any other.
"""

import fcntl
import hashlib
import json
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager

import msgspec

from claude_autoharness.daemon.atomic import fsync_dir
from claude_autoharness.daemon.promote import duplicate, gitmode, lifecycle, records, skillfile, validate
from claude_autoharness.daemon.promote.evidence import evidence_in_window
from claude_autoharness.daemon.promote.validate import (
    PROVENANCE_DIR,
    PROVENANCE_FILE,
    SKILL_MD,
    TMP_PREFIX,
    Plan,
    open_dir,
    read_nofollow,
)
from claude_autoharness.daemon.proposals import (
    LAYERS,
    Finding,
    Intent,
    Proposal,
    check_shape,
    curator_layer,
)
from claude_autoharness.protocol import paths
from claude_autoharness.protocol.config import LibraryConfig, PromoterConfig

PROVENANCE = f"{PROVENANCE_DIR}/{PROVENANCE_FILE}"
EVIDENCE_DIR = f"{PROVENANCE_DIR}/evidence"
# `show` returns SKILL.md whole; a bigger (hand-written) one is shown empty, not loaded.
MAX_SHOW_BYTES = 1024 * 1024


class Outcome(msgspec.Struct, kw_only=True, omit_defaults=True):
    status: str  # landed | rejected | held
    findings: list[Finding] = []
    skill_path: str | None = None  # the SKILL.md (or, for archive, the archive directory)
    version: int | None = None


class SkillInfo(msgspec.Struct, kw_only=True):
    name: str
    layer: str
    path: str
    owner: str  # autoharness | user
    status: str = "live"  # live | archived
    created: float | None = None
    last_changed: float | None = None
    uses: int = 0
    version: int | None = None
    turns: int = 0  # of its layer since it landed or was restored (autoharness skills)
    stage: str = ""  # probation | graduated | hand-written | archived
    reason: str | None = None  # archived: dormant | capacity | curated | proposed



class SkillView(msgspec.Struct, kw_only=True):
    info: SkillInfo
    skill_md: str
    files: list[str]
    landings: list[dict]


class Recovered(msgspec.Struct, kw_only=True):
    landing: str
    intent_id: str | None
    target: str
    result: str  # completed | rolled_back | abandoned


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _sha_or_none(data: bytes | None) -> str | None:
    return None if data is None else _sha(data)


def _reject(*findings: Finding) -> Outcome:
    return Outcome(status="rejected", findings=list(findings))


def _shape_finding(code: str, message: str) -> Finding:
    return Finding(family="shape", code=code, message=message)


class Promoter:
    """Validates and lands intents; every method is safe to call from one thread at a time
    per process, and landings are serialised across processes by a file lock."""

    def __init__(self, cfg: PromoterConfig, *, redactor=None, clock=time.time,
                 library: LibraryConfig | None = None,
                 turns: Callable[[str, str | None], int] | None = None):
        self.cfg = cfg
        self.clock = clock
        self._redactor = redactor
        self.library = library or LibraryConfig()
        # (layer, project root) -> turns counted so far in that layer; the daemon owns them
        self.turns = turns or (lambda layer, anchor: 0)
        self.state = validate.promote_state_dir()
        self._thread_lock = threading.Lock()
        self._uses_lock = threading.Lock()

    @property
    def redactor(self):
        if self._redactor is None:
            from claude_autoharness.daemon.capture.redact import default_redactor
            self._redactor = default_redactor()
        return self._redactor

    # -- intents ---------------------------------------------------------------------------

    def promote(self, intent: Intent, window: str | bytes | None,
                project_root: str | None) -> Outcome:
        """Land the intent, or reject it writing nothing; in review mode, hold what passes."""
        mode, _ = gitmode.mode_for(project_root if intent.proposal and
                                   intent.proposal.layer == "project" else None, self.cfg)
        return self._promote(intent, window, project_root, hold=mode == "review")

    def approve(self, intent: Intent, window: str | bytes | None,
                project_root: str | None) -> Outcome:
        """Land a held intent after re-validating it against the tree as it is now."""
        return self._promote(intent, window, project_root, hold=False)

    def _promote(self, intent, window, project_root, *, hold: bool) -> Outcome:
        p = intent.proposal
        if p is None:
            return _reject(Finding(family="well_formed", code="schema",
                                   message="the proposal was malformed"))
        problems = check_shape(p)
        if problems:  # same family and code as the intent queue uses at intake
            return _reject(*[Finding(family="well_formed", code="schema", message=m)
                             for m in problems])
        root, anchor = self._layer_root(p.layer, project_root)
        if root is None:
            return _reject(_no_project_root(project_root))
        if isinstance(window, bytes):
            window = window.decode("utf-8", "replace")
        with self._locked():
            try:
                self._sync_git(root)
            except OSError as e:
                return _reject(Finding(family="landing", code="git", message=str(e)))
            done = self._landed_before(os.path.join(root, p.skill), intent.id)
            if done:
                return done
            plan, findings = self._shape(p, root, anchor)
            findings += validate.check(plan, max_body_lines=self.cfg.max_body_lines,
                                       redactor=self.redactor)
            findings += validate.attributable(p, window)
            if intent.source == "curator":
                findings += _curator_findings(intent, plan, p.evidence)
            if findings:
                return _reject(*findings)
            if hold:
                return Outcome(status="held", skill_path=os.path.join(plan.skill_dir, SKILL_MD))
            origin = {"source": intent.source, "intent": intent.id, "session": intent.session_id,
                      "job": intent.job_id, "reason": p.reason}
            if plan.action == "archive":
                reason = "curated" if intent.source == "curator" else "proposed"
                return self._run(self._archive_record(plan, origin, reason=reason))
            out = self._run(self._write_record(plan, origin, evidence=p.evidence))
            if out.status == "landed" and plan.action == "create":
                self._stamp(plan.skill_dir, plan.layer, project_root)  # probation starts
            return out

    def _shape(self, p: Proposal, root: str, anchor: str | None) -> tuple[Plan, list[Finding]]:
        """The skill as it will be after the action, built from the live tree (read only).

        `p` passed `check_shape`: every field its action needs is set (`or ""` only narrows).
        """
        description, new_body = p.description or "", p.body or ""
        old, new, path = p.old or "", p.new or "", p.path or ""
        plan = Plan(action=p.action, layer=p.layer, name=p.skill, root=root, anchor=anchor,
                    state=self.state)
        if not validate.name_is_contained(p.skill):
            return plan, []  # contained() reports it; nothing may be read through this name
        plan.exists = os.path.lexists(plan.skill_dir)
        plan.live = validate.scan_tree(plan.skill_dir)[0]
        live_md = read_nofollow(plan.skill_dir, SKILL_MD) if plan.exists else None
        out: list[Finding] = []
        if p.action == "create":
            if plan.exists and self._owned(plan.skill_dir):
                out.append(_shape_finding("exists", f"{p.skill} exists: update or patch it"))
            out += _duplicates(root, p.skill, description)
            plan.skill_md = skillfile.render({"name": p.skill, "description": description}, new_body)
            return plan, out
        if not plan.exists:
            return plan, [_shape_finding("missing", f"no skill {p.skill} in the {p.layer} layer")]
        if p.action in ("update", "patch"):
            if live_md is None:
                return plan, [_shape_finding("missing", f"{p.skill} has no readable SKILL.md")]
            try:
                fields, body = skillfile.parse(live_md.decode("utf-8"))
            except (UnicodeDecodeError, skillfile.SkillFormatError) as e:
                return plan, [Finding(family="well_formed", code="frontmatter",
                                      message=f"live SKILL.md: {e}")]
            if p.action == "update":
                fields.update(name=p.skill, description=description)
                body = new_body
            else:
                n = _occurrences(body, old)
                if n != 1:
                    return plan, [_shape_finding("patch_mismatch", f"`old` matches the live "
                                                                   f"body {n} times, not once")]
                body = body.replace(old, new, 1)
            plan.skill_md = skillfile.render(fields, body)
        elif p.action == "add_file":
            plan.writes = {path: p.content or ""}
        elif p.action == "remove_file":
            if path not in plan.live:
                out.append(_shape_finding("missing_file", f"{p.skill} has no file {path!r}"))
            plan.removes = [path]
        return plan, out

    # -- operator verbs --------------------------------------------------------------------

    def revert(self, name: str, to: int | None = None, project_root: str | None = None,
               layer: str | None = None) -> Outcome:
        """Put back an earlier landed version (default: the one before the current); the
        revert is itself a recorded landing."""
        with self._locked():
            self._sync_git_roots(project_root)
            found = self._one(name, project_root, layer, lambda t: os.path.lexists(t))
            if isinstance(found, Outcome):
                return found
            layer, root, anchor = found
            target = os.path.join(root, name)
            if not self._owned(target):
                return _reject(Finding(family="owned", code="not_owned",
                                       message=f"{name} was not created by autoharness"))
            versions = [e for e in self._history(target) if e.get("files")]
            if to is None:
                chosen = versions[-2] if len(versions) >= 2 else None
            else:
                chosen = next((e for e in versions if e["version"] == to), None)
            if chosen is None:
                return _reject(_shape_finding(
                    "no_version", f"{name} has no version {to or 'before the current one'}"))
            files = {rel: self._get_blob(sha).decode() for rel, sha in chosen["files"].items()}
            live = validate.scan_tree(target)[0]
            plan = Plan(action="revert", layer=layer, name=name, root=root, anchor=anchor,
                        state=self.state, exists=True, skill_md=files.pop(SKILL_MD), live=live,
                        writes={rel: text for rel, text in files.items()
                                if read_nofollow(target, rel) != text.encode()},
                        removes=sorted(r for r in live if r != SKILL_MD and r not in files))
            findings = validate.check(plan, max_body_lines=self.cfg.max_body_lines,
                                      redactor=self.redactor)
            if findings:
                return _reject(*findings)
            origin = {"source": "operator", "reason": f"revert to version {chosen['version']}"}
            return self._run(self._write_record(plan, origin, to=chosen["version"]))

    def restore(self, name: str, project_root: str | None = None,
                layer: str | None = None) -> Outcome:
        """Bring the most recent archive of `name` back to where it was archived from."""
        with self._locked():
            self._sync_git_roots(project_root)
            metas = [m for m in self._archives()
                     if m["name"] == name and (layer is None or m["layer"] == layer)
                     and (m["layer"] == "user" or project_root is None
                          or _same_dir(m["anchor"], project_root))]
            if not metas:
                return _reject(_shape_finding("missing", f"no archived skill {name}"))
            meta = max(metas, key=lambda m: m["landing"])
            src = os.path.join(meta["path"], "skill")
            files = {rel: data for rel in _all_files(src)
                     if (data := read_nofollow(src, rel)) is not None}
            try:
                texts = {rel: data.decode() for rel, data in files.items()
                         if not rel.startswith(PROVENANCE_DIR + "/")}
            except UnicodeDecodeError:
                return _reject(_shape_finding("binary", "archived skill holds a non-text file"))
            # Where the layer resolves *now*, checked like a create: the archive's recorded
            # target is only a claim, and the path to it may have been re-pointed since
            # (a `.claude` swapped for a symlink, a project deleted, a config dir moved).
            root, anchor = self._layer_root(meta["layer"], meta["anchor"])
            if root is None:
                return _reject(_no_project_root(meta["anchor"]))
            target = os.path.join(root, name)
            if target != meta["target"]:
                return _reject(Finding(
                    family="contained", code="symlink",
                    message=f"the {meta['layer']} skills dir no longer resolves to where "
                            f"{name} was archived from"))
            plan = Plan(action="restore", layer=meta["layer"], name=name, root=root,
                        anchor=anchor, state=self.state, exists=os.path.lexists(target),
                        skill_md=texts.pop(SKILL_MD, ""), writes=texts)
            findings = []
            if plan.exists:
                findings.append(_shape_finding("exists", f"{target} exists: move it first"))
            findings += validate.check(plan, max_body_lines=self.cfg.max_body_lines,
                                       redactor=self.redactor)
            if findings:
                return _reject(*findings)
            # Not of our shape: the restore entry starts a fresh record rather than fail.
            prov = records.parse_provenance(files.get(PROVENANCE) or b"") or {}
            evidence = {rel: data for rel, data in files.items()
                        if rel.startswith(EVIDENCE_DIR + "/")}
            origin = {"source": "operator", "reason": f"restore archive {meta['landing']}"}
            out = self._run(self._write_record(plan, origin, extra=evidence, base_prov=prov))
            if out.status == "landed":
                # Renamed first, so a crash mid-delete leaves a temp the sweep removes, never
                # a half-deleted archive that a later restore could pick.
                gone = os.path.join(os.path.dirname(meta["path"]),
                                    TMP_PREFIX + os.path.basename(meta["path"]))
                os.rename(meta["path"], gone)
                shutil.rmtree(gone, ignore_errors=True)
                self._stamp(target, meta["layer"], meta["anchor"])  # a fresh probation
            return out

    def list_skills(self, project_root: str | None = None) -> list[SkillInfo]:
        """Live skills of the user layer (and the project's, given its root), then archives."""
        self._refresh_git(project_root)
        out = []
        uses, stamps = self._uses(), self._stamps()
        for layer, root, _ in self._roots(project_root):
            try:
                names = sorted(os.listdir(root))
            except OSError:  # missing, not a directory, unreadable
                continue
            scope = project_root if layer == "project" else None  # whose turns count
            for name in names:
                d = os.path.join(root, name)
                if os.path.isfile(os.path.join(d, SKILL_MD)):
                    out.append(self._info(layer, d, uses, stamps, scope))
        for m in sorted(self._archives(), key=lambda m: (m["name"], m["landing"])):
            if m["layer"] == "user" or (project_root and _same_dir(m["anchor"], project_root)):
                out.append(SkillInfo(name=m["name"], layer=m["layer"], path=m["path"],
                                     owner="autoharness", status="archived",
                                     last_changed=m["archived_at"], version=m.get("version"),
                                     uses=_int(m.get("uses")), turns=_int(m.get("turns")),
                                     stage=lifecycle.ARCHIVED,
                                     reason=m.get("reason") if isinstance(m.get("reason"), str)
                                     else None))
        return out

    # -- the library's lifecycle -------------------------------------------------------------

    def lifecycle_pass(self, project_root: str | None) -> list[lifecycle.Decision]:
        """Archive what the counts call for in the user layer (and the project's): dormant
        skills after probation, then the lowest usage rates past a layer's capacity.

        An autoharness skill without a turn stamp (it predates this, or its landing was
        recovered after a crash) starts its probation now."""
        infos = [i for i in self.list_skills(project_root)
                 if i.status == "live" and i.owner == "autoharness"]
        stamps = self._stamps()
        fresh = [i for i in infos if i.path not in stamps]
        for i in fresh:
            self._stamp(i.path, i.layer, project_root if i.layer == "project" else None,
                        keep_uses=True)
        counts = [lifecycle.SkillCounts(  # an unstamped skill was listed with 0 turns
            name=i.name, layer=i.layer, scope=project_root if i.layer == "project" else None,
            owned=True, uses=i.uses, turns=i.turns) for i in infos]
        lib = self.library
        decisions = lifecycle.decide(counts, maturity_turns=lib.maturity_turns,
                                     capacity_project=lib.capacity_project,
                                     capacity_user=lib.capacity_user)
        done = []
        for d in decisions:
            out = self.retire(d, project_root)
            if out.status == "landed":
                done.append(d)
        return done

    def retire(self, d: lifecycle.Decision, project_root: str | None) -> Outcome:
        """Archive one skill for a lifecycle reason (`dormant`, `capacity`), recorded in its
        history and archive metadata; `restore` brings it back on a fresh probation."""
        with self._locked():
            root, anchor = self._layer_root(d.layer, project_root)
            if root is None:
                return _reject(_no_project_root(project_root))
            try:
                self._sync_git(root)
            except OSError as e:
                return _reject(Finding(family="landing", code="git", message=str(e)))
            plan = Plan(action="archive", layer=d.layer, name=d.name, root=root, anchor=anchor,
                        state=self.state)
            if not validate.name_is_contained(d.name):
                return _reject(Finding(family="contained", code="name",
                                       message="not a plain skill name"))
            plan.exists = os.path.lexists(plan.skill_dir)
            if not plan.exists or not self._owned(plan.skill_dir):
                return _reject(Finding(family="owned", code="not_owned",
                                       message=f"{d.name} is not an autoharness skill"))
            plan.live = validate.scan_tree(plan.skill_dir)[0]
            findings = validate.check(plan, max_body_lines=self.cfg.max_body_lines,
                                      redactor=self.redactor)
            if findings:
                return _reject(*findings)
            why = (f"{d.reason}: {d.uses} uses in {d.turns} turns"
                   + (" after probation" if d.reason == lifecycle.DORMANT else
                      f", over the {d.layer} layer's capacity"))
            origin = {"source": "lifecycle", "reason": why}
            return self._run(self._archive_record(plan, origin, reason=d.reason,
                                                  uses=d.uses, turns=d.turns))

    def archived_since(self, project_root: str | None, since: float,
                       reasons: tuple[str, ...] = (lifecycle.DORMANT, lifecycle.CAPACITY)
                       ) -> list[dict]:
        """Archive metadata of skills archived after `since` for one of `reasons`, in the user
        layer or the given project's, oldest first."""
        out = [m for m in self._archives()
               if m["archived_at"] > since and m.get("reason") in reasons
               and (m["layer"] == "user" or (project_root
                                             and _same_dir(m["anchor"], project_root)))]
        return sorted(out, key=lambda m: m["landing"])

    def _stamps(self) -> dict[str, int]:
        return self._read_counts("lifecycle.json")

    def _stamp(self, skill_dir: str, layer: str, anchor: str | None, *,
               keep_uses: bool = False) -> None:
        """Start the skill's probation: its turns count from now (and its uses, unless kept)."""
        now = self.turns(layer, anchor)
        with self._uses_lock:
            paths.make_private_dirs(self.state)
            stamps = self._stamps()
            stamps[skill_dir] = now
            _write_path(self._p("lifecycle.json"), json.dumps(stamps).encode())
            if not keep_uses:
                uses = self._uses()
                if uses.pop(_uses_key(skill_dir), None) is not None:
                    _write_path(self._p("uses.json"), json.dumps(uses).encode())

    def show(self, name: str, project_root: str | None = None,
             layer: str | None = None) -> SkillView | None:
        """One live skill: its SKILL.md, files and provenance; None when there is none."""
        self._refresh_git(project_root)
        found = self._one(name, project_root, layer,
                          lambda t: os.path.isfile(os.path.join(t, SKILL_MD)))
        if isinstance(found, Outcome):
            return None
        layer, root, _ = found
        d = os.path.join(root, name)
        prov = validate.read_provenance(d) if self._owned(d) else None
        data = read_nofollow(d, SKILL_MD, limit=MAX_SHOW_BYTES) or b""
        return SkillView(info=self._info(layer, d, self._uses(), self._stamps(),
                                         project_root if layer == "project" else None),
                         skill_md=data.decode("utf-8", "replace"),
                         files=sorted(validate.scan_tree(d)[0]),
                         landings=prov["landings"] if prov else [])

    def history(self, name: str, project_root: str | None = None,
                layer: str | None = None) -> list[dict]:
        """Every landing recorded for `name` (oldest first), archived or live."""
        self._refresh_git(project_root)
        found = self._one(name, project_root, layer, lambda t: bool(self._history(t)))
        if isinstance(found, Outcome):
            return []
        _, root, _ = found
        return self._history(os.path.join(root, name))

    def locate(self, name: str, project_root: str | None = None) -> list[str]:
        """Live skill directories named `name`, project layer first."""
        return [os.path.join(root, name) for _, root, _ in self._roots(project_root)
                if os.path.isfile(os.path.join(root, name, SKILL_MD))]

    def record_use(self, path: str) -> str | None:
        """Count one use of the skill at `path` (its dir or its SKILL.md); return the dir."""
        p = os.path.realpath(path)
        d = os.path.dirname(p) if os.path.basename(p) == SKILL_MD else p
        if not os.path.isfile(os.path.join(d, SKILL_MD)):
            return None
        with self._uses_lock:
            uses = self._uses()
            uses[d] = uses.get(d, 0) + 1  # _uses() holds ints only
            paths.make_private_dirs(self.state)
            _write_path(self._p("uses.json"), json.dumps(uses).encode())
        return d

    # -- crash recovery --------------------------------------------------------------------

    def recover(self) -> list[Recovered]:
        """Finish or abandon landings a crash interrupted; sweep temp files. Call at start."""
        with self._locked():
            records = []
            for fn in sorted(os.listdir(self._p("pending"))):
                path = self._p("pending", fn)
                if fn.startswith(TMP_PREFIX):
                    _unlink(path)
                    continue
                if not fn.endswith(".json"):
                    continue  # .corrupt / .failed: kept for the operator, never retried
                try:
                    with open(path, "rb") as f:
                        records.append(json.load(f))
                except (OSError, ValueError):
                    os.replace(path, path + ".corrupt")  # kept for the operator, never retried
            out = []
            for rec in records:
                try:
                    _sweep_temps(rec["target"])
                    out.append(self._recover_one(rec))
                except (KeyError, TypeError, ValueError):  # a record we cannot read
                    path = self._p("pending", f"{rec.get('id')}.json")
                    if os.path.exists(path):
                        os.replace(path, path + ".corrupt")
            self._sweep_state()
            return out

    def _recover_one(self, rec: dict) -> Recovered:
        def result(r):
            return Recovered(landing=rec["id"], intent_id=rec["history"].get("intent"),
                             target=rec["target"], result=r)

        looks_ours = self._looks_like_ours if rec["op"] == "write" else self._archive_is_ours
        if not looks_ours(rec):
            self._drop(rec)
            return result("abandoned")
        try:
            self._complete(rec)
            return result("completed")
        except OSError:
            try:
                self._rollback(rec)
                self._drop(rec)
                return result("rolled_back")
            except OSError:
                os.replace(self._pending_path(rec), self._pending_path(rec) + ".failed")
                return result("abandoned")

    def _looks_like_ours(self, rec: dict) -> bool:
        # Every file we were changing is still either its old or its new self, and no
        # symlink was planted meanwhile; otherwise someone else has touched it since.
        target = rec["target"]
        if not _root_intact(rec) or os.path.islink(target) or validate.scan_tree(target)[1]:
            return False
        for rel, new, prev in rec["writes"]:
            data = read_nofollow(target, rel)
            if (None if data is None else _sha(data)) not in (new, prev):
                return False
        return True

    def _archive_is_ours(self, rec: dict) -> bool:
        """Whether an interrupted archive may still remove what sits at its target.

        Before the archive copy exists, the skill must be the owned one the archive was
        planned on (same SKILL.md); once it exists, every file left at the target must be in
        the copy, so removing them loses nothing. Anything else is someone else's now."""
        target, dest = rec["target"], rec["archive_to"]
        if not os.path.lexists(target):
            return os.path.isdir(dest)  # only the history entry is missing
        if (not _root_intact(rec) or os.path.islink(target) or not os.path.isdir(target)
                or validate.scan_tree(target)[1]):
            return False
        if os.path.isdir(dest):
            copy = os.path.join(dest, "skill")
            return all(read_nofollow(target, rel) == read_nofollow(copy, rel)
                       for rel in _all_files(target))
        md = read_nofollow(target, SKILL_MD)
        return (md is not None and _sha(md) == rec["history"]["previous"]
                and self._owned(target))

    def _owned(self, skill_dir: str) -> bool:
        return validate.is_owned(skill_dir, self.state)

    # -- landing ---------------------------------------------------------------------------

    def _write_record(self, plan: Plan, origin: dict, *, evidence: str | None = None,
                      extra: dict[str, bytes] | None = None, base_prov: dict | None = None,
                      to: int | None = None) -> dict:
        """The landing record for a plan that writes files; every blob it names is stored."""
        target = plan.skill_dir
        now = self.clock()
        landing = _landing_id(now)
        history = self._history(target)
        version = history[-1]["version"] + 1 if history else 1
        new = [(rel, plan.writes[rel].encode()) for rel in sorted(plan.writes)]
        new += sorted((extra or {}).items())
        ev_rel = None
        if evidence:
            ev = self.redactor.redact(evidence)[0].encode()
            ev_rel = f"{EVIDENCE_DIR}/{_sha(ev)}.txt"
            new.append((ev_rel, ev))
        prev_md = read_nofollow(target, SKILL_MD) if plan.exists else None
        new_md = prev_md
        if plan.skill_md is not None:
            new_md = plan.skill_md.encode()
            new.append((SKILL_MD, new_md))
        reason = self.redactor.redact(origin.get("reason") or "")[0]
        prov = base_prov or (validate.read_provenance(target) if plan.exists else None) or {}
        prov["target"] = target
        prov.setdefault("landings", []).append({
            "landing": landing, "version": version, "action": plan.action, "at": now,
            "by": "autoharness", "source": origin.get("source"), "intent": origin.get("intent"),
            "session": origin.get("session"), "job": origin.get("job"), "reason": reason,
            "evidence": ev_rel, "previous": _sha_or_none(prev_md),
            "skill_md": _sha_or_none(new_md),
        })
        new.append((PROVENANCE, json.dumps(prov, indent=1).encode()))

        writes: list[list[str | None]] = []  # [rel, new blob, old blob or None]
        for rel, data in new:
            old = read_nofollow(target, rel) if plan.exists else None
            writes.append([rel, self._put_blob(data),
                           None if old is None else self._put_blob(old)])
        removes = [[rel, self._put_blob(read_nofollow(target, rel) or b"")]
                   for rel in plan.removes]
        manifest = {}
        for rel in plan.live:
            if rel not in plan.removes:
                manifest[rel] = self._put_blob(read_nofollow(target, rel) or b"")
        manifest.update({str(rel): str(sha) for rel, sha, _ in writes
                         if not str(rel).startswith(PROVENANCE_DIR + "/")})
        entry = {"landing": landing, "version": version, "action": plan.action, "at": now,
                 "target": target, "layer": plan.layer, "name": plan.name,
                 "source": origin.get("source"), "intent": origin.get("intent"),
                 "session": origin.get("session"), "reason": reason, "evidence": ev_rel,
                 "previous": _sha_or_none(prev_md),
                 "files": manifest}
        if to is not None:
            entry["to"] = to
        return {"id": landing, "op": "write", "target": target, "anchor": plan.anchor,
                "created_dir": not plan.exists, "writes": writes, "removes": removes,
                "history": entry}

    def _archive_record(self, plan: Plan, origin: dict, *, reason: str,
                        uses: int | None = None, turns: int | None = None) -> dict:
        target = plan.skill_dir
        now = self.clock()
        landing = _landing_id(now)
        history = self._history(target)
        version = history[-1]["version"] + 1 if history else 1
        dest = self._p("archive", plan.name, landing)
        prev_md = read_nofollow(target, SKILL_MD)
        entry = {"landing": landing, "version": version, "action": "archive", "at": now,
                 "target": target, "layer": plan.layer, "name": plan.name,
                 "source": origin.get("source"), "intent": origin.get("intent"),
                 "session": origin.get("session"),
                 "reason": self.redactor.redact(origin.get("reason") or "")[0],
                 "previous": _sha_or_none(prev_md), "files": {}, "archive": dest}
        git_target = gitmode.target_of_root(plan.root)
        anchor = git_target.project if git_target else plan.anchor  # restore asks by project
        if uses is None:  # what `skills list` shows for the archive
            uses = self._uses().get(_uses_key(target), 0)
        if turns is None:
            stamp = self._stamps().get(target)
            turns = 0 if stamp is None else max(0, self.turns(plan.layer, anchor) - stamp)
        entry["retired"] = reason
        meta = {"name": plan.name, "layer": plan.layer, "target": target, "anchor": anchor,
                "archived_at": now, "landing": landing, "version": version, "reason": reason,
                "uses": uses, "turns": turns}
        return {"id": landing, "op": "archive", "target": target, "anchor": plan.anchor,
                "archive_to": dest, "meta": meta, "history": entry}

    def _run(self, rec: dict) -> Outcome:
        """Journal the record, then apply it; an I/O failure is rolled back and reported."""
        self._attach_git(rec)
        self._put_pending(rec)
        try:
            self._complete(rec)
        except OSError as e:
            try:
                self._rollback(rec)
            except OSError:
                raise e from None  # the record stays pending; recover() retries at start
            self._drop(rec)
            return _reject(Finding(family="landing", code="io_error", message=str(e)))
        entry = rec["history"]
        path = entry.get("archive") or os.path.join(rec["target"], SKILL_MD)
        return Outcome(status="landed", skill_path=path, version=entry["version"])

    def _complete(self, rec: dict) -> None:
        if rec["op"] == "archive":
            self._apply_archive(rec)
        else:
            self._apply_writes(rec)
        if rec.get("git"):  # the mirror holds the result: commit it to the review branch
            t = gitmode.target_of_root(os.path.dirname(rec["target"]))
            if t is None:
                raise OSError(f"git mode: no target recorded for {rec['target']}")
            rec["history"]["commit"] = gitmode.commit_landing(rec, t, rec["git"]["message"])
        self._append_history(rec["history"])
        self._drop(rec)

    def _apply_writes(self, rec: dict) -> None:
        root, name = os.path.split(rec["target"])
        if not _root_intact(rec):
            # Never recreate a deleted project, nor write through a re-pointed path.
            raise OSError(f"{root} is gone or no longer resolves to itself")
        os.makedirs(root, exist_ok=True)
        for rel, _prev in rec["removes"]:
            _unlink_at(root, [name, *rel.split("/")])
        # In record order: supporting files, evidence, SKILL.md (the commit point), provenance.
        for rel, sha, _prev in rec["writes"]:
            data = self._get_blob(sha)
            if read_nofollow(rec["target"], rel) != data:
                _write_at(root, [name, *rel.split("/")], data)

    def _apply_archive(self, rec: dict) -> None:
        target, dest = rec["target"], rec["archive_to"]
        if not os.path.isdir(dest):
            tmp = os.path.join(os.path.dirname(dest), TMP_PREFIX + os.path.basename(dest))
            shutil.rmtree(tmp, ignore_errors=True)
            os.makedirs(os.path.join(tmp, "skill"), mode=0o700)
            for rel in _all_files(target):
                data = read_nofollow(target, rel)
                if data is not None:
                    _write_at(os.path.join(tmp, "skill"), rel.split("/"), data, create=True)
            meta = dict(rec["meta"], path=dest)
            _write_path(os.path.join(tmp, "meta.json"), json.dumps(meta, indent=1).encode())
            os.rename(tmp, dest)  # fails rather than overwrite: archives are never replaced
            fsync_dir(os.path.dirname(dest))
        root, name = os.path.split(target)
        if os.path.isdir(target) and not os.path.islink(target):
            _unlink_at(root, [name, SKILL_MD])  # the commit point: gone from discovery
            shutil.rmtree(target)
            fsync_dir(root)

    def _rollback(self, rec: dict) -> None:
        """Put back what a failed landing replaced, from the blobs it saved first."""
        target = rec["target"]
        if rec["op"] == "archive":
            dest = rec["archive_to"]
            if os.path.isdir(dest) and not os.path.exists(os.path.join(target, SKILL_MD)):
                raise OSError(f"archive of {target} is past its commit point: recover() ends it")
            shutil.rmtree(os.path.join(os.path.dirname(dest), TMP_PREFIX + os.path.basename(dest)),
                          ignore_errors=True)
            shutil.rmtree(dest, ignore_errors=True)
            return
        if not _root_intact(rec):
            return  # the path now leads elsewhere: touch nothing through it
        if rec["created_dir"]:
            if os.path.isdir(target) and not os.path.islink(target):
                shutil.rmtree(target)
            return
        root, name = os.path.split(target)
        restore = [(rel, prev) for rel, _new, prev in reversed(rec["writes"])] + rec["removes"]
        for rel, prev in restore:
            live = read_nofollow(target, rel)
            if _sha_or_none(live) == prev:
                continue  # never reached, or already put back: touch nothing
            parts = [name, *rel.split("/")]
            if prev is None:
                _unlink_at(root, parts)
            else:
                _write_at(root, parts, self._get_blob(prev))

    # -- state dir -------------------------------------------------------------------------

    def _p(self, *parts: str) -> str:
        return os.path.join(self.state, *parts)

    @contextmanager
    def _locked(self):
        with self._thread_lock:
            paths.make_private_dirs(self.state)
            for sub in ("pending", "blobs", "history", "archive"):
                paths.make_private_dirs(self._p(sub))
            fd = os.open(self._p("lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)

    def _pending_path(self, rec: dict) -> str:
        return self._p("pending", rec["id"] + ".json")

    def _put_pending(self, rec: dict) -> None:
        _write_path(self._pending_path(rec), json.dumps(rec).encode())

    def _drop(self, rec: dict) -> None:
        _unlink(self._pending_path(rec))
        fsync_dir(self._p("pending"))

    def _put_blob(self, data: bytes) -> str:
        sha = _sha(data)
        path = self._p("blobs", sha)
        if not os.path.exists(path):
            _write_path(path, data)
        return sha

    def _get_blob(self, sha: str) -> bytes:
        with open(self._p("blobs", sha), "rb") as f:
            data = f.read()
        if _sha(data) != sha:
            raise OSError(f"blob {sha} is corrupt")
        return data

    def _history(self, target: str) -> list[dict]:
        return records.read_history(self.state, target)

    def _append_history(self, entry: dict) -> None:
        records.append_history(self.state, entry, write=_write_path)

    def _landed_before(self, target: str, intent_id: str) -> Outcome | None:
        # At-least-once delivery from the queue: a replayed intent reports its landing again.
        for e in self._history(target):
            if e.get("intent") == intent_id:
                path = e.get("archive") or os.path.join(target, SKILL_MD)
                return Outcome(status="landed", skill_path=path, version=e["version"])
        return None

    def _archives(self) -> list[dict]:
        out: list[dict] = []
        base = self._p("archive")
        try:
            names = sorted(os.listdir(base))
        except OSError:
            return out
        for name in names:
            try:
                entries = sorted(os.listdir(os.path.join(base, name)))
            except OSError:
                continue
            for entry in entries:
                if entry.startswith(TMP_PREFIX):
                    continue
                try:
                    with open(os.path.join(base, name, entry, "meta.json"), "rb") as f:
                        meta = json.load(f)
                except (OSError, ValueError, RecursionError):
                    continue
                if records.archive_meta_ok(meta):
                    out.append(meta)
        return out

    def _uses(self) -> dict[str, int]:
        return self._read_counts("uses.json")

    def _read_counts(self, name: str) -> dict[str, int]:
        """A state file mapping skill dirs to counts; unreadable or malformed reads as empty
        (the counts are advisory: a lost one restarts a probation, it never blocks a landing)."""
        try:
            with open(self._p(name), "rb") as f:
                data = json.load(f)
        except (OSError, ValueError, RecursionError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if type(v) is int}

    def _sweep_state(self) -> None:
        for sub in ("", "pending", "blobs", "history"):
            d = self._p(sub)
            for fn in os.listdir(d):
                if fn.startswith(TMP_PREFIX):
                    _unlink(os.path.join(d, fn))
        base = self._p("archive")
        for name in os.listdir(base):
            for entry in os.listdir(os.path.join(base, name)):
                if entry.startswith(TMP_PREFIX):
                    shutil.rmtree(os.path.join(base, name, entry), ignore_errors=True)

    # -- git mode --------------------------------------------------------------------------

    def _sync_git(self, root: str) -> None:
        """Bring a git-mode mirror up to its branch tip (lock held; no-op for other roots)."""
        t = gitmode.target_of_root(root)
        if t is not None:
            gitmode.sync(t)

    def _sync_git_roots(self, project_root: str | None) -> None:
        for _, root, _ in self._roots(project_root):
            self._sync_git(root)

    def _refresh_git(self, project_root: str | None) -> None:
        """For readers: sync git-mode mirrors under the lock (never while a landing writes)."""
        if any(gitmode.target_of_root(r) for _, r, _ in self._roots(project_root)):
            with self._locked():
                self._sync_git_roots(project_root)

    def _attach_git(self, rec: dict) -> None:
        """A landing into a git-mode mirror carries the commit it is planned on and its
        message, so a crash between the mirror and the branch can finish the commit."""
        t = gitmode.target_of_root(os.path.dirname(rec["target"]))
        if t is None:
            return
        ev = next((sha for rel, sha, _ in rec.get("writes", ())
                   if rel == rec["history"].get("evidence")), None)
        evidence = self._get_blob(ev).decode("utf-8", "replace") if ev else None
        rec["git"] = {"base": gitmode.mirrored_tip(t), "message": gitmode.message(rec, evidence)}

    # -- layers ----------------------------------------------------------------------------

    def _layer_root(self, layer: str, project_root: str | None) -> tuple[str | None, str | None]:
        """(resolved skills dir, anchor it must stay inside) for a layer; (None, None) for the
        project layer without a project root that is an existing directory."""
        if layer == "user":  # like the project's: a skills dir symlinked elsewhere is refused
            return os.path.realpath(paths.user_skills_dir()), paths.claude_dir()
        if not project_root or not os.path.isdir(project_root):
            return None, None
        t = gitmode.target_for(project_root, self.cfg, self.state)
        if t is not None:  # git mode: the review branch's skills, through their mirror
            return t.mirror_root, t.base
        return os.path.realpath(paths.project_skills_dir(project_root)), project_root

    def _roots(self, project_root: str | None) -> list[tuple[str, str, str | None]]:
        out = []
        for layer in LAYERS:
            root, anchor = self._layer_root(layer, project_root)
            if root is not None:
                out.append((layer, root, anchor))
        return out

    def _one(self, name, project_root, layer, present):
        """The single (layer, root, anchor) where `present(target)` holds, or a rejection."""
        if not validate.name_is_contained(name):
            return _reject(Finding(family="contained", code="name",
                                   message="not a plain skill name"))
        hits = [r for r in self._roots(project_root)
                if (layer is None or r[0] == layer) and present(os.path.join(r[1], name))]
        if not hits:
            return _reject(_shape_finding("missing", f"no skill {name}"))
        if len(hits) > 1:
            return _reject(_shape_finding("ambiguous", f"{name} exists in both layers: name one"))
        return hits[0]

    def _info(self, layer: str, d: str, uses: dict[str, int], stamps: dict[str, int],
              scope: str | None) -> SkillInfo:
        """`scope`: the project root whose turns a project skill counts (None: user layer)."""
        prov = validate.read_provenance(d) if self._owned(d) else None
        landings = (prov or {}).get("landings") or []
        try:
            mtime = os.stat(os.path.join(d, SKILL_MD)).st_mtime
        except OSError:
            mtime = None
        stamp = stamps.get(d)
        used = uses.get(_uses_key(d), 0)
        turns = 0 if stamp is None or not prov else max(0, self.turns(layer, scope) - stamp)
        counts = lifecycle.SkillCounts(name=os.path.basename(d), layer=layer, scope=scope,
                                       owned=bool(prov), uses=used, turns=turns)
        stage = lifecycle.stage(counts, self.library.maturity_turns)
        if stage == lifecycle.DORMANT:  # due for archive at the next pass; still graduated
            stage = lifecycle.GRADUATED
        return SkillInfo(name=os.path.basename(d), layer=layer, path=d,
                         owner="autoharness" if prov else "user",
                         created=landings[0]["at"] if landings else None,
                         last_changed=landings[-1]["at"] if landings else mtime,
                         uses=used,
                         version=landings[-1]["version"] if landings else None,
                         turns=turns, stage=stage)


# -- filesystem helpers: every write under the skill tree goes through a symlink-refusing fd --

def _landing_id(now: float) -> str:
    # Sortable by time, so recover() replays in landing order.
    return f"{int(now * 1000):013d}-{secrets.token_hex(4)}"


def _same_dir(a: str | None, b: str | None) -> bool:
    if not a or not b:
        return False
    return os.path.realpath(a) == os.path.realpath(b)


def _no_project_root(project_root: str | None) -> Finding:
    if not project_root:
        return _shape_finding("no_project_root", "project layer without a project root")
    return _shape_finding("no_project_root",
                          f"the project root {project_root} is not an existing directory")


def _root_intact(rec: dict) -> bool:
    """The landing's layer root is where it was planned: its project (if any) still exists,
    and the skills dir (resolved when planned) still resolves to itself — no component on
    the way was deleted, or swapped for a symlink, since."""
    anchor = rec.get("anchor")
    if anchor is not None and not os.path.isdir(anchor):
        return False
    root = os.path.dirname(rec["target"])
    return os.path.realpath(root) == root


def _uses_key(skill_dir: str) -> str:
    """Where a skill's uses are counted: where sessions read it. A git-mode skill is shaped in
    a mirror but used from the project's working tree once merged."""
    root, name = os.path.split(skill_dir)
    t = gitmode.target_of_root(root)
    return os.path.join(t.real_root, name) if t is not None else skill_dir


def _curator_findings(intent: Intent, plan: Plan, evidence: str) -> list[Finding]:
    """The curator is shown one layer: it changes that layer only. It archives a skill only on
    a quote of that very skill (what was absorbed elsewhere, or what is obsolete): a quote of
    another skill sent with it does not do."""
    asked = curator_layer(intent.session_id)
    if asked is not None and asked != plan.layer:
        return [_shape_finding("wrong_layer", f"the curator was shown the {asked} layer, "
                                              f"not the {plan.layer} layer")]
    if plan.action != "archive":
        return []
    live = read_nofollow(plan.skill_dir, SKILL_MD) if plan.exists else None
    if live is not None and evidence_in_window(evidence, live.decode("utf-8", "replace")):
        return []
    return [Finding(family="attributable", code="evidence_not_found",
                    message=f"the evidence is not a quote of {plan.name}, the skill archived")]


def _int(v) -> int:
    return v if type(v) is int else 0


def _duplicates(root: str, name: str, description: str) -> list[Finding]:
    """A `duplicate` finding for each live skill in `root` near the one being created."""
    out: list[Finding] = []
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return out
    for other in names:
        if other == name or other.startswith(TMP_PREFIX):
            continue
        data = read_nofollow(os.path.join(root, other), SKILL_MD, limit=64 * 1024)
        if data is None:
            continue
        try:
            fields, _ = skillfile.parse(data.decode("utf-8"))
        except (UnicodeDecodeError, skillfile.SkillFormatError):
            fields = {}
        why = duplicate.near(name, description, other, str(fields.get("description") or ""))
        if why:
            out.append(_shape_finding(
                "duplicate", f"{name} is near the live skill {other} (same {why}): "
                             f"patch or update {other} instead"))
    return out


def _occurrences(text: str, sub: str) -> int:
    """How many times `sub` occurs in `text`, overlaps included (a patch must be unambiguous)."""
    if not sub:
        return 0
    n, i = 0, text.find(sub)
    while i >= 0:
        n += 1
        i = text.find(sub, i + 1)
    return n


def _write_at(base: str, parts: list[str], data: bytes, *, create: bool = True,
              mode: int = 0o644) -> None:
    """Atomically replace base/parts... with `data`: temp, fsync, rename, fsync the dir.
    `mode` (less the umask): skills are the project's files, state files are 0600."""
    dfd = open_dir(base, parts[:-1], create=create)
    try:
        tmp = f"{TMP_PREFIX}{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     mode, dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, parts[-1], src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _unlink_at(base: str, parts: list[str]) -> None:
    try:
        dfd = open_dir(base, parts[:-1])
    except FileNotFoundError:
        return
    try:
        os.unlink(parts[-1], dir_fd=dfd)
        os.fsync(dfd)
    except FileNotFoundError:
        pass
    finally:
        os.close(dfd)


def _write_path(path: str, data: bytes) -> None:
    """Atomic write of a state-dir file: 0600, in a 0700 directory."""
    _write_at(os.path.dirname(path), [os.path.basename(path)], data, create=False, mode=0o600)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass



def _all_files(d: str) -> list[str]:
    """Every regular file under `d`, autoharness's own included, never through a symlink."""
    out = []
    for here, _dirs, names in os.walk(d, followlinks=False):
        for name in names:
            full = os.path.join(here, name)
            if not os.path.islink(full) and os.path.isfile(full) and \
                    not name.startswith(TMP_PREFIX):
                out.append(os.path.relpath(full, d).replace(os.sep, "/"))
    return sorted(out)


def _sweep_temps(target: str) -> None:
    if os.path.islink(target) or not os.path.isdir(target):
        return
    for here, _dirs, names in os.walk(target, followlinks=False):
        for name in names:
            if name.startswith(TMP_PREFIX):
                _unlink(os.path.join(here, name))
