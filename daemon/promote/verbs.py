"""The operator's verbs on the library: list, show, history, revert, restore, forget.

Reads never change the tree; revert and restore are landings like any other (planned,
validated, journaled, recorded in history), through the landing desk they are built on.
"""

import os
import shutil

from ...protocol.replies import (
    FeedbackCounts,
    Finding,
    Outcome,
    SkillInfo,
    SkillView,
)
from ..persist.promoter import Stale
from . import (
    adherence,
    attribution,
    feedback,
    fileops,
    forgetting,
    layers,
    lifecycle,
    records,
)
from .lander import Lander
from .layers import same_dir, shape_finding
from .plan import (
    EVIDENCE_DIR,
    PROVENANCE,
    PROVENANCE_DIR,
    SKILL_MD,
    TMP_PREFIX,
    Plan,
)
from .skilltree import read_nofollow, read_provenance, scan_tree

# `show` returns SKILL.md whole; a bigger (hand-written) one is shown empty, not loaded.
MAX_SHOW_BYTES = 1024 * 1024


class Verbs(Lander):
    """The operator's verbs and the listings, on the landing desk."""

    def take_in(self, project_root: str | None) -> None:
        """Take in the project's skills learned in another home (see `attribution`): a no-op,
        with no lock taken, when there are none. Idempotent."""
        if not project_root:
            return
        todo = [(d, anchor) for layer, root, anchor in self.roots(project_root)
                if layer == "project" for d in attribution.skill_dirs(root)
                if not self.statedir.history(d)
                and attribution.taken_in(read_provenance(d), d) is not None]
        if not todo:
            return
        with self.statedir.locked():
            for d, anchor in todo:
                files, links = scan_tree(d)
                last = attribution.taken_in(read_provenance(d), d)
                if self.statedir.history(d) or last is None or links:
                    continue  # taken in meanwhile, changed, or holding a symlink: left as it is
                blobs = {rel: self.statedir.put_blob(data) for rel in sorted(files)
                         if (data := read_nofollow(d, rel)) is not None}
                self.statedir.append_history({
                    "landing": last["landing"], "version": last["version"],
                    "action": attribution.ADOPT, "at": self.clock(), "target": d,
                    "layer": "project", "name": os.path.basename(d), "source": attribution.ADOPT,
                    "reason": "learned by autoharness in another home", "previous": None,
                    "files": blobs})
                self.stamp(d, "project", anchor)  # its probation here starts now

    def list_skills(self, project_root: str | None = None) -> list[SkillInfo]:
        """Live skills of the user layer (and the project's, given its root), then archives."""
        self.refresh_git(project_root)
        self.take_in(project_root)
        out = []
        uses, stamps, stale = self.statedir.uses(), self.statedir.stamps(), self.statedir.stale()
        for layer, root, _ in self.roots(project_root):
            try:
                names = sorted(os.listdir(root))
            except OSError:  # missing, not a directory, unreadable
                continue
            scope = project_root if layer == "project" else None  # whose turns count
            for name in names:
                d = os.path.join(root, name)
                if os.path.isfile(os.path.join(d, SKILL_MD)):
                    out.append(self._info(layer, d, uses, stamps, scope, stale))
        for m in sorted(self.statedir.archives(), key=lambda m: (m["name"], m["landing"])):
            if m["layer"] == "user" or (project_root and same_dir(m["anchor"], project_root)):
                out.append(SkillInfo(name=m["name"], layer=m["layer"], path=m["path"],
                                     owner="autoharness", status="archived",
                                     last_changed=m["archived_at"], version=m.get("version"),
                                     uses=_int(m.get("uses")), turns=_int(m.get("turns")),
                                     stage=lifecycle.ARCHIVED,
                                     reason=m.get("reason") if isinstance(m.get("reason"), str)
                                     else None, feedback=_counts(m.get("feedback"))))
        adherence.attach(self.statedir, out)
        return out


    def show(self, name: str, project_root: str | None = None,
             layer: str | None = None) -> SkillView | None:
        """One skill: its SKILL.md, files, provenance and every verdict in its history; a live
        one, else its latest archive (None when there is neither)."""
        self.refresh_git(project_root)
        self.take_in(project_root)
        found = layers.find_one(name, self.roots(project_root), layer,
                                lambda t: os.path.isfile(os.path.join(t, SKILL_MD)))
        if isinstance(found, Outcome):
            return self._show_archived(name, project_root, layer)
        layer, root, _ = found
        d = os.path.join(root, name)
        listed = self._info(layer, d, self.statedir.uses(), self.statedir.stamps(),
                            project_root if layer == "project" else None, self.statedir.stale())
        adherence.attach(self.statedir, [listed])
        # the landings of autoharness's skills, here or in another home; none for hand-written ones
        return self._view(listed, d, learned=listed.learned is not None)

    def _show_archived(self, name: str, project_root: str | None,
                       layer: str | None) -> SkillView | None:
        archived = [i for i in self.list_skills(project_root)
                    if i.status == "archived" and i.name == name and layer in (None, i.layer)]
        if not archived:
            return None
        i = max(archived, key=lambda i: i.last_changed or 0.0)
        target = next((m["target"] for m in self.statedir.archives() if m["path"] == i.path), None)
        return self._view(i, target, files_at=i.path)

    def _view(self, i: SkillInfo, target: str | None, *, learned: bool = True,
              files_at: str | None = None) -> SkillView:
        """A skill's view: its files where they are (`files_at`, else `target`), and every
        verdict in the history of `target`, where it was landed."""
        d = files_at or target or ""
        prov = read_provenance(d) if learned else None
        data = read_nofollow(d, SKILL_MD, limit=MAX_SHOW_BYTES) or b""
        return SkillView(info=i, skill_md=data.decode("utf-8", "replace"),
                         files=sorted(scan_tree(d)[0]),
                         landings=prov["landings"] if prov else [],
                         verdicts=feedback.verdicts(self.statedir.history(target)) if target else [])

    def history(self, name: str, project_root: str | None = None,
                layer: str | None = None) -> list[dict]:
        """Every landing recorded for `name` (oldest first), archived or live."""
        self.refresh_git(project_root)
        found = layers.find_one(name, self.roots(project_root), layer,
                                lambda t: bool(self.statedir.history(t)))
        if isinstance(found, Outcome):
            return []
        _, root, _ = found
        return self.statedir.history(os.path.join(root, name))


    def revert(self, name: str, to: int | None = None, project_root: str | None = None,
               layer: str | None = None) -> Outcome:
        """Put back an earlier landed version (default: the one before the current); the
        revert is itself a recorded landing."""
        self.take_in(project_root)
        with self.statedir.locked():
            self.sync_git_roots(project_root)
            found = layers.find_one(name, self.roots(project_root), layer,
                                    lambda t: os.path.lexists(t))
            if isinstance(found, Outcome):
                return found
            layer, root, anchor = found
            target = os.path.join(root, name)
            if not self.owned(target):
                return Outcome.rejected(attribution.not_owned(name, target))
            versions = [e for e in self.statedir.history(target) if e.get("files")]
            if to is None:
                chosen = versions[-2] if len(versions) >= 2 else None
            else:
                chosen = next((e for e in versions if e["version"] == to), None)
            if chosen is None:
                return Outcome.rejected(shape_finding(
                    "no_version", f"{name} has no version {to or 'before the current one'}"))
            files = {rel: self.statedir.get_blob(sha).decode()
                     for rel, sha in chosen["files"].items()}
            plan = self.whole_skill(Plan(action="revert", layer=layer, name=name, root=root,
                                         anchor=anchor, state=self.state), files)
            findings = self.check(plan)
            if findings:
                return Outcome.rejected(*findings)
            origin = {"source": "operator", "reason": f"revert to version {chosen['version']}"}
            return self.run(self.write_record(plan, origin, to=chosen["version"]))


    def restore(self, name: str, project_root: str | None = None,
                layer: str | None = None) -> Outcome:
        """Bring the most recent archive of `name` back to where it was archived from."""
        with self.statedir.locked():
            self.sync_git_roots(project_root)
            metas = [m for m in self.statedir.archives()
                     if m["name"] == name and (layer is None or m["layer"] == layer)
                     and (m["layer"] == "user" or project_root is None
                          or same_dir(m["anchor"], project_root))]
            if not metas:
                return Outcome.rejected(shape_finding("missing", f"no archived skill {name}"))
            meta = max(metas, key=lambda m: m["landing"])
            src = os.path.join(meta["path"], "skill")
            files = {rel: data for rel in fileops.all_files(src)
                     if (data := read_nofollow(src, rel)) is not None}
            try:
                texts = {rel: data.decode() for rel, data in files.items()
                         if not rel.startswith(PROVENANCE_DIR + "/")}
            except UnicodeDecodeError:
                return Outcome.rejected(shape_finding("binary", "archived skill holds a non-text file"))
            # Where the layer resolves *now*, checked like a create: the archive's recorded
            # target is only a claim, and the path to it may have been re-pointed since
            # (a `.claude` swapped for a symlink, a project deleted, a config dir moved).
            root, anchor = self.layer_root(meta["layer"], meta["anchor"])
            if root is None:
                return Outcome.rejected(layers.no_project_root(meta["anchor"]))
            target = os.path.join(root, name)
            if target != meta["target"]:
                return Outcome.rejected(Finding(
                    family="contained", code="symlink",
                    message=f"the {meta['layer']} skills dir no longer resolves to where "
                            f"{name} was archived from"))
            plan = Plan(action="restore", layer=meta["layer"], name=name, root=root,
                        anchor=anchor, state=self.state, exists=os.path.lexists(target),
                        skill_md=texts.pop(SKILL_MD, ""), writes=texts)
            findings = []
            if plan.exists:
                findings.append(shape_finding("exists", f"{target} exists: move it first"))
            findings += self.check(plan)
            if findings:
                return Outcome.rejected(*findings)
            # Not of our shape: the restore entry starts a fresh record rather than fail.
            prov = records.parse_provenance(files.get(PROVENANCE) or b"") or {}
            evidence = {rel: data for rel, data in files.items()
                        if rel.startswith(EVIDENCE_DIR + "/")}
            origin = {"source": "operator", "reason": f"restore archive {meta['landing']}"}
            out = self.run(self.write_record(plan, origin, extra=evidence, base_prov=prov))
            if out.status == "landed":
                # Renamed first, so a crash mid-delete leaves a temp the sweep removes, never
                # a half-deleted archive that a later restore could pick.
                gone = os.path.join(os.path.dirname(meta["path"]),
                                    TMP_PREFIX + os.path.basename(meta["path"]))
                os.rename(meta["path"], gone)
                shutil.rmtree(gone, ignore_errors=True)
                self.stamp(target, meta["layer"], meta["anchor"])  # a fresh probation
            return out


    def forget(self, name: str, project_root: str | None = None,
               layer: str | None = None) -> Outcome:
        """Take an autoharness skill out of the live library, restorably; it is not learned
        again until restored (`forgetting`). A hand-written skill is refused, never touched."""
        self.take_in(project_root)
        found = layers.find_one(name, self.roots(project_root), layer,
                                lambda t: os.path.isfile(os.path.join(t, SKILL_MD)))
        if isinstance(found, Outcome):
            return found
        where, root, _ = found
        if not self.owned(os.path.join(root, name)):
            return Outcome.rejected(attribution.not_owned(name, os.path.join(root, name)))
        origin = {"source": "operator", "reason": "forgotten by the user (`autoharnessctl "
                                                  "skills forget`); `skills restore` brings it back"}
        return self.archive_owned(where, name, project_root if where == "project" else None,
                                  origin, reason=forgetting.FORGOTTEN)

    def every_skill(self, projects) -> list[tuple[SkillInfo, str | None]]:
        """Every skill of the user layer and of each known project that exists, once: (info,
        its project)."""
        out: list[tuple[SkillInfo, str | None]] = []
        seen: set[tuple[str, str, str]] = set()
        for root in [None, *sorted(set(projects))]:
            if root is not None and not os.path.isdir(root):
                continue
            for i in self.list_skills(root):
                if (i.status, i.layer, i.path) not in seen:
                    seen.add((i.status, i.layer, i.path))
                    out.append((i, root if i.layer == "project" else None))
        return out

    def archived_since(self, project_root: str | None, since: float,
                       reasons: tuple[str, ...] = lifecycle.URGENCY) -> list[dict]:
        """Archive metadata of skills archived after `since` for one of `reasons`, in the user
        layer or the given project's, oldest first."""
        out = [m for m in self.statedir.archives()
               if m["archived_at"] > since and m.get("reason") in reasons
               and (m["layer"] == "user" or (project_root and same_dir(m["anchor"], project_root)))]
        return sorted(out, key=lambda m: m["landing"])


    def _info(self, layer: str, d: str, uses: dict[str, int], stamps: dict[str, int],
             scope: str | None, stale: Stale | None = None) -> SkillInfo:
        """One live skill's listing. `scope`: the project root whose turns a project skill
        counts (None: user layer); `stale`: the stale marks of the last lifecycle pass."""
        prov = read_provenance(d) if self.owned(d) else None
        elsewhere = read_provenance(d) if prov is None else None  # landed in another home
        landings = (prov or {}).get("landings") or []
        try:
            mtime: float | None = os.stat(os.path.join(d, SKILL_MD)).st_mtime
        except OSError:
            mtime = None
        stamp = stamps.get(d)
        used = uses.get(layers.uses_key(d), 0)
        turns = 0 if stamp is None or not prov else max(0, self.turns(layer, scope) - stamp)
        fb = feedback.counts(self.statedir.history(d))  # hand-written skills' too: shown, not judged
        if prov and layer == "user":  # the user's other machines count too (sync)
            more = self.statedir.synced_counts().get(d, {})
            used, turns = used + more.get("uses", 0), turns + more.get("turns", 0)
            fb = {k: n + more.get(k, 0) for k, n in fb.items()}
        mark = (stale or {}).get(d)
        missing = list(mark.missing) if mark else []
        counts = lifecycle.SkillCounts(name=os.path.basename(d), layer=layer, scope=scope,
                                       owned=bool(prov), uses=used, turns=turns,
                                       helped=fb["helped"], harmful=fb["harmful"],
                                       stale_turns=0 if missing else None)
        stage = lifecycle.stage(counts, self.library.maturity_turns)
        if stage == lifecycle.DORMANT:  # due for archive at the next pass; still graduated
            stage = lifecycle.GRADUATED
        owner = "autoharness" if prov else "user"
        if elsewhere is not None and attribution.learned(elsewhere, here=False):
            owner, stage = attribution.ELSEWHERE, attribution.NOT_MANAGED
        return SkillInfo(name=os.path.basename(d), layer=layer, path=d, owner=owner,
                         learned=attribution.learned(prov or elsewhere, here=prov is not None,
                                                     history=self.statedir.history(d)),
                         created=landings[0]["at"] if landings else None,
                         last_changed=landings[-1]["at"] if landings else mtime,
                         uses=used,
                         version=landings[-1]["version"] if landings else None,
                         turns=turns, stage=stage, feedback=FeedbackCounts(**fb), stale=missing)


def _int(v) -> int:
    return v if type(v) is int else 0


def _counts(v) -> FeedbackCounts:
    v = v if isinstance(v, dict) else {}
    return FeedbackCounts(**{k: _int(v.get(k)) for k in feedback.VERDICTS})
