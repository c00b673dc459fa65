"""The skill library's lifecycle: turns counted from main sessions' Stops, the lifecycle pass
that archives what the counts call for (run by the promoter loop, in its thread), the
curator's jobs, and the per-stage counts `status` shows."""

import os
from collections.abc import Callable

import structlog

from claude_autoharness.daemon import sessions as sm
from claude_autoharness.daemon.book import Book
from claude_autoharness.daemon.live import Live, new_id
from claude_autoharness.daemon.promote import lifecycle
from claude_autoharness.daemon.proposals import curator_session
from claude_autoharness.daemon.reflect.curate import CuratedSkill
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol import replies as r

log = structlog.get_logger("autoharness")


class Library:
    def __init__(self, book: Book, live: Live, *, project_root: Callable[[str | None], str | None],
                 record_uses: Callable[[], None], wake: Callable[[], None],
                 clock: Callable[[], float]):
        """`record_uses` records queued skill uses (blocking); `wake` wakes the promoter loop."""
        self.book = book
        self.live = live
        self.project_root = project_root
        self.record_uses = record_uses
        self.wake = wake
        self.clock = clock
        self.due: set[str | None] = {None}  # project roots to judge (None: user layer only)
        self.counts: dict[str | None, dict[str, int]] = {}

    def turn_counted(self, project_root: str | None) -> None:
        """A main session's Stop was counted (and journaled) as one turn of the user layer and
        of its project: the library's lifecycle is re-judged."""
        self.due.add(project_root)
        self.wake()

    def reloaded(self) -> None:
        self.due.add(None)  # new limits apply now

    def run_lifecycle(self) -> None:
        """Judge the layers whose turns moved (blocking; the promoter loop's thread): archive
        what the counts call for, and refresh the per-stage counts `status` shows."""
        while self.due:
            self.record_uses()  # a use queued before the Stop counts in this pass
            root = self.due.pop()
            promoter = self.live.promoter
            try:
                for d in promoter.lifecycle_pass(root):
                    log.info("archived", skill=d.name, layer=d.layer, reason=d.reason,
                             uses=d.uses, turns=d.turns)
                infos = promoter.list_skills(root)
            except Exception:
                log.exception("library lifecycle pass failed")
                continue
            self.counts[None] = stage_counts(i for i in infos if i.layer == "user")
            if root:
                self.counts[root] = stage_counts(i for i in infos if i.layer == "project")

    def status(self) -> r.LibraryInfo:
        """Skills per stage (and archives per reason) over the layers judged so far."""
        lib = self.live.cfg.library
        turns = self.book.state.turns
        out = r.LibraryInfo(
            turns=r.LibraryTurns(user=turns.user, projects=len(turns.projects)),
            config={"maturity_turns": lib.maturity_turns, "capacity_project": lib.capacity_project,
                    "capacity_user": lib.capacity_user, "curate_every": lib.curate_every})
        by_stage: dict[str, int] = {}
        for counts in list(self.counts.values()):
            for k, v in counts.items():
                if k.startswith("archived:"):
                    out.archived_by_reason[k[9:]] = out.archived_by_reason.get(k[9:], 0) + v
                else:
                    by_stage[k] = by_stage.get(k, 0) + v
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
            out.append(CuratedSkill(name=info.name, text=text, uses=info.uses,
                                    turns=info.turns))
        return out

    async def count_reflection(self, job: sm.Job) -> None:
        """Every `library.curate_every` finished reflection jobs, the curator runs for the
        user layer and for the project of the job that completed the count."""
        state = self.book.state
        every = self.live.cfg.library.curate_every
        state.reflections_since_curate += 1
        self.book.mark_dirty()
        if every <= 0 or state.reflections_since_curate < every:
            return
        state.reflections_since_curate = 0
        root = self.project_root(job.cwd)
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
        root = self.project_root(req.project) if req.project else None
        layers = [req.layer] if req.layer else ["user", "project"]
        if "project" in layers and not root:
            if req.layer == "project":
                return m.Error(code="bad_request",
                               message="the project layer needs a project: pass --project DIR")
            layers.remove("project")
        jobs = await self.queue_curation(layers, root)
        return m.Ok(data=r.CuratorQueued(jobs=[r.CuratorJob(id=j.id, layer=j.layer,
                                                            project=j.cwd) for j in jobs]))


def stage_counts(infos) -> dict[str, int]:
    """Skills per stage; archives also per reason (`archived:<reason>`)."""
    out: dict[str, int] = {}
    for i in infos:
        stage = i.stage or lifecycle.HAND_WRITTEN
        out[stage] = out.get(stage, 0) + 1
        if stage == lifecycle.ARCHIVED:
            key = f"archived:{i.reason or 'unknown'}"
            out[key] = out.get(key, 0) + 1
    return out
