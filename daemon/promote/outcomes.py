"""The promoter's side of evidence: grounding verdicts into skill history, and the library's
lifecycle pass (the checks that need no model: stale paths, description repairs due; then the
archives the counts and the evidence call for).

Every write here is a history entry or the stale marks, under the promoter's lock; nothing in
the skill tree changes except through the ordinary landings (archives go through
`archive_owned`). In review mode a harmful archive is not landed: the pass returns it in
`held`, and the caller holds it for the user and reports back with `note_held`.
"""

import os
import secrets
from dataclasses import dataclass, field

from ...protocol.replies import Outcome
from ...protocol.words import plural
from ..listing import capacity
from ..listing.predict import DEFAULT_MAX_DESC as MAX_LISTED_DESC
from ..persist.promoter import Stale, StaleMark
from ..proposals import Finding, VerdictRecord
from . import (
    adherence,
    feedback,
    gitmode,
    layers,
    lifecycle,
    loads,
    stale,
    validate,
)
from .plan import SKILL_MD
from .skilltree import read_nofollow
from .verbs import Verbs

HELD = "held"  # history action: an archive the evidence calls for waits for the user


@dataclass
class Checked:
    """What one pass found: stale skills (dir -> turns stale) and layers owing a repair."""

    stale_turns: dict[str, int] = field(default_factory=dict)
    repairs: list[tuple[str, str]] = field(default_factory=list)  # (layer, skill name)
    newly_stale: list[str] = field(default_factory=list)  # owned skills found stale this pass


