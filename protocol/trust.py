"""What a session's environment may decide when a hook starts the daemon.

A session's environment is the repository's to set: Claude Code builds it from settings `env`,
which a cloned repository's `.claude/settings.json` can carry. A daemon started from it would
keep those values for every later session in every project. So a hook's autostart hands the
daemon only `autostart_env`: no setting (`AUTOHARNESS_<KEY>`), no `ANTHROPIC_*`, no proxy
variable; the daemon's settings come from the user's config file alone. The location variables
pass, because the daemon must listen where the hook looks, but only when `untrusted_location`
finds nothing: each is an absolute path, reached through no link but root's (`/proc/self/cwd`
is the user's), and outside the session's project (a repository cannot have planted it).
An explicit start (`autoharnessctl start`, the service) keeps its whole environment.

Stdlib only (`os`, `stat`, `pwd`, and `paths`): the hook imports it on its cold path.
"""

import os
import stat

from .paths import within

# Where autoharness's own files are, and what the daemon's children find files with (the ssh
# agent: `sync` pushes with git). Checked by `untrusted_location`.
LOCATION_VARS = ("AUTOHARNESS_HOME", "AUTOHARNESS_SOCKET", "AUTOHARNESS_CONFIG",
                 "CLAUDE_CONFIG_DIR", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR",
                 "HOME", "TMPDIR", "SSH_AUTH_SOCK")
# Who the user is and how text is shown: nothing here can send data anywhere or weaken redaction.
PLAIN_VARS = ("USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ")
PLAIN_PREFIX = "LC_"


def _user_home() -> str:
    """The home directory the system has for this user (not `$HOME`, which a session sets)."""
    import pwd

    try:
        return os.path.realpath(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        return "/"


# What makes a directory a project a repository could have brought: a git worktree, or project
# settings of Claude Code (whose `env` is what a session's environment is built from).
PROJECT_MARKS = (".git", os.path.join(".claude", "settings.json"),
                 os.path.join(".claude", "settings.local.json"))


def project_dirs(cwd: str, env) -> list[str]:
    """The session's project: the nearest directory holding `cwd` (and `CLAUDE_PROJECT_DIR`)
    with a `.git` or Claude Code project settings; none for a directory outside any. The
    user's home and the directories above it are no project (`~/.claude/settings.json` is
    the user's own, and a session started in `~` would make every path untrusted)."""
    home = _user_home()
    out = []
    for start in (cwd, env.get("CLAUDE_PROJECT_DIR", "")):
        if not start or not os.path.isabs(start):
            continue
        d = os.path.realpath(start)
        while not within(home, d):
            if any(os.path.lexists(os.path.join(d, m)) for m in PROJECT_MARKS):
                if d not in out:
                    out.append(d)
                break
            up = os.path.dirname(d)
            if up == d:
                break
            d = up
    return out


def _foreign_link(path: str, lstat=os.lstat) -> str:
    """The first link on the way to `path` that is not root's ("" when none): a link the user
    (or a repository, or `/proc/self/cwd`) made can point anywhere."""
    cur = os.sep
    for part in path.split(os.sep):
        if part in ("", "."):
            continue
        nxt = os.path.join(cur, part)
        try:
            st = lstat(nxt)
        except OSError:
            return ""  # missing from here on: made by us
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid != 0:
                return nxt
            cur = os.path.realpath(nxt)
        else:
            cur = nxt
    return ""


def untrusted_location(env, cwd: str) -> str:
    """Why the locations this environment names cannot be handed to an autostarted daemon
    ("" when they can): the first variable that is relative, holds `..`, goes through a link
    that is not root's, or points into the session's project."""
    projects = project_dirs(cwd, env)
    for var in LOCATION_VARS:
        value = env.get(var, "")
        if not value:
            continue
        shown = f"{var}={value!r}"
        if not os.path.isabs(value):
            return f"{shown} is not an absolute path"
        if ".." in value.split(os.sep):
            return f"{shown} goes up with `..`"
        link = _foreign_link(value)
        if link:
            return f"{shown} goes through the link {link}"
        real = os.path.realpath(value)
        for root in projects:
            if within(real, root):
                return f"{shown} is inside the session's project {root}"
    return ""


def autostart_env(env, cwd: str) -> dict[str, str]:
    """The environment a hook's autostart gives the daemon: the plain and location variables
    (checked by the caller with `untrusted_location`) and a PATH without relative entries or
    entries inside the project (the daemon runs `claude` and `git` from it)."""
    out = {k: env[k] for k in PLAIN_VARS + LOCATION_VARS if env.get(k)}
    out.update({k: v for k, v in env.items() if k.startswith(PLAIN_PREFIX)})
    projects = project_dirs(cwd, env)
    keep = [p for p in env.get("PATH", "").split(os.pathsep)
            if os.path.isabs(p) and not any(within(os.path.realpath(p), r) for r in projects)]
    out["PATH"] = os.pathsep.join(keep) or os.defpath
    return out
