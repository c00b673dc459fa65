"""The landing desk: plans checked and landed, one record at a time.

1. every byte to be written (and every byte it replaces) goes into a content-addressed blob
   store in the state dir (`statedir`);
2. a landing record naming target, files and hashes is written to `pending/` (fsynced) —
   before anything in the skill tree changes, so a crash is always recognised as ours;
3. the record is applied (`recovery.complete`): supporting files, then evidence, then
   `SKILL.md` (the commit point), then the provenance file, each temp + fsync + rename +
   directory fsync, through directory fds that refuse symlinks (`fileops`);
4. the version is appended to the skill's history and the landing record removed.

What a plan is checked against is read from the tree (`observe`) and judged without I/O
(`validate`). The operator's verbs and the lifecycle (`verbs`, `outcomes`) land through this
desk; `land.Promoter` adds the intents and the public face.
"""

import json
import os
import secrets
import time
from collections.abc import Callable

from ...protocol.config import LibraryConfig, ListingConfig, PromoterConfig
from ...protocol.replies import Outcome
from ..proposals import Finding
from . import (
    feedback,
    fileops,
    gitmode,
    layers,
    records,
    recovery,
    skillfile,
    validate,
)
from .layers import Root
from .observe import is_owned, observe
from .plan import (
    EVIDENCE_DIR,
    PROVENANCE,
    PROVENANCE_DIR,
    SKILL_MD,
    Plan,
)
from .records import ArchiveLanding, WriteLanding
from .shape import duplicates
from .skilltree import read_nofollow, read_provenance, scan_tree
from .statedir import StateDir, promote_state_dir


