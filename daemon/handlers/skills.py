"""The skill library as the operator sees it: the `skills` verbs (they read files: worker
threads only). The index of live skills each reflection prompt carries is `Reflection`'s."""

from typing import assert_never

import anyio

from ...protocol import messages as m
from ...protocol.replies import SkillView
from ..live import Live
from ..projects import ProjectSwitches
from ..promote.land import Promoter
from ..skillsync import rounds as sync_rounds


def _to(req: m.Skills) -> int | None:
    if req.to and not req.to.isdigit():
        raise ValueError(f"--to wants a version number, not {req.to!r}")  # a bad request
    return int(req.to) if req.to else None


def _run(pr: Promoter, q: m.Skills) -> object:
    """What each sub-operation runs (blocking)."""
    name, where = q.name or "", {"project_root": q.project, "layer": q.layer}
    match q.op:
        case "list":
            return pr.list_skills(q.project)
        case "show":
            return pr.show(name, **where)
        case "history":
            return pr.history(name, **where)
        case "revert":
            return pr.revert(name, to=_to(q), **where)
        case "restore":
            return pr.restore(name, **where)
        case "approve_check":
            return pr.approve_check(name, **where)
        case "forget":
            return pr.forget(name, **where)
        case _:
            assert_never(q.op)


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
            data = await anyio.to_thread.run_sync(_run, pr, req)
            if req.op in CHANGES:
                await anyio.to_thread.run_sync(pr.write_check_table)
        except ValueError as e:
            return m.Error(code="bad_request", message=str(e))
        if data is None:
            return m.Error(code="not_found", message=f"no skill named {req.name!r}")
        if isinstance(data, SkillView) and data.info.layer == "user":
            rounds = await anyio.to_thread.run_sync(sync_rounds.load)  # a file: not on the loop
            data.sync_conflicts = [c for c in rounds.conflicts if c.skill == data.info.name]
        return m.Ok(data=data)
