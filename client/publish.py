"""`autoharnessctl skills publish`: what the git-mode review branch holds, and how to share it.

Offline and read-only: it reads refs and logs, prints the exact commands, and pushes nothing.
"""

import os

from claude_autoharness.daemon import offline
from claude_autoharness.protocol.config import load as load_config


def publish(project: str) -> tuple[int, str]:
    """(exit code, text to print) for the project's review branch."""
    cfg = load_config()
    gitmode = offline.gitmode
    mode, branch = gitmode.mode_for(project, cfg.promoter)
    if mode != "git":
        return 1, (f"{project} is not in git mode (promoter.mode is {mode!r}): set "
                   f'`[promoter] mode = "git"` in {os.path.join(project, gitmode.PROJECT_CONFIG)}'
                   " or in the autoharness config")
    t = gitmode.target_for(project, cfg.promoter, offline.promote_state_dir())
    if t is None:
        return 1, (f"{project} is not inside a git repository (or {branch!r} is not a valid "
                   "branch name): git mode needs one")
    s = gitmode.publish_summary(t)
    if not s["exists"]:
        return 0, f"no review branch {branch} yet: nothing has landed in git mode"
    lines = [f"{branch}: {len(s['commits'])} commit(s) beyond {s['default']}"]
    lines += [f"  {c['commit']} {c['subject']}" for c in s["commits"]]
    if not s["commits"]:
        lines.append("nothing to publish: the default branch already holds every landing")
        return 0, "\n".join(lines)
    remote = s["remote"] or "<remote>"
    lines += ["", "to share it for review (nothing was pushed):",
              f"  git -C {t.top} push {remote} {branch}",
              f"  gh pr create --base {s['default']} --head {branch} "
              "--title 'autoharness: skills for review'",
              "or merge it yourself:",
              f"  git -C {t.top} merge {branch}"]
    if not s["remote"]:
        lines.insert(-4, "  (no remote configured: `git remote add origin URL` first)")
    return 0, "\n".join(lines)
