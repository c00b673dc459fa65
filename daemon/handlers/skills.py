"""The skill library as the operator and the reflector see it: `skills` verbs and the index of
live skills that goes into each reflection prompt. Both read files: worker threads only."""

import os

import anyio

from claude_autoharness.daemon.live import Live
from claude_autoharness.daemon.projects import ProjectSwitches
from claude_autoharness.daemon.promote import skillfile
from claude_autoharness.protocol import messages as m


class Skills:
    def __init__(self, live: Live, projects: ProjectSwitches):
        self.live = live
        self.projects = projects

    async def cmd_skills(self, req: m.Skills) -> m.Reply:
        pr = self.live.promoter
        if req.project:  # a subdirectory or linked worktree means its main worktree's skills
            req.project = self.projects.root(req.project)

        def work():
            if req.op == "list":
                return pr.list_skills(req.project)
            if not req.name:
                raise ValueError("name a skill")
            if req.op == "show":
                return pr.show(req.name, project_root=req.project, layer=req.layer)
            if req.op == "history":
                return pr.history(req.name, project_root=req.project, layer=req.layer)
            if req.op == "revert":
                return pr.revert(req.name, to=int(req.to) if req.to else None,
                                 project_root=req.project, layer=req.layer)
            return pr.restore(req.name, project_root=req.project, layer=req.layer)

        try:
            data = await anyio.to_thread.run_sync(work)
        except ValueError as e:
            return m.Error(code="bad_request", message=str(e))
        if data is None:
            return m.Error(code="not_found", message=f"no skill named {req.name!r}")
        return m.Ok(data=data)

    def skill_index(self, project_root: str | None) -> list[dict]:
        """Name, layer, owner and description of every live skill (blocking; for the prompt)."""
        out = []
        for info in self.live.promoter.list_skills(project_root):
            if info.status != "live":
                continue
            try:
                with open(os.path.join(info.path, "SKILL.md"), encoding="utf-8") as f:
                    fields, _ = skillfile.parse(f.read(64 * 1024))
                desc = fields.get("description", "")
            except (OSError, ValueError, skillfile.SkillFormatError):
                desc = ""
            out.append({"name": info.name, "layer": info.layer, "owner": info.owner,
                        "description": desc})
        return out
