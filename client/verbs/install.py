"""`autoharnessctl install`: wire autoharness into Claude Code (the hooks in one settings
file, and the `/learn` and `/save-learnings` commands next to it); `--remove` takes out exactly
what it added, `--dry-run` shows the plan. The plan and the writing are client/install.py's."""

from __future__ import annotations

import difflib
import os

from ..errors import CtlError
from ..files import worktree_top
from ..install import (
    Change,
    InstallError,
    Plan,
    apply,
    plan_install,
    plan_remove,
)


def add_parser(sub) -> None:
    s = sub.add_parser(
        "install", help="wire the hooks into Claude Code's settings.json and add /learn, "
        "/save-learnings",
        description="Add autoharness's hooks to Claude Code's settings (user: "
        "$CLAUDE_CONFIG_DIR/settings.json; project: .claude/settings.json) and install the "
        "/learn and /save-learnings commands. Your own hooks and settings are kept; a backup "
        "is kept under the state dir before any change.")
    s.add_argument("--scope", choices=("user", "project"), default="user",
                   help="user settings (default) or the project's .claude/settings.json")
    s.add_argument("--project", metavar="DIR",
                   help="project directory for --scope project (default: the git worktree "
                   "of the current directory)")
    s.add_argument("--dry-run", action="store_true", help="show what would change; write nothing")
    s.add_argument("--remove", action="store_true",
                   help="take out exactly what autoharness added")
    s.add_argument("--force", action="store_true",
                   help="install even if the plugin or the other scope already has the hooks, "
                   "or replace your own learn.md/save-learnings.md")
    s.set_defaults(func=do_install)


def _diff(c: Change) -> str:
    old = (c.old or b"").decode("utf-8", "replace").splitlines(keepends=True)
    new = (c.new or b"").decode("utf-8", "replace").splitlines(keepends=True)
    return "".join(difflib.unified_diff(old, new, c.path if c.old is not None else "/dev/null",
                                        c.path if c.new is not None else "/dev/null"))


def report(plan: Plan, backups: dict[str, str], *, dry_run: bool, remove: bool) -> None:
    verb = {"create": "create", "update": "update", "delete": "remove"}
    for c in plan.changes:
        if c.action in verb:
            word = f"would {verb[c.action]}" if dry_run else f"{verb[c.action]}d"
            note = f" ({c.note})" if c.note else ""
            b = f"  [backup: {backups[c.path]}]" if c.path in backups else ""
            print(f"{word:<16} {c.path}{note}{b}")
        elif c.action == "kept":
            print(f"{'left alone':<16} {c.path} ({c.note})")
        else:
            print(f"{'no change':<16} {c.path}")
    if dry_run:
        for c in plan.changes:
            if c.action in verb and c.path == plan.settings_path:
                print(_diff(c), end="")
        print("dry run: nothing was written")
        return
    if not plan.changed:
        what = "nothing of autoharness's is installed" if remove else "already installed"
        print(f"no change: {what} ({plan.scope} scope)")
    elif remove and not plan.record:
        left = leftovers(plan)
        print(f"autoharness's hooks and commands removed from the {plan.scope} scope. No record "
              "of this install was found (its state dir was moved, replaced or damaged), so "
              "what else it created cannot be told from yours and stays"
              + (f": {'; '.join(left)}" if left else "")
              + ". Restart open Claude Code sessions to drop the hooks.")
    elif remove:
        back = [c.path for c in plan.changes if c.action == "update" and c.mode is not None]
        print(f"autoharness removed from the {plan.scope} scope; your own hooks and settings "
              "are as they were" + (f", and your own {', '.join(back)} put back" if back else "")
              + ". Restart open Claude Code sessions to drop the hooks.")
    else:
        print(f"autoharness hooks installed ({plan.scope} scope): SessionStart, "
              f"UserPromptSubmit, PreToolUse (async, plus a child write guard), Stop, "
              f"SessionEnd -> {plan.hook}")
        for w in plan.warnings:
            print(f"warning: {w}; both run for every event until you keep one "
                  "(`autoharnessctl doctor` shows it)")
        print("Claude Code reads hooks when a session starts: restart open sessions. "
              "Check everything with `autoharnessctl doctor`.")


def leftovers(plan: Plan) -> list[str]:
    """What a removal without a record leaves that looks like an install's: an empty settings
    file, an empty commands directory (remove them if you did not make them)."""
    out = []
    try:
        with open(plan.settings_path, "rb") as f:
            if f.read().strip() in (b"{}", b""):
                out.append(f"{plan.settings_path} (now empty: `{{}}`)")
    except OSError:
        pass
    for c in plan.changes:
        d = os.path.dirname(c.path)
        if c.action == "delete" and c.path != plan.settings_path and os.path.isdir(d) \
                and not os.listdir(d) and f"{d} (empty)" not in out:
            out.append(f"{d} (empty)")
    return out


def do_install(args) -> int:
    project = os.path.abspath(args.project) if args.project else worktree_top(os.getcwd())
    if args.scope == "project" and not os.path.isdir(project):
        raise InstallError(f"project directory {project} does not exist: pass an existing "
                           "directory with --project")
    try:
        if args.remove:
            plan = plan_remove(args.scope, project)
        else:
            plan = plan_install(args.scope, project, force=args.force)
        backups = {} if args.dry_run else apply(plan, remove=args.remove)
    except OSError as e:
        raise CtlError(f"cannot write {e.filename}: {e.strerror}; fix the permissions and rerun "
                       "(files already written are complete, never half-written)") from None
    report(plan, backups, dry_run=args.dry_run, remove=args.remove)
    return 0
