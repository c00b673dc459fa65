"""The promoter's side of evidence: grounding verdicts into skill history, and the checks of a
lifecycle pass that need no model (stale paths, description repairs due).

Every write here is a history entry or the stale marks, under the promoter's lock; nothing in
the skill tree changes (archives and repairs go through the ordinary landings).
"""

import os
import secrets
from dataclasses import dataclass, field

from claude_autoharness.daemon.promote import (
    feedback,
    gitmode,
    layers,
    lifecycle,
    loads,
    stale,
    validate,
    verbs,
)
from claude_autoharness.daemon.promote.lander import Lander
from claude_autoharness.daemon.promote.plan import SKILL_MD
from claude_autoharness.daemon.promote.skilltree import read_nofollow
from claude_autoharness.daemon.proposals import Finding, VerdictRecord
from claude_autoharness.protocol.replies import Outcome
from claude_autoharness.protocol.words import plural

HELD = "held"  # history action: an archive the evidence calls for waits for the user


def ground(pr: Lander, rec: VerdictRecord, window: str | None) -> tuple[str, list[Finding]]:
    """`accepted` (recorded in the skill's history, once) or `rejected` with the reasons."""
    v = rec.verdict
    if v is None:
        return "rejected", [Finding(family="well_formed", code="schema",
                                    message="the verdict was malformed")]
    root, _anchor = pr.layer_root(v.layer, rec.project_root)
    if root is None:
        return "rejected", [layers.no_project_root(rec.project_root)]
    if not validate.name_is_contained(v.skill):
        return "rejected", [Finding(family="contained", code="name",
                                    message="not a plain skill name")]
    with pr.statedir.locked():
        try:
            pr.sync_git_roots(rec.project_root if v.layer == "project" else None)
        except OSError as e:
            return "rejected", [Finding(family="landing", code="git", message=str(e))]
        target = os.path.join(root, v.skill)
        entries = pr.statedir.history(target)
        if any(e.get("landing") == "fb-" + rec.id for e in entries):
            return "accepted", []  # recorded before a crash took the queue's update
        if rec.job_id and any(e.get("action") == feedback.FEEDBACK and e.get("job") == rec.job_id
                              for e in entries):
            return "rejected", [Finding(family="grounded", code="repeated",
                                        message=f"a second verdict on {v.skill} for one window")]
        exists = os.path.isfile(os.path.join(target, SKILL_MD))
        seen = loads.Layers.of(rec.project_root)
        who = (v.layer, v.skill)
        findings = feedback.ground(
            v.verdict, v.skill, v.layer, window, exists=exists,
            loaded=window is not None and who in loads.resolve(loads.refs(window), seen),
            loaded_before=who in loads.resolve(rec.loaded_before, seen))
        if findings:
            return "rejected", findings
        version = feedback.judged_version(entries, rec.window_at or None)
        quote = pr.redactor.redact(v.evidence)[0]
        pr.statedir.append_history(feedback.entry(rec, target, v.layer, v.skill, version,
                                                  pr.clock(), quote))
    return "accepted", []


def mark(pr: Lander, target: str, layer: str, action: str, reason: str,
         **extra) -> None:
    """A history entry that changes no file: a decision and its reason (lock held)."""
    entries = pr.statedir.history(target)
    now = pr.clock()
    pr.statedir.append_history({
        "landing": f"{action}-{int(now * 1000):013d}-{secrets.token_hex(4)}", "action": action,
        "version": entries[-1]["version"] if entries else 0, "files": {}, "at": now,
        "target": target, "layer": layer, "name": os.path.basename(target),
        "source": "lifecycle", "reason": reason, **extra})


@dataclass
class Checked:
    """What one pass found: stale skills (dir -> turns stale) and layers owing a repair."""

    stale_turns: dict[str, int] = field(default_factory=dict)
    repairs: list[tuple[str, str]] = field(default_factory=list)  # (layer, skill name)
    newly_stale: list[str] = field(default_factory=list)  # owned skills found stale this pass


def check(pr: Lander, project_root: str | None, infos) -> Checked:
    """Stale paths of the project's skills (marked, and cleared when they are back), and
    description repairs due (asked once per two new misses). `infos`: the live skills."""
    out = Checked()
    tree = stale.Tree(project_root) if project_root else None
    found: dict[str, list[str]] = {}  # listed (git) before the lock: landings need not wait
    for i in infos:
        if i.layer == "project" and tree is not None:
            data = read_nofollow(i.path, SKILL_MD, limit=256 * 1024) or b""
            found[i.path] = stale.missing_paths(i.path, data.decode("utf-8", "replace"), tree)
    with pr.statedir.locked():
        marks = pr.statedir.stale()
        before = dict(marks)
        for i in infos:
            if i.path not in found:
                continue
            missing = found[i.path]
            owned = i.owner == "autoharness"
            old = marks.get(i.path)
            if missing:
                now = pr.turns("project", project_root)
                since = old["since"] if old else now
                marks[i.path] = {"since": since, "missing": missing}
                if owned and (old is None or old["missing"] != missing):
                    out.newly_stale.append(i.name)
                    mark(pr, i.path, "project", feedback.STALE_MARK,
                         "stale: names paths that are gone: " + ", ".join(missing),
                         missing=missing)
                if owned:
                    out.stale_turns[i.path] = max(0, now - since)
            elif old is not None:
                del marks[i.path]
                if owned:
                    mark(pr, i.path, "project", feedback.FRESH_MARK,
                         "fresh: the paths it names exist again: " + ", ".join(old["missing"]))
        if project_root:  # marks of skills that are gone (archived, removed) go too
            live = {i.path for i in infos}
            for d in [d for d in marks if d not in live and _under(d, project_root)]:
                del marks[d]
        if marks != before:
            pr.statedir.set_stale(marks)
        for i in infos:
            if i.owner != "autoharness":
                continue
            entries = pr.statedir.history(i.path)
            if feedback.needs_repair(entries):
                n = len(feedback.missed_quotes(entries))
                mark(pr, i.path, i.layer, feedback.REPAIR_ASKED,
                     f"repair: missed {n} times; the curator is asked to repair its "
                     "description")
                out.repairs.append((i.layer, i.name))
    return out


