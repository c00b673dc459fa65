"""`autoharnessctl skills publish`: what the git-mode review branch holds, and how to share it.

Offline and read-only: it reads refs and logs, prints the exact commands, and pushes nothing.
"""

from ..daemon import offline


def publish(project: str) -> tuple[int, str]:
    """(exit code, text to print) for the project's review branch."""
    b = offline.review_branch(project)
    if b.mode != "git":
        return 1, (f"{project} is not in git mode (promoter.mode is {b.mode!r}): set "
                   f'`[promoter] mode = "git"` in {b.config_path}'
                   " or in the autoharness config")
    if b.top is None:
        return 1, (f"{project} is not inside a git repository (or {b.branch!r} is not a valid "
                   "branch name): git mode needs one")
    branch = b.branch
    if not b.exists:
        return 0, f"no review branch {branch} yet: nothing has landed in git mode"
    lines = [f"{branch}: {len(b.commits)} commit(s) beyond {b.default}"]
    lines += [f"  {oid} {subject}" for oid, subject in b.commits]
    if not b.commits:
        lines.append("nothing to publish: the default branch already holds every landing")
        return 0, "\n".join(lines)
    remote = b.remote or "<remote>"
    lines += ["", "to share it for review (nothing was pushed):",
              f"  git -C {b.top} push {remote} {branch}",
              f"  gh pr create --base {b.default} --head {branch} "
              "--title 'autoharness: skills for review'",
              "or merge it yourself:",
              f"  git -C {b.top} merge {branch}"]
    if not b.remote:
        lines.insert(-4, "  (no remote configured: `git remote add origin URL` first)")
    return 0, "\n".join(lines)
