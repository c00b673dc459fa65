"""The skill library's lifecycle: the judging that archives what the counts and the
evidence call for (driven by the promoter loop, `Review`, in its thread; this module knows
nothing of it), the curator's jobs (merges; description repairs of skills missed twice;
stale skills with their missing paths), and the per-stage and feedback counts `status`
shows."""

import hashlib
import os
import threading
from collections.abc import Callable

import anyio
import structlog

from ...protocol import messages as m
from ...protocol import replies as r
from .. import sessions as sm
from ..book import Book
from ..events import Events, JobDone
from ..intents import IntentQueue
from ..listing.read import frontmatter
from ..live import Live, new_id
from ..projects import ProjectSwitches
from ..promote import adherence, feedback, lifecycle
from ..proposals import Intent, Proposal, curator_session
from ..reflect import windows
from ..reflect.curate import CuratedSkill

log = structlog.get_logger("autoharness")


class Library:
    def __init__(self, book: Book, live: Live, *, projects: ProjectSwitches,
                 intents: IntentQueue, events: Events, clock: Callable[[], float]):
        """`intents` holds the archives review mode keeps for the user, and the feedback
        verdicts `status` counts; each `JobDone` counts toward the curator."""
        self.book = book
        self.live = live
        self.projects = projects
        self.clock = clock
        # What status shows, written by the promoter loop's thread: read and written under
        # `_shown` (the loop reads them while a pass runs)
        self._shown = threading.Lock()
        self.counts: dict[str | None, dict[str, int]] = {}
        self.checks: list[r.LessonCheck] = []  # the live checks and their figures (the review)
        self.intents = intents
        events.subscribe(JobDone, self.count_reflection)

    def show_checks(self, checks: list[r.LessonCheck]) -> None:
        with self._shown:
            self.checks = checks

    def judge(self, root: str | None) -> None:
        """Judge one project's layer and the user layer (blocking; the promoter loop's thread):
        archive what the counts call for, refresh the per-stage counts `status` shows, and
        queue the curator for repairs and stale skills. In review mode a `harmful` archive is
        held for the user (`hold_archive`) instead."""
        promoter = self.live.promoter
        try:
            done = promoter.lifecycle_run(root)
            for held in done.held:  # review mode: the user decides these
                if self.hold_archive(held.decision, held.quotes):
                    promoter.note_held(held)
            for d in done.done:
                log.info("archived", skill=d.name, layer=d.layer, reason=d.reason,
                         uses=d.uses, turns=d.turns)
            infos = promoter.list_skills(root)
        except Exception:
            log.exception("library lifecycle pass failed")
            return
        with self._shown:
            self.counts[None] = stage_counts(i for i in infos if i.layer == "user")
            if root:
                self.counts[root] = stage_counts(i for i in infos if i.layer == "project")
        wanted = {layer for layer, _ in done.repairs}
        if done.newly_stale:
            wanted.add("project")
        if wanted:
            self._curate_from_thread(sorted(wanted), root)

    def hold_archive(self, d, quotes: list[str]) -> bool:
        """Review mode: a `harmful` archive waits for the user as a held intent whose evidence
        is a grounded harmful quote (kept as its window), instead of landing (blocking).
        True when it is newly held (the same decision again is the intent already held)."""
        key = f"lifecycle:{d.layer}:{d.scope}:{d.name}:{d.detail}"
        job = "lifecycle-" + hashlib.sha256(key.encode()).hexdigest()[:16]
        if self.intents.get("i-" + job[10:]) is not None:
            return False
        windows.save_window(job, "\n\n".join(quotes))
        now = self.clock()
        p = Proposal(action="archive", skill=d.name, layer=d.layer, reason=d.detail,
                     evidence=quotes[-1] if quotes else "")
        held = self.intents.add_held(key, Intent(
            id="i-" + job[10:], source="lifecycle", created_at=now, proposal=p, job_id=job,
            project_root=d.scope, status="held", updated_at=now))
        return held.id == "i-" + job[10:]

    def _curate_from_thread(self, layers: list[str], root: str | None) -> None:
        """Queue curator jobs from the promoter loop's worker thread (the book is the event
        loop's); outside a worker thread (a test calling the pass directly) nothing is queued."""
        layers = [x for x in layers if x == "user" or root]
        try:
            anyio.from_thread.run(self.queue_curation, layers, root)
        except RuntimeError:
            log.info("curation not queued: not in a worker thread", layers=layers)

    def status(self) -> r.LibraryInfo:
        """Skills per stage (and archives per reason) over the layers judged so far."""
        lib = self.live.cfg.library
        turns = self.book.state.turns
        out = r.LibraryInfo(
            turns=r.LibraryTurns(user=turns.user, projects=len(turns.projects)),
            config={"maturity_turns": lib.maturity_turns, "capacity_project": lib.capacity_project,
                    "capacity_user": lib.capacity_user, "curate_every": lib.curate_every})
        by_stage: dict[str, int] = {}
        with self._shown:
            layers, out.checks = list(self.counts.values()), list(self.checks)
        for counts in layers:
            for k, v in counts.items():
                if k.startswith("archived:"):
                    out.archived_by_reason[k[9:]] = out.archived_by_reason.get(k[9:], 0) + v
                else:
                    by_stage[k] = by_stage.get(k, 0) + v
        for k in feedback.VERDICTS:
            setattr(out.feedback, k, by_stage.get("feedback:" + k, 0))
        out.stale = by_stage.get("stale", 0)
        out.verdicts_refused = len(self.intents.verdicts("rejected"))
        out.probation = by_stage.get(lifecycle.PROBATION, 0)
        out.graduated = by_stage.get(lifecycle.GRADUATED, 0)
        out.hand_written = by_stage.get(lifecycle.HAND_WRITTEN, 0)
        out.archived = by_stage.get(lifecycle.ARCHIVED, 0)
        return out

    def curator_skills(self, layer: str, root: str | None) -> list[CuratedSkill]:
        """The live autoharness-owned skills of one layer, whole (blocking)."""
        out = []
        for info in self.live.promoter.list_skills(root):
            if info.status != "live" or info.owner != "autoharness" or info.layer != layer:
                continue
            try:
                with open(os.path.join(info.path, "SKILL.md"), encoding="utf-8") as f:
                    text = f.read(256 * 1024)
            except (OSError, ValueError):
                continue
            history = self.live.promoter.history_at(info.path)
            missed = (feedback.missed_quotes(history)
                      if info.feedback.missed >= feedback.REPAIR_AFTER_MISSED else [])
            out.append(CuratedSkill(name=info.name, text=text, uses=info.uses,
                                    turns=info.turns, missed=missed[-4:],
                                    stale=list(info.stale), check=adherence.in_words(info.check),
                                    long_description=too_long(text, self.live.cfg.promoter)))
        return out

    async def count_reflection(self, done: JobDone) -> None:
        """Every `library.curate_every` finished reflection (not curator) jobs, the curator
        runs for the user layer and for the project of the job that completed the count."""
        if done.kind == "curate" or not self.book.count_reflection(
                self.live.cfg.library.curate_every):
            return
        root = self.projects.root_of(done.cwd)
        await self.queue_curation(["user", "project"] if root else ["user"], root)

    async def queue_curation(self, layers: list[str], root: str | None) -> list[sm.Job]:
        """A curator job per layer, unless one for that layer (and project) still waits."""
        jobs = []
        for layer in layers:
            cwd = root if layer == "project" else None
            if any(j.kind == "curate" and j.layer == layer and j.cwd == cwd
                   and j.status in ("pending", "running") for j in self.book.jobs()):
                continue
            jobs.append(sm.Job(id=new_id(), session_id=curator_session(layer), kind="curate",
                               created_at=self.clock(), cwd=cwd, layer=layer))
        await self.book.record_jobs(jobs)
        for job in jobs:
            log.info("job created", job=job.id, kind="curate", layer=job.layer)
        return jobs

    async def cmd_curate(self, req: m.Curate) -> m.Reply:
        """`autoharnessctl curate`: run the curator now (both layers unless one is named)."""
        if req.layer not in (None, "project", "user"):
            return m.Error(code="bad_request", message="--layer must be project or user")
        root = self.projects.root_of(req.project)
        layers = [req.layer] if req.layer else ["user", "project"]
        if "project" in layers and not root:
            if req.layer == "project":
                return m.Error(code="bad_request",
                               message="the project layer needs a project: pass --project DIR")
            layers.remove("project")
        if req.dry_run:
            return m.Ok(data=await anyio.to_thread.run_sync(self.plan, layers, root))
        jobs = await self.queue_curation(layers, root)
        return m.Ok(data=r.CuratorQueued(jobs=[r.CuratorJob(id=j.id, layer=j.layer,
                                                            project=j.cwd) for j in jobs]))


    def plan(self, layers: list[str], root: str | None) -> r.CuratePlan:
        """What a lifecycle pass and a curator run of these layers would do now (blocking;
        nothing is written)."""
        promoter = self.live.promoter
        found = promoter.lifecycle_run(root, dry_run=True)
        out = r.CuratePlan(held_back=found.held_back)
        for d in found.planned:
            if d.layer in layers:
                out.archives.append(r.PlannedArchive(
                    name=d.name, layer=d.layer, reason=d.reason,
                    why=d.detail or f"{d.reason}: {d.uses} uses in {d.turns} turns"))
        for layer in layers:
            skills = self.curator_skills(layer, root)
            out.curator_skills[layer] = len(skills)
            for s in skills:
                if s.missed:
                    out.repairs.append(s.name)
                if s.stale:
                    out.stale[s.name] = s.stale
        return out


