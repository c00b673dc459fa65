"""The one judge of paths that must be private (the state and socket dirs, the socket, the
reflector's working dir): callers ask it and add only their own fix text. Apart from
`protocol.paths` so the hook, which imports that on every tool call, loads nothing more."""

import os
import stat


class Unsafe:
    """Why a path that must be private is not: `kind` (not_dir, not_socket, not_owner, open),
    `what` happened (one sentence), and the exact `fix` for the caller that asked."""

    __slots__ = ("kind", "what", "fix")

    def __init__(self, kind: str, what: str, fix: str):
        self.kind, self.what, self.fix = kind, what, fix

    def __str__(self) -> str:
        return f"{self.what}: {self.fix}"


def private_problem(path: str, *, socket: bool = False, uid: int | None = None,
                    lstat=os.lstat, fixes: dict[str, str] | None = None) -> Unsafe | None:
    """The one judge of a private path: None when `path` is a directory (`socket`: a socket),
    not a symlink, owned by `uid` (default: ours) and closed to group and others; otherwise its
    first problem. The fix is the caller's for that kind (`fixes`), else a plain default.

    Errors reading the path (missing, a file on the way) propagate: what they mean is the
    caller's to say."""
    uid = os.getuid() if uid is None else uid
    st = lstat(path)
    want, mode = ("socket", 0o600) if socket else ("directory", 0o700)
    right_kind = stat.S_ISSOCK(st.st_mode) if socket else stat.S_ISDIR(st.st_mode)
    if stat.S_ISLNK(st.st_mode) or not right_kind:
        p = Unsafe("not_socket" if socket else "not_dir", f"{path} is not a {want}",
                   f"move it away (`mv {path} {path}.old`)")
    elif st.st_uid != uid:
        p = Unsafe("not_owner", f"{path} is owned by uid {st.st_uid}, not you ({uid})",
                   f"`sudo chown -R {uid} {path}`")
    elif st.st_mode & 0o077:
        p = Unsafe("open", f"{path} is open to other users (mode {stat.S_IMODE(st.st_mode):o}, "
                           f"want {mode:o})", f"chmod {mode:o} {path}")
    else:
        return None
    if fixes and p.kind in fixes:
        p.fix = fixes[p.kind]
    return p