def _under(path: str, root: str) -> bool:
    root = os.path.realpath(root)
    return os.path.realpath(path).startswith(root + os.sep)


def lifecycle_pass(pr: Lander, project_root: str | None, *, hold=None,
                   dry_run: bool = False) -> lifecycle.Pass:
    """Archive what the counts and the evidence call for in the user layer (and the
    project's): harmful and stale skills, dormant ones after probation, then the lowest
    usage rates past a layer's capacity; at most a share of a layer per pass. Checks the
    project's skills for stale paths and asks for description repairs first.

    `hold(decision, quotes)`: in review mode a `harmful` archive is handed to it (held for
    the user) instead of landing. An autoharness skill without a turn stamp (it predates
    this, or its landing was recovered after a crash) starts its probation now.
    `dry_run`: decide and report, write nothing."""
    listed = [i for i in verbs.list_skills(pr, project_root) if i.status == "live"]
    infos = [i for i in listed if i.owner == "autoharness"]
    if dry_run:
        checked = Checked(stale_turns={
            i.path: max(0, pr.turns(i.layer, project_root) - m["since"])
            for i in infos if (m := pr.statedir.stale().get(i.path))})
    else:
        stamps = pr.statedir.stamps()
        for i in [i for i in infos if i.path not in stamps]:
            pr.stamp(i.path, i.layer, project_root if i.layer == "project" else None,
                     keep_uses=True)
        checked = check(pr, project_root, listed)
    counts = [lifecycle.SkillCounts(  # an unstamped skill was listed with 0 turns
        name=i.name, layer=i.layer, scope=project_root if i.layer == "project" else None,
        owned=True, uses=i.uses, turns=i.turns, helped=i.feedback.helped,
        harmful=i.feedback.harmful, stale_turns=checked.stale_turns.get(i.path))
        for i in infos]
    lib = pr.library
    every = lifecycle.decide(counts, maturity_turns=lib.maturity_turns,
                             capacity_project=lib.capacity_project,
                             capacity_user=lib.capacity_user,
                             stale_after_turns=lib.stale_after_turns)
    by_name = {(i.layer, i.name): i for i in infos}
    marks = pr.statedir.stale()
    decisions = [lifecycle.explained(d, by_name[(d.layer, d.name)].feedback,
                                     marks.get(by_name[(d.layer, d.name)].path))
                 for d in lifecycle.bounded(every, counts, lib.max_archive_share)]
    result = lifecycle.Pass(planned=decisions, held_back=len(every) - len(decisions),
                            repairs=checked.repairs, newly_stale=checked.newly_stale)
    if dry_run:
        return result
    for d in decisions:
        info = by_name[(d.layer, d.name)]
        mode, _ = gitmode.mode_for(project_root if d.layer == "project" else None, pr.cfg)
        if d.reason == lifecycle.HARMFUL and mode == "review" and hold is not None:
            quotes = [v["quote"] for v in feedback.verdicts(pr.statedir.history(info.path))
                      if v["verdict"] == "harmful" and v["current"]]
            if hold(d, quotes):  # newly held: the decision and its reason go in history
                with pr.statedir.locked():
                    mark(pr, info.path, d.layer, HELD, d.detail + "; held for review")
            result.held.append(d)
            continue
        out = retire(pr, d, project_root)
        if out.status == "landed":
            result.done.append(d)
    return result


def retire(pr: Lander, d: lifecycle.Decision, project_root: str | None) -> Outcome:
    """Archive one skill for a lifecycle reason (`dormant`, `capacity`), recorded in its
    history and archive metadata; `restore` brings it back on a fresh probation."""
    why = d.detail or (f"{d.reason}: {plural(d.uses, 'use')} in {plural(d.turns, 'turn')}"
                       + (" after probation" if d.reason == lifecycle.DORMANT else
                          f", over the {d.layer} layer's capacity"))
    return pr.archive_owned(d.layer, d.name, project_root,
                            {"source": "lifecycle", "reason": why}, reason=d.reason,
                            uses=d.uses, turns=d.turns)
