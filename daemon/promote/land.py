"""The promoter: the only writer of the skill tree.

A change is shaped in memory, validated, and only then landed:

1. every byte to be written (and every byte it replaces) goes into a content-addressed blob
   store in the state dir (`statedir`);
2. a landing record naming target, files and hashes is written to `pending/` (fsynced) —
   before anything in the skill tree changes, so a crash is always recognised as ours;
3. the record is applied (`recovery.complete`): supporting files, then evidence, then
   `SKILL.md` (the commit point), then the provenance file, each temp + fsync + rename +
   directory fsync, through directory fds that refuse symlinks (`fileops`);
4. the version is appended to the skill's history and the landing record removed.

`recover()` at start finishes (or, when the tree no longer looks like ours, abandons) whatever
a crash interrupted, and sweeps temp files. The operator's verbs (list, show, history, revert,
restore) are in `verbs`; where each layer's skills live, in `layers`.

The library's lifecycle (probation, dormancy, capacity: see `lifecycle`) is applied here too,
as archives with a recorded reason, so it is journaled, listed and restorable like any other.
"""

import json
import os
import secrets
import time
from collections.abc import Callable

from claude_autoharness.client.words import plural
from claude_autoharness.daemon.promote import (
    duplicate,
    fileops,
    gitmode,
    guard,
    layers,
    lifecycle,
    memory,
    outcomes,
    recovery,
    skillfile,
    validate,
    verbs,
)
from claude_autoharness.daemon.promote.evidence import evidence_in_window
from claude_autoharness.daemon.promote.layers import Root, shape_finding
from claude_autoharness.daemon.promote.recovery import Recovered
from claude_autoharness.daemon.promote.statedir import StateDir
from claude_autoharness.daemon.promote.validate import (
    PROVENANCE_DIR,
    SKILL_MD,
    TMP_PREFIX,
    Plan,
    read_nofollow,
)
from claude_autoharness.daemon.promote.verbs import EVIDENCE_DIR, PROVENANCE
from claude_autoharness.daemon.proposals import Finding, Intent, Proposal, check_shape, curator_layer
from claude_autoharness.protocol.config import LibraryConfig, PromoterConfig
from claude_autoharness.protocol.replies import Outcome, SkillInfo, SkillView

