"""The skill library as the operator sees it: the `skills` verbs (they read files: worker
threads only). The index of live skills each reflection prompt carries is `Reflection`'s."""

from collections.abc import Callable

import anyio

from claude_autoharness.daemon.live import Live
from claude_autoharness.daemon.projects import ProjectSwitches
from claude_autoharness.daemon.promote.land import Promoter
from claude_autoharness.daemon.skillsync import rounds as sync_rounds
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol.replies import SkillView


def _to(req: m.Skills) -> int | None:
    if req.to and not req.to.isdigit():
        raise ValueError(f"--to wants a version number, not {req.to!r}")  # a bad request
    return int(req.to) if req.to else None


# One entry per `SkillsOp` (a test holds them equal): what each sub-operation runs (blocking).
VERBS: dict[m.SkillsOp, Callable[[Promoter, m.Skills], object]] = {
    "list": lambda pr, q: pr.list_skills(q.project),
    "show": lambda pr, q: pr.show(q.name or "", project_root=q.project, layer=q.layer),
    "history": lambda pr, q: pr.history(q.name or "", project_root=q.project, layer=q.layer),
    "revert": lambda pr, q: pr.revert(q.name or "", to=_to(q), project_root=q.project,
                                      layer=q.layer),
    "restore": lambda pr, q: pr.restore(q.name or "", project_root=q.project, layer=q.layer),
    "approve_check": lambda pr, q: pr.approve_check(q.name or "", project_root=q.project,
                                                    layer=q.layer),
    "forget": lambda pr, q: pr.forget(q.name or "", project_root=q.project, layer=q.layer),
}
CHANGES = ("revert", "restore")  # ops after which the check hook's table is compiled again


class Skills:
    def __init__(self, live: Live, projects: ProjectSwitches):
        self.live = live
        self.projects = projects

    async def cmd_skills(self, req: m.Skills) -> m.Reply:
        pr = self.live.promoter
        if req.project:  # a subdirectory or linked worktree means its main worktree's skills
            req.project = self.projects.root(req.project)
        if req.op != "list" and not req.name:
            return m.Error(code="bad_request", message="name a skill")
        try:
            data = await anyio.to_thread.run_sync(VERBS[req.op], pr, req)
            if req.op in CHANGES:
                await anyio.to_thread.run_sync(pr.write_check_table)
        except ValueError as e:
            return m.Error(code="bad_request", message=str(e))
        if data is None:
            return m.Error(code="not_found", message=f"no skill named {req.name!r}")
        if isinstance(data, SkillView) and data.info.layer == "user":
            data.sync_conflicts = [c for c in sync_rounds.load().conflicts
                                   if c.skill == data.info.name]
        return m.Ok(data=data)