class Lander:
    """Checks and lands plans; safe to call from one thread at a time per process, and
    landings are serialised across processes by the state dir's file lock."""

    def __init__(self, cfg: PromoterConfig, *, redactor=None, clock=time.time,
                 library: LibraryConfig | None = None,
                 listing: ListingConfig | None = None,
                 turns: Callable[[str, str | None], int] | None = None,
                 statedir: StateDir | None = None):
        self.cfg = cfg
        self.clock = clock
        self._redactor = redactor
        self.library = library or LibraryConfig()
        self.listing = listing or ListingConfig()  # the library's share of the skill listing
        # (layer, project root) -> turns counted so far in that layer; the daemon owns them
        self.turns = turns or (lambda layer, anchor: 0)
        # the promoter's own store, injected (default: the state dir's `promote/`)
        self.statedir = statedir or StateDir(promote_state_dir())
        self.state = self.statedir.path
        self.compiled_checks: list[dict] = []  # the check table last written
        self.checks_seen: tuple | None = None  # the library's stamp when it was written

    @property
    def redactor(self):
        if self._redactor is None:
            from ..capture.redact import default_redactor
            self._redactor = default_redactor()
        return self._redactor

    def check(self, plan: Plan) -> list[Finding]:
        """Every validation a planned change must pass before it lands."""
        return validate.check(plan, observe(plan), max_body_lines=self.cfg.max_body_lines,
                              max_description=self.cfg.max_description_chars,
                              redactor=self.redactor, home=os.path.expanduser("~"))

    def owned(self, skill_dir: str) -> bool:
        return is_owned(skill_dir, self.state)

    def write_record(self, plan: Plan, origin: dict, *, evidence: str | None = None,
                      extra: dict[str, bytes] | None = None, base_prov: dict | None = None,
                      to: int | None = None) -> WriteLanding:
        """The landing record for a plan that writes files; every blob it names is stored."""
        target = plan.skill_dir
        now = self.clock()
        landing = landing_id(now)
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
        prov = base_prov or (read_provenance(target) if plan.exists else None) or {}
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

        writes: list[tuple[str, str, str | None]] = []
        for rel, data in new:
            old = read_nofollow(target, rel) if plan.exists else None
            writes.append((rel, self.statedir.put_blob(data),
                           None if old is None else self.statedir.put_blob(old)))
        removes = [(rel, self.statedir.put_blob(read_nofollow(target, rel) or b""))
                   for rel in plan.removes]
        manifest = {}
        for rel in plan.live:
            if rel not in plan.removes:
                manifest[rel] = self.statedir.put_blob(read_nofollow(target, rel) or b"")
        manifest.update({rel: sha for rel, sha, _ in writes
                         if not rel.startswith(PROVENANCE_DIR + "/")})
        entry = {"landing": landing, "version": version, "action": plan.action, "at": now,
                 "target": target, "layer": plan.layer, "name": plan.name,
                 "source": origin.get("source"), "intent": origin.get("intent"),
                 "session": origin.get("session"), "reason": reason, "evidence": ev_rel,
                 "previous": fileops.sha_or_none(prev_md),
                 "files": manifest}
        if to is not None:
            entry["to"] = to
        return WriteLanding(id=landing, target=target, anchor=plan.anchor, history=entry,
                            created_dir=not plan.exists, writes=writes, removes=removes)

    def archive_record(self, plan: Plan, origin: dict, *, reason: str,
                        uses: int | None = None, turns: int | None = None) -> ArchiveLanding:
        target = plan.skill_dir
        now = self.clock()
        landing = landing_id(now)
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
                "feedback": feedback.counts(history)}
        return ArchiveLanding(id=landing, target=target, anchor=plan.anchor, history=entry,
                              archive_to=dest, meta=meta)

    def run(self, rec: WriteLanding | ArchiveLanding) -> Outcome:
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
        entry = rec.history
        path = entry.get("archive") or os.path.join(rec.target, SKILL_MD)
        return Outcome(status="landed", skill_path=path, version=entry["version"])

    def landed_before(self, target: str, intent_id: str) -> Outcome | None:
        # At-least-once delivery from the queue: a replayed intent reports its landing again.
        for e in self.statedir.history(target):
            if e.get("intent") == intent_id:
                path = e.get("archive") or os.path.join(target, SKILL_MD)
                return Outcome(status="landed", skill_path=path, version=e["version"])
        return None

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
                self.sync_git(root)
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
            plan.live = scan_tree(plan.skill_dir)[0]
            findings = self.check(plan)
            if findings:
                return Outcome.rejected(*findings)
            rec = self.archive_record(plan, origin, reason=reason, uses=uses, turns=turns)
            rec.meta.update(meta or {})
            return self.run(rec)

    def whole_skill(self, plan: Plan, texts: dict[str, str]) -> Plan:
        """`plan` with `texts` (SKILL.md among them) as the skill's whole content: what differs
        from the tree is written, what else the tree holds is removed."""
        target = plan.skill_dir
        plan.exists = os.path.lexists(target)
        plan.live = scan_tree(target)[0] if plan.exists else {}
        plan.skill_md = texts.get(SKILL_MD)
        plan.writes = {rel: t for rel, t in texts.items()
                       if rel != SKILL_MD and read_nofollow(target, rel) != t.encode()}
        plan.removes = sorted(r for r in plan.live if r not in texts and r != SKILL_MD)
        return plan

    def land_user_skill(self, name: str, texts: dict[str, str], origin: dict, *, create: bool,
                        extra: dict[str, bytes], base_prov: dict,
                        also: list[Finding]) -> Outcome:
        """Land `texts` as the whole content of the autoharness skill `name` of the user layer
        (a sync round's take-in): checked like any landing (a create against the duplicate
        guard too), journaled, on a fresh probation when created. `extra`: files beside it
        (evidence); `also`: findings the caller made, refused with the rest."""
        root, anchor = self.layer_root("user", None)
        assert root is not None  # the user layer always resolves
        with self.statedir.locked():
            if not validate.name_is_contained(name):
                return Outcome.rejected(Finding(family="contained", code="name",
                                                message="not a plain skill name"))
            plan = self.whole_skill(Plan(action="create" if create else "update", layer="user",
                                         name=name, root=root, anchor=anchor, state=self.state),
                                    texts)
            findings = self.check(plan) + also
            if create:
                findings += duplicates(root, name, skillfile.description(texts[SKILL_MD]))
            if findings:
                return Outcome.rejected(*findings)
            if plan.exists and not base_prov:
                base_prov = read_provenance(plan.skill_dir) or {}
            out = self.run(self.write_record(plan, origin, extra=extra, base_prov=base_prov))
        if out.status == "landed" and create:
            self.stamp(plan.skill_dir, "user", None)  # its probation starts here
        return out

    def stamp(self, skill_dir: str, layer: str, anchor: str | None, *,
              keep_uses: bool = False) -> None:
        """Start the skill's probation: its turns count from now (and its uses, unless kept)."""
        self.statedir.stamp(skill_dir, self.turns(layer, anchor),
                            forget_uses_at=None if keep_uses else layers.uses_key(skill_dir))

    # -- counts and history, for the library's readers -------------------------------------

    def archives(self) -> list[dict]:
        """The meta of every archive of our shape, in any layer."""
        return self.statedir.archives()

    def history_at(self, target: str) -> list[dict]:
        """Every landing and verdict recorded for the skill dir `target`, oldest first."""
        return self.statedir.history(target)

    def all_history(self) -> list[dict]:
        """Every history entry recorded, for every target (each entry naming its target),
        oldest first."""
        out = [dict(e, target=e.get("target", target))
               for target, entries in records.histories(self.state) for e in entries
               if isinstance(e.get("at"), int | float) and isinstance(e.get("action"), str)]
        return sorted(out, key=lambda e: (e["at"], str(e.get("landing"))))

    def own_counts(self, targets: list[str]) -> dict[str, dict[str, int]]:
        """This machine's own counts of the user skills at `targets` that started their
        probation: uses, turns since, verdicts by kind."""
        uses, stamps, now = self.statedir.uses(), self.statedir.stamps(), self.turns("user", None)
        return {t: {"uses": uses.get(layers.uses_key(t), 0), "turns": max(0, now - stamps[t]),
                    **feedback.counts(self.statedir.history(t))} for t in targets if t in stamps}

    def take_synced_counts(self, counts: dict[str, dict[str, int]]) -> None:
        """Skill dir → what the user's other machines counted (a sync round's sums); the
        listing adds them to this machine's own."""
        self.statedir.put_synced_counts(counts)

    # -- git mode and layers ---------------------------------------------------------------

    def sync_git(self, root: str) -> None:
        """Bring a git-mode mirror up to its branch tip (lock held; no-op for other roots)."""
        t = gitmode.target_of_root(root)
        if t is not None:
            gitmode.sync(t)

    def sync_git_roots(self, project_root: str | None) -> None:
        for _, root, _ in self.roots(project_root):
            self.sync_git(root)

    def refresh_git(self, project_root: str | None) -> None:
        """For readers: sync git-mode mirrors under the lock (never while a landing writes)."""
        if any(gitmode.target_of_root(r) for _, r, _ in self.roots(project_root)):
            with self.statedir.locked():
                self.sync_git_roots(project_root)

    def layer_root(self, layer: str, project_root: str | None) -> tuple[str | None, str | None]:
        return layers.layer_root(layer, project_root, self.cfg, self.state)

    def roots(self, project_root: str | None) -> list[Root]:
        return layers.roots(project_root, self.cfg, self.state)



def landing_id(now: float) -> str:
    # Sortable by time, so recover() replays in landing order.
    return f"{int(now * 1000):013d}-{secrets.token_hex(4)}"