__all__ = ["Outcome", "Promoter", "Recovered", "SkillInfo", "SkillView"]


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
        self.statedir = StateDir(self.state)

    @property
    def redactor(self):
        if self._redactor is None:
            from claude_autoharness.daemon.capture.redact import default_redactor
            self._redactor = default_redactor()
        return self._redactor

    # -- intents ---------------------------------------------------------------------------

    def promote(self, intent: Intent, window: str | bytes | None,
                project_root: str | None, *, gate=None) -> Outcome:
        """Land the intent, or reject it writing nothing; in review mode, hold what passes.
        `gate()`: a last check once everything else passed (a Finding refuses it)."""
        mode, _ = gitmode.mode_for(project_root if intent.proposal and
                                   intent.proposal.layer == "project" else None, self.cfg)
        return self._promote(intent, window, project_root, hold=mode == "review", gate=gate)

    def approve(self, intent: Intent, window: str | bytes | None,
                project_root: str | None, *, gate=None) -> Outcome:
        """Land a held intent after re-validating it against the tree as it is now."""
        return self._promote(intent, window, project_root, hold=False, gate=gate)

    def _promote(self, intent, window, project_root, *, hold: bool, gate=None) -> Outcome:
        p = intent.proposal
        if p is None:
            return Outcome.rejected(Finding(family="well_formed", code="schema",
                                            message="the proposal was malformed"))
        problems = check_shape(p)
        if problems:  # same family and code as the intent queue uses at intake
            return Outcome.rejected(*[Finding(family="well_formed", code="schema", message=m)
                                      for m in problems])
        root, anchor = self.layer_root(p.layer, project_root)
        if root is None:
            return Outcome.rejected(layers.no_project_root(project_root))
        if isinstance(window, bytes):
            window = window.decode("utf-8", "replace")
        with self.statedir.locked():
            try:
                self._sync_git(root)
            except OSError as e:
                return Outcome.rejected(Finding(family="landing", code="git", message=str(e)))
            done = self._landed_before(os.path.join(root, p.skill), intent.id)
            if done:
                return done
            plan, findings = self._shape(p, root, anchor, project_root)
            findings += self.check(plan)
            findings += guard.scan_fields({"evidence": p.evidence, "reason": p.reason},
                                          self.redactor)
            findings += validate.attributable(p, window)
            if intent.source == "curator":
                findings += _curator_findings(intent, plan, p.evidence)
            if findings:
                return Outcome.rejected(*findings)
            refused = gate() if gate is not None else None
            if refused is not None:
                return Outcome.rejected(refused)
            if hold:
                return Outcome(status="held", skill_path=os.path.join(plan.skill_dir, SKILL_MD))
            origin = {"source": intent.source, "intent": intent.id, "session": intent.session_id,
                      "job": intent.job_id, "reason": p.reason}
            if plan.action == "archive":
                reason = {"curator": "curated", "lifecycle": lifecycle.HARMFUL}.get(
                    intent.source, "proposed")
                return self.run(self.archive_record(plan, origin, reason=reason))
            out = self.run(self.write_record(plan, origin, evidence=p.evidence))
            if out.status == "landed" and plan.action == "create":
                self.stamp(plan.skill_dir, plan.layer, project_root)  # probation starts
            return out

    def _shape(self, p: Proposal, root: str, anchor: str | None,
               project_root: str | None = None) -> tuple[Plan, list[Finding]]:
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
            if plan.exists and self.owned(plan.skill_dir):
                out.append(shape_finding("exists", f"{p.skill} exists: update or patch it"))
            out += duplicates(root, p.skill, description)
            kept = memory.near_lesson(p.skill, description, memory.lessons(project_root))
            if kept is not None:
                out.append(shape_finding(
                    "duplicate", f"{p.skill} repeats a lesson the user already keeps in "
                                 f"{kept.source}: leave it there"))
            plan.skill_md = skillfile.render({"name": p.skill, "description": description}, new_body)
            return plan, out
        if not plan.exists:
            return plan, [shape_finding("missing", f"no skill {p.skill} in the {p.layer} layer")]
        if p.action in ("update", "patch"):
            if live_md is None:
                return plan, [shape_finding("missing", f"{p.skill} has no readable SKILL.md")]
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
                    return plan, [shape_finding("patch_mismatch", f"`old` matches the live "
                                                                   f"body {n} times, not once")]
                body = body.replace(old, new, 1)
            plan.skill_md = skillfile.render(fields, body)
        elif p.action == "add_file":
            plan.writes = {path: p.content or ""}
        elif p.action == "remove_file":
            if path not in plan.live:
                out.append(shape_finding("missing_file", f"{p.skill} has no file {path!r}"))
            plan.removes = [path]
        return plan, out

    # -- the library's lifecycle -------------------------------------------------------------

    def lifecycle_pass(self, project_root: str | None) -> list[lifecycle.Decision]:
        """Archive what the counts and the evidence call for in the user layer (and the
        project's); the archives that landed (see `lifecycle_run`)."""
        return self.lifecycle_run(project_root).done

    def lifecycle_run(self, project_root: str | None, *, hold=None,
                      dry_run: bool = False) -> lifecycle.Pass:
        """One lifecycle pass, at most a share of a layer, with all it decided, held for
        review and asked for (see `outcomes.lifecycle_pass`)."""
        return outcomes.lifecycle_pass(self, project_root, hold=hold, dry_run=dry_run)

    def ground_feedback(self, rec, window: str | bytes | None) -> tuple[str, list[Finding]]:
        """Accept a queued verdict into its skill's history, or say why not (`outcomes`)."""
        if isinstance(window, bytes):
            window = window.decode("utf-8", "replace")
        return outcomes.ground(self, rec, window)

    def retire(self, d: lifecycle.Decision, project_root: str | None) -> Outcome:
        """Archive one skill for a lifecycle reason (`dormant`, `capacity`), recorded in its
        history and archive metadata; `restore` brings it back on a fresh probation."""
        why = d.detail or (f"{d.reason}: {plural(d.uses, 'use')} in {plural(d.turns, 'turn')}"
                           + (" after probation" if d.reason == lifecycle.DORMANT else
                              f", over the {d.layer} layer's capacity"))
        return self.archive_owned(d.layer, d.name, project_root,
                                  {"source": "lifecycle", "reason": why}, reason=d.reason,
                                  uses=d.uses, turns=d.turns)

    def archive_owned(self, layer: str, name: str, project_root: str | None, origin: dict, *,
                      reason: str, uses: int | None = None, turns: int | None = None,
                      meta: dict | None = None) -> Outcome:
        """Archive the autoharness skill `name` of `layer` for `reason`, checked and journaled
        like any landing; `meta`: more facts for its archive metadata (where it came from)."""
        with self.statedir.locked():
            root, anchor = self.layer_root(layer, project_root)
            if root is None:
                return Outcome.rejected(layers.no_project_root(project_root))
            try:
                self._sync_git(root)
            except OSError as e:
                return Outcome.rejected(Finding(family="landing", code="git", message=str(e)))
            plan = Plan(action="archive", layer=layer, name=name, root=root, anchor=anchor,
                        state=self.state)
            if not validate.name_is_contained(name):
                return Outcome.rejected(Finding(family="contained", code="name",
                                       message="not a plain skill name"))
            plan.exists = os.path.lexists(plan.skill_dir)
            if not plan.exists or not self.owned(plan.skill_dir):
                return Outcome.rejected(Finding(family="owned", code="not_owned",
                                       message=f"{name} is not an autoharness skill"))
            plan.live = validate.scan_tree(plan.skill_dir)[0]
            findings = self.check(plan)
            if findings:
                return Outcome.rejected(*findings)
            rec = self.archive_record(plan, origin, reason=reason, uses=uses, turns=turns)
            rec["meta"].update(meta or {})
            return self.run(rec)

    def archived_since(self, project_root: str | None, since: float,
                       reasons: tuple[str, ...] = lifecycle.URGENCY) -> list[dict]:
        """Archive metadata of skills archived after `since` for one of `reasons`, in the user
        layer or the given project's, oldest first."""
        return verbs.archived_since(self, project_root, since, reasons)

    def stale_skills(self, project_root: str | None) -> list[tuple[str, list[str]]]:
        """(name, missing paths) of the project's live skills the last pass found stale."""
        root, _ = self.layer_root("project", project_root) if project_root else (None, None)
        if root is None:
            return []
        return sorted((os.path.basename(d), m["missing"]) for d, m in self.statedir.stale().items()
                      if os.path.dirname(d) == root and os.path.isfile(os.path.join(d, SKILL_MD)))

    def stamp(self, skill_dir: str, layer: str, anchor: str | None, *,
              keep_uses: bool = False) -> None:
        """Start the skill's probation: its turns count from now (and its uses, unless kept)."""
        self.statedir.stamp(skill_dir, self.turns(layer, anchor),
                            forget_uses_at=None if keep_uses else layers.uses_key(skill_dir))

    def record_use(self, path: str) -> str | None:
        """Count one use of the skill at `path` (its dir or its SKILL.md); return the dir."""
        p = os.path.realpath(path)
        d = os.path.dirname(p) if os.path.basename(p) == SKILL_MD else p
        if not os.path.isfile(os.path.join(d, SKILL_MD)):
            return None
        self.statedir.count_use(d)
        return d

    def locate(self, name: str, project_root: str | None = None) -> list[str]:
        """Live skill directories named `name`, project layer first."""
        return [os.path.join(root, name) for _, root, _ in self.roots(project_root)
                if os.path.isfile(os.path.join(root, name, SKILL_MD))]

    # -- the operator's verbs (see `verbs`) ------------------------------------------------

    def list_skills(self, project_root: str | None = None) -> list[SkillInfo]:
        return verbs.list_skills(self, project_root)

    def show(self, name: str, project_root: str | None = None,
             layer: str | None = None) -> SkillView | None:
        return verbs.show(self, name, project_root, layer)

    def history(self, name: str, project_root: str | None = None,
                layer: str | None = None) -> list[dict]:
        return verbs.history(self, name, project_root, layer)

    def revert(self, name: str, to: int | None = None, project_root: str | None = None,
               layer: str | None = None) -> Outcome:
        return verbs.revert(self, name, to, project_root, layer)

    def restore(self, name: str, project_root: str | None = None,
                layer: str | None = None) -> Outcome:
        return verbs.restore(self, name, project_root, layer)

    # -- crash recovery (see `recovery`) ---------------------------------------------------

    def recover(self) -> list[Recovered]:
        """Finish or abandon landings a crash interrupted; sweep temp files. Call at start."""
        return recovery.recover(self.statedir)

    # -- landing ---------------------------------------------------------------------------

    def check(self, plan: Plan) -> list[Finding]:
        """Every validation a planned change must pass before it lands."""
        return validate.check(plan, max_body_lines=self.cfg.max_body_lines,
                              redactor=self.redactor)

    def owned(self, skill_dir: str) -> bool:
        return validate.is_owned(skill_dir, self.state)

    def write_record(self, plan: Plan, origin: dict, *, evidence: str | None = None,
                      extra: dict[str, bytes] | None = None, base_prov: dict | None = None,
                      to: int | None = None) -> dict:
        """The landing record for a plan that writes files; every blob it names is stored."""
        target = plan.skill_dir
        now = self.clock()
        landing = _landing_id(now)
        history = self.statedir.history(target)
        version = history[-1]["version"] + 1 if history else 1
        new = [(rel, plan.writes[rel].encode()) for rel in sorted(plan.writes)]
        new += sorted((extra or {}).items())
        ev_rel = None
        if evidence:
            ev = self.redactor.redact(evidence)[0].encode()
            ev_rel = f"{EVIDENCE_DIR}/{fileops.sha(ev)}.txt"
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
            "evidence": ev_rel, "previous": fileops.sha_or_none(prev_md),
            "skill_md": fileops.sha_or_none(new_md),
            **{k: origin[k] for k in ("machine", "origin_at") if origin.get(k) is not None},
        })
        new.append((PROVENANCE, json.dumps(prov, indent=1).encode()))

        writes: list[list[str | None]] = []  # [rel, new blob, old blob or None]
        for rel, data in new:
            old = read_nofollow(target, rel) if plan.exists else None
            writes.append([rel, self.statedir.put_blob(data),
                           None if old is None else self.statedir.put_blob(old)])
        removes = [[rel, self.statedir.put_blob(read_nofollow(target, rel) or b"")]
                   for rel in plan.removes]
        manifest = {}
        for rel in plan.live:
            if rel not in plan.removes:
                manifest[rel] = self.statedir.put_blob(read_nofollow(target, rel) or b"")
        manifest.update({str(rel): str(sha) for rel, sha, _ in writes
                         if not str(rel).startswith(PROVENANCE_DIR + "/")})
        entry = {"landing": landing, "version": version, "action": plan.action, "at": now,
                 "target": target, "layer": plan.layer, "name": plan.name,
                 "source": origin.get("source"), "intent": origin.get("intent"),
                 "session": origin.get("session"), "reason": reason, "evidence": ev_rel,
                 "previous": fileops.sha_or_none(prev_md),
                 "files": manifest}
        if to is not None:
            entry["to"] = to
        return {"id": landing, "op": "write", "target": target, "anchor": plan.anchor,
                "created_dir": not plan.exists, "writes": writes, "removes": removes,
                "history": entry}

    def archive_record(self, plan: Plan, origin: dict, *, reason: str,
                        uses: int | None = None, turns: int | None = None) -> dict:
        target = plan.skill_dir
        now = self.clock()
        landing = _landing_id(now)
        history = self.statedir.history(target)
        version = history[-1]["version"] + 1 if history else 1
        dest = self.statedir.p("archive", plan.name, landing)
        prev_md = read_nofollow(target, SKILL_MD)
        entry = {"landing": landing, "version": version, "action": "archive", "at": now,
                 "target": target, "layer": plan.layer, "name": plan.name,
                 "source": origin.get("source"), "intent": origin.get("intent"),
                 "session": origin.get("session"),
                 "reason": self.redactor.redact(origin.get("reason") or "")[0],
                 "previous": fileops.sha_or_none(prev_md), "files": {}, "archive": dest}
        git_target = gitmode.target_of_root(plan.root)
        anchor = git_target.project if git_target else plan.anchor  # restore asks by project
        if uses is None:  # what `skills list` shows for the archive
            uses = self.statedir.uses().get(layers.uses_key(target), 0)
        if turns is None:
            stamp = self.statedir.stamps().get(target)
            turns = 0 if stamp is None else max(0, self.turns(plan.layer, anchor) - stamp)
        entry["retired"] = reason
        meta = {"name": plan.name, "layer": plan.layer, "target": target, "anchor": anchor,
                "archived_at": now, "landing": landing, "version": version, "reason": reason,
                "uses": uses, "turns": turns, "why": entry["reason"],
                "feedback": outcomes.feedback.counts(history)}
        return {"id": landing, "op": "archive", "target": target, "anchor": plan.anchor,
                "archive_to": dest, "meta": meta, "history": entry}

    def run(self, rec: dict) -> Outcome:
        """Journal the record, then apply it; an I/O failure is rolled back and reported."""
        recovery.attach_git(self.statedir, rec)
        self.statedir.put_pending(rec)
        try:
            recovery.complete(self.statedir, rec)
        except OSError as e:
            try:
                recovery.rollback(self.statedir, rec)
            except OSError:
                raise e from None  # the record stays pending; recover() retries at start
            self.statedir.drop(rec)
            return Outcome.rejected(Finding(family="landing", code="io_error", message=str(e)))
        entry = rec["history"]
        path = entry.get("archive") or os.path.join(rec["target"], SKILL_MD)
        return Outcome(status="landed", skill_path=path, version=entry["version"])

    def _landed_before(self, target: str, intent_id: str) -> Outcome | None:
        # At-least-once delivery from the queue: a replayed intent reports its landing again.
        for e in self.statedir.history(target):
            if e.get("intent") == intent_id:
                path = e.get("archive") or os.path.join(target, SKILL_MD)
                return Outcome(status="landed", skill_path=path, version=e["version"])
        return None

    # -- git mode and layers ---------------------------------------------------------------

    def _sync_git(self, root: str) -> None:
        """Bring a git-mode mirror up to its branch tip (lock held; no-op for other roots)."""
        t = gitmode.target_of_root(root)
        if t is not None:
            gitmode.sync(t)

    def sync_git_roots(self, project_root: str | None) -> None:
        for _, root, _ in self.roots(project_root):
            self._sync_git(root)

    def refresh_git(self, project_root: str | None) -> None:
        """For readers: sync git-mode mirrors under the lock (never while a landing writes)."""
        if any(gitmode.target_of_root(r) for _, r, _ in self.roots(project_root)):
            with self.statedir.locked():
                self.sync_git_roots(project_root)

    def layer_root(self, layer: str, project_root: str | None) -> tuple[str | None, str | None]:
        return layers.layer_root(layer, project_root, self.cfg, self.state)

    def roots(self, project_root: str | None) -> list[Root]:
        return layers.roots(project_root, self.cfg, self.state)


def _landing_id(now: float) -> str:
    # Sortable by time, so recover() replays in landing order.
    return f"{int(now * 1000):013d}-{secrets.token_hex(4)}"


def _curator_findings(intent: Intent, plan: Plan, evidence: str) -> list[Finding]:
    """The curator is shown one layer: it changes that layer only. It archives a skill only on
    a quote of that very skill (what was absorbed elsewhere, or what is obsolete): a quote of
    another skill sent with it does not do."""
    asked = curator_layer(intent.session_id)
    if asked is not None and asked != plan.layer:
        return [shape_finding("wrong_layer", f"the curator was shown the {asked} layer, "
                                              f"not the {plan.layer} layer")]
    if plan.action != "archive":
        return []
    live = read_nofollow(plan.skill_dir, SKILL_MD) if plan.exists else None
    if live is not None and evidence_in_window(evidence, live.decode("utf-8", "replace")):
        return []
    return [Finding(family="attributable", code="evidence_not_found",
                    message=f"the evidence is not a quote of {plan.name}, the skill archived")]


def duplicates(root: str, name: str, description: str) -> list[Finding]:
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
            out.append(shape_finding(
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