class Outcomes(Verbs):
    """Verdicts grounded into history and the lifecycle pass, on the landing desk."""

    def ground_feedback(self, rec: VerdictRecord,
                        window: str | bytes | None) -> tuple[str, list[Finding]]:
        """Accept a queued verdict into its skill's history (`accepted`, once), or say why not
        (`rejected` with the reasons)."""
        if isinstance(window, bytes):
            window = window.decode("utf-8", "replace")
        v = rec.verdict
        if v is None:
            return "rejected", [Finding(family="well_formed", code="schema",
                                        message="the verdict was malformed")]
        root, _anchor = self.layer_root(v.layer, rec.project_root)
        if root is None:
            return "rejected", [layers.no_project_root(rec.project_root)]
        if not validate.name_is_contained(v.skill):
            return "rejected", [Finding(family="contained", code="name",
                                        message="not a plain skill name")]
        with self.statedir.locked():
            try:
                self.sync_git_roots(rec.project_root if v.layer == "project" else None)
            except OSError as e:
                return "rejected", [Finding(family="landing", code="git", message=str(e))]
            target = os.path.join(root, v.skill)
            entries = self.statedir.history(target)
            if any(e.get("landing") == "fb-" + rec.id for e in entries):
                return "accepted", []  # recorded before a crash took the queue's update
            if rec.job_id and any(e.get("action") == feedback.FEEDBACK
                                  and e.get("job") == rec.job_id for e in entries):
                return "rejected", [Finding(family="grounded", code="repeated",
                                            message=f"a second verdict on {v.skill} for one window")]
            seen = loads.Layers.of(rec.project_root)
            who = (v.layer, v.skill)
            findings = feedback.ground(
                v.verdict, v.skill, v.layer, window,
                exists=os.path.isfile(os.path.join(target, SKILL_MD)),
                loaded=window is not None and who in loads.resolve(loads.refs(window), seen),
                loaded_before=who in loads.resolve(rec.loaded_before, seen))
            if findings:
                return "rejected", findings
            version = feedback.judged_version(entries, rec.window_at or None)
            quote = self.redactor.redact(v.evidence)[0]
            self.statedir.append_history(feedback.entry(rec, target, v.layer, v.skill, version,
                                                        self.clock(), quote))
        return "accepted", []

    # -- the lifecycle pass ------------------------------------------------------------------

    def lifecycle_run(self, project_root: str | None, *, dry_run: bool = False) -> lifecycle.Pass:
        """Archive what the counts and the evidence call for in the user layer (and the
        project's): harmful and stale skills, dormant ones after probation, then the lowest
        usage rates past a layer's capacity; at most a share of a layer per pass. Checks the
        project's skills for stale paths and asks for description repairs first.

        In review mode a `harmful` archive is returned in `held` (with the skill's dir and its
        grounded harmful quotes) instead of landing. An autoharness skill without a turn stamp
        (it predates this, or its landing was recovered after a crash) starts its probation
        now. `dry_run`: decide and report, write nothing."""
        listed = [i for i in self.list_skills(project_root) if i.status == "live"]
        infos = [i for i in listed if i.owner == "autoharness"]
        if dry_run:
            checked = Checked(stale_turns={
                i.path: max(0, self.turns(i.layer, project_root) - m.since)
                for i in infos if (m := self.statedir.stale().get(i.path))})
        else:
            stamps = self.statedir.stamps()
            for i in [i for i in infos if i.path not in stamps]:
                self.stamp(i.path, i.layer, project_root if i.layer == "project" else None,
                           keep_uses=True)
            checked = self._check(project_root, listed)
        result = self._decide(project_root, infos, checked)
        if not dry_run:
            by_name = {(i.layer, i.name): i for i in infos}
            for d in result.planned:
                self._carry_out(d, by_name[(d.layer, d.name)].path, project_root, result)
        return result

    def _decide(self, project_root: str | None, infos, checked: Checked) -> lifecycle.Pass:
        chars = {(i.layer, i.name): capacity.skill_chars(i.path, i.name, MAX_LISTED_DESC)
                 for i in infos}
        counts = [lifecycle.SkillCounts(  # an unstamped skill was listed with 0 turns
            name=i.name, layer=i.layer, scope=project_root if i.layer == "project" else None,
            owned=True, uses=i.uses + adherence.acted(i.check), turns=i.turns,
            helped=i.feedback.helped, harmful=i.feedback.harmful + adherence.insisted(i.check),
            stale_turns=checked.stale_turns.get(i.path), chars=chars[(i.layer, i.name)])
            for i in infos]
        lib = self.library
        every = lifecycle.decide(counts, maturity_turns=lib.maturity_turns,
                                 capacity_project=lib.capacity_project,
                                 capacity_user=lib.capacity_user,
                                 stale_after_turns=lib.stale_after_turns,
                                 chars_caps=capacity.caps(project_root, self.listing, chars))
        by_name = {(i.layer, i.name): i for i in infos}
        marks = self.statedir.stale()
        decisions = []
        for d in lifecycle.bounded(every, counts, lib.max_archive_share):
            i = by_name[(d.layer, d.name)]
            decisions.append(adherence.explained(
                lifecycle.explained(d, i.feedback, marks.get(i.path)), i.check))
        return lifecycle.Pass(planned=decisions, held_back=len(every) - len(decisions),
                              repairs=checked.repairs, newly_stale=checked.newly_stale)

    def _carry_out(self, d: lifecycle.Decision, path: str, project_root: str | None,
                   result: lifecycle.Pass) -> None:
        mode, _ = gitmode.mode_for(project_root if d.layer == "project" else None, self.cfg)
        if d.reason == lifecycle.HARMFUL and mode == "review":
            quotes = [v["quote"] for v in feedback.verdicts(self.statedir.history(path))
                      if v["verdict"] == "harmful" and v["current"]]
            result.held.append(lifecycle.Held(decision=d, path=path, quotes=quotes))
        elif self.retire(d, project_root).status == "landed":
            result.done.append(d)

    def note_held(self, held: lifecycle.Held) -> None:
        """A harmful archive the caller newly held for the user: the decision and its reason
        go in the skill's history."""
        with self.statedir.locked():
            self._mark(held.path, held.decision.layer, HELD,
                       held.decision.detail + "; held for review")

    def retire(self, d: lifecycle.Decision, project_root: str | None) -> Outcome:
        """Archive one skill for a lifecycle reason (`dormant`, `capacity`), recorded in its
        history and archive metadata; `restore` brings it back on a fresh probation."""
        why = d.detail or (f"{d.reason}: {plural(d.uses, 'use')} in {plural(d.turns, 'turn')}"
                           + (" after probation" if d.reason == lifecycle.DORMANT else
                              f", over the {d.layer} layer's capacity"))
        return self.archive_owned(d.layer, d.name, project_root,
                                  {"source": "lifecycle", "reason": why}, reason=d.reason,
                                  uses=d.uses, turns=d.turns)

    # -- the checks that need no model ---------------------------------------------------------

    def _mark(self, target: str, layer: str, action: str, reason: str, **extra) -> None:
        """A history entry that changes no file: a decision and its reason (lock held)."""
        entries = self.statedir.history(target)
        now = self.clock()
        self.statedir.append_history({
            "landing": f"{action}-{int(now * 1000):013d}-{secrets.token_hex(4)}",
            "action": action, "version": entries[-1]["version"] if entries else 0, "files": {},
            "at": now, "target": target, "layer": layer, "name": os.path.basename(target),
            "source": "lifecycle", "reason": reason, **extra})

    def _check(self, project_root: str | None, infos) -> Checked:
        """Stale paths of the project's skills (marked, and cleared when they are back), and
        description repairs due (asked once per two new misses). `infos`: the live skills."""
        out = Checked()
        tree = stale.Tree(project_root) if project_root else None
        found: dict[str, list[str]] = {}  # listed (git) before the lock: landings need not wait
        for i in infos:
            if i.layer == "project" and tree is not None:
                data = read_nofollow(i.path, SKILL_MD, limit=256 * 1024) or b""
                found[i.path] = stale.missing_paths(i.path, data.decode("utf-8", "replace"), tree)
        with self.statedir.locked():
            marks = self.statedir.stale()
            before = dict(marks)
            for i in infos:
                if i.path in found:
                    self._stale_mark(i, found[i.path], marks, project_root, out)
            if project_root:  # marks of skills that are gone (archived, removed) go too
                live = {i.path for i in infos}
                for d in [d for d in marks if d not in live and _under(d, project_root)]:
                    del marks[d]
            if marks != before:
                self.statedir.set_stale(marks)
            for i in infos:
                entries = self.statedir.history(i.path) if i.owner == "autoharness" else []
                if feedback.needs_repair(entries):
                    n = len(feedback.missed_quotes(entries))
                    self._mark(i.path, i.layer, feedback.REPAIR_ASKED,
                               f"repair: missed {n} times; the curator is asked to repair its "
                               "description")
                    out.repairs.append((i.layer, i.name))
        return out

    def _stale_mark(self, i, missing: list[str], marks: Stale,
                    project_root: str | None, out: Checked) -> None:
        """Mark one project skill stale (or fresh again) in `marks` and, when it is ours, in
        its history (lock held)."""
        owned = i.owner == "autoharness"
        old = marks.get(i.path)
        if missing:
            now = self.turns("project", project_root)
            since = old.since if old else now
            marks[i.path] = StaleMark(since=since, missing=missing)
            if owned and (old is None or old.missing != missing):
                out.newly_stale.append(i.name)
                self._mark(i.path, "project", feedback.STALE_MARK,
                           "stale: names paths that are gone: " + ", ".join(missing),
                           missing=missing)
            if owned:
                out.stale_turns[i.path] = max(0, now - since)
        elif old is not None:
            del marks[i.path]
            if owned:
                self._mark(i.path, "project", feedback.FRESH_MARK,
                           "fresh: the paths it names exist again: " + ", ".join(old.missing))


def _under(path: str, root: str) -> bool:
    root = os.path.realpath(root)
    return os.path.realpath(path).startswith(root + os.sep)
