"""The promoter: the only writer of the skill tree, and its public face.

One service, its state dir injected at construction, built in layers that read top to
bottom: the landing desk (`lander`: a plan's blobs, a journaled landing record, the record
applied by `recovery`, the history appended), the operator's verbs on it (`verbs`: list,
show, history, revert, restore, forget), the grounding of verdicts and the library's
lifecycle (`outcomes`: probation, dormancy, capacity, see `lifecycle`), and here the intents:
shaped in memory into a plan (`shape`), checked (`observe` reads the tree, `validate` judges
without I/O) and only then landed. `recover()` at start finishes (or, when the tree no longer
looks like ours, abandons) whatever a crash interrupted, and sweeps temp files.
"""

import os

from ...protocol import paths
from ...protocol.replies import LessonCheck, Outcome, SkillCheck
from ..proposals import Finding, Intent, check_shape
from . import (
    adherence,
    checks,
    checktable,
    feedback,
    forgetting,
    gitmode,
    guard,
    layers,
    lifecycle,
    recovery,
    shape,
    validate,
)
from .outcomes import Outcomes
from .plan import SKILL_MD
from .recovery import Recovered


class Promoter(Outcomes):
    """Validates and lands intents, runs the lifecycle and the operator's verbs; every
    method is safe to call from one thread at a time per process, and landings are
    serialised across processes by a file lock."""

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
        """Land a held intent after re-validating it against the tree as it is now; the user
        approved it, so a check it carries is confirmed."""
        return self._promote(intent, window, project_root, hold=False, gate=gate, approved=True)

    def _promote(self, intent, window, project_root, *, hold: bool, gate=None,
                 approved: bool = False) -> Outcome:
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
                self.sync_git(root)
            except OSError as e:
                return Outcome.rejected(Finding(family="landing", code="git", message=str(e)))
            done = self.landed_before(os.path.join(root, p.skill), intent.id)
            if done:
                return done
            plan, findings = shape.shape(p, root, anchor, project_root, state=self.state,
                                         owned=self.owned)
            if plan.action == "create":
                findings += forgetting.refused(self.statedir.archives(), plan,
                                               p.description or "", project_root)
            findings += self.check(plan)
            findings += guard.scan_fields({"evidence": p.evidence, "reason": p.reason},
                                          self.redactor)
            findings += validate.attributable(p, window)
            findings += checks.findings(p.check, p.evidence, window, project_root,
                                        reflector_dir=paths.reflector_dir(),
                                        home=os.path.expanduser("~"))
            if intent.source == "curator":
                findings += shape.curator_findings(intent, plan, p.evidence)
                findings += feedback.repair_findings(self.statedir.history(plan.skill_dir),
                                                     plan.action, p.evidence, plan.name)
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
            if out.status == "landed" and p.check is not None:
                rule = checks.rule_text(p.check)
                if approved:  # review mode: the user approved the lesson with its check
                    checktable.confirm(self.statedir, plan.skill_dir, rule, by="user",
                                       at=self.clock())
                else:
                    checktable.confirm_repeat(self.statedir, plan.skill_dir, rule, intent.session_id,
                                              self.clock())
            return out

    # -- the library's readers ------------------------------------------------------------

    def stale_skills(self, project_root: str | None) -> list[tuple[str, list[str]]]:
        """(name, missing paths) of the project's live skills the last pass found stale."""
        root, _ = self.layer_root("project", project_root) if project_root else (None, None)
        if root is None:
            return []
        return sorted((os.path.basename(d), m.missing) for d, m in self.statedir.stale().items()
                      if os.path.dirname(d) == root and os.path.isfile(os.path.join(d, SKILL_MD)))

    def record_use(self, path: str) -> str | None:
        """Count one use of the skill at `path` (its dir or its SKILL.md); return the dir."""
        p = os.path.realpath(path)
        d = os.path.dirname(p) if os.path.basename(p) == SKILL_MD else p
        if not os.path.isfile(os.path.join(d, SKILL_MD)):
            return None
        self.statedir.count_use(d)
        return d

    # -- the checks the hook holds calls against (see `checktable`) -----------------------

    def approve_check(self, name: str, project_root: str | None = None,
                      layer: str | None = None) -> SkillCheck | None:
        """`skills check approve NAME`: the user confirms the lesson's check, so its proposed
        action (ask, deny) applies from the next call on. None: no such skill; ValueError: the
        skill has no check, or the name is in both layers."""
        if not validate.name_is_contained(name):
            return None
        # the live skill of that name in each layer, where its landings are recorded
        dirs = {os.path.join(root, name) for _, root, _ in self.roots(project_root)
                if os.path.isfile(os.path.join(root, name, SKILL_MD))}
        if not dirs:
            return None
        found = [c for c in checktable.live_checks(self.statedir)
                 if c["dir"] in dirs and (layer is None or c["layer"] == layer)]
        if not found:
            raise ValueError(f"{name} has no check (only a lesson autoharness landed with one has)")
        if len(found) > 1:
            raise ValueError(f"{name} is in both layers: say which with --layer project|user")
        c = found[0]
        checktable.confirm(self.statedir, c["dir"], c["rule"], by="user", at=self.clock())
        return checktable.skill_check({c["dir"]: c for c in self.write_check_table()}[c["dir"]])

    def lessons(self) -> list[LessonCheck]:
        """Every check the hook holds calls against now, with its figures (status, report)."""
        return adherence.lessons(self.statedir, self.compiled_checks)

    def fill_baselines(self) -> None:
        """Compute the baseline of each compiled project check that has none yet."""
        adherence.fill_baselines(self.statedir, self.compiled_checks)

    def adherence_recorder(self) -> adherence.Recorder:
        """What counts the calls the daemon hears against the checks, in this state dir."""
        return adherence.Recorder(self.statedir)

    def write_check_table(self) -> list[dict]:
        """Compile the live checks into the check hook's table (see `checktable`); they are
        kept as `compiled_checks`, what the hook holds calls against from now on."""
        before = checktable.library_stamp(self.statedir)
        self.compiled_checks = checktable.write_table(self.statedir)
        self.checks_seen = before[:-1] + checktable.library_stamp(self.statedir)[-1:]  # as written
        return self.compiled_checks

    def refresh_check_table(self) -> bool:
        """Compile the table again when a landing, an archive or a confirmation happened
        since the last compile, or the table is not the file written then (removed, replaced,
        damaged); three stats when none did. Whether it was compiled."""
        if self.checks_seen is not None and checktable.library_stamp(self.statedir) == self.checks_seen:
            return False
        self.write_check_table()
        return True

    # -- crash recovery (see `recovery`) ---------------------------------------------------

    def recover(self) -> list[Recovered]:
        """Finish or abandon landings a crash interrupted; sweep temp files. Call at start."""
        return recovery.recover(self.statedir)