def stage_counts(infos) -> dict[str, int]:
    """Skills per stage; archives also per reason (`archived:<reason>`); the verdicts on
    autoharness's skills, live and archived (`feedback:<verdict>`: the counts of each one's
    current version; hand-written skills are never judged, so theirs are left out) and how
    many live skills are stale (`stale`)."""
    out: dict[str, int] = {}
    for i in infos:
        stage = i.stage or lifecycle.HAND_WRITTEN
        out[stage] = out.get(stage, 0) + 1
        if i.owner == "autoharness":
            for k in feedback.VERDICTS:
                out["feedback:" + k] = out.get("feedback:" + k, 0) + getattr(i.feedback, k)
        if i.status == "live" and i.stale:
            out["stale"] = out.get("stale", 0) + 1
        if stage == lifecycle.ARCHIVED:
            key = f"archived:{i.reason or 'unknown'}"
            out[key] = out.get(key, 0) + 1
    return out


def too_long(skill_md: str, cfg) -> int:
    """A learned skill's description length when the curator is to shorten it (over
    `promoter.max_description_chars`, or not opening with when to use it); 0 when it is fine."""
    from ..promote.validate import description_findings

    desc = frontmatter(skill_md).get("description", "")
    return len(desc) if description_findings(desc, cfg.max_description_chars) else 0
