"""The one judge of paths that must be private (the state and socket dirs, the socket, the
reflector's working dir, the directories above them), and of who is at the other end of the
socket: callers ask it and add only their own fix text. Stdlib only (`os`, `sys`, `stat`, which
`os` loads anyway, and `_socket`): the hook imports it on every tool call."""

import os
import stat
import sys


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
        # never "chown it": it is someone else's, and taking it over keeps whatever they
        # planted inside (links, files) where we would then write
        p = Unsafe("not_owner", f"{path} is owned by uid {st.st_uid}, not you ({uid})",
                   f"do not take it over: remove it (`sudo rm -r {path}`) or use another "
                   "directory of yours")
    elif st.st_mode & 0o077:
        p = Unsafe("open", f"{path} is open to other users (mode {stat.S_IMODE(st.st_mode):o}, "
                           f"want {mode:o})", f"chmod {mode:o} {path}")
    else:
        return None
    if fixes and p.kind in fixes:
        p.fix = fixes[p.kind]
    return p


class NotPrivate(OSError):
    """A directory we were about to write into is not our own private one (`unsafe` says why
    and how to fix it): nothing was written."""

    def __init__(self, unsafe: Unsafe):
        super().__init__(1, str(unsafe))
        self.unsafe = unsafe


DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_private_dir(path: str, *, make=None, dir_fd: int | None = None) -> int:
    """A descriptor of `path` (relative to `dir_fd` if given), checked to be our own directory
    closed to others, opened without following a link: the place to write a file into (with
    `open_in`), so that what was checked is what is written into. `make(path)` creates it
    first when given (missing parents 0700). Raises NotPrivate (nothing opened) or the
    OSError of the open."""
    if make is not None:
        make(path)
    try:
        fd = os.open(path, DIR_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        if e.errno in (20, 40):  # ENOTDIR, ELOOP: a file or a link where the directory belongs
            raise NotPrivate(Unsafe("not_dir", f"{path} is not a directory",
                                    f"move it away (`mv {path} {path}.old`)")) from None
        raise
    bad = private_problem(path, lstat=lambda _: os.fstat(fd))
    if bad is not None:
        os.close(fd)
        raise NotPrivate(bad)
    return fd


def open_in(dir_fd: int, name: str, flags: int, mode: int = 0o600) -> int:
    """Open `name` inside a directory opened by `open_private_dir`, never through a link."""
    return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)


def shared_ancestor(path: str, *, uid: int | None = None, lstat=os.lstat) -> Unsafe | None:
    """The first directory above `path` (on its path as written and on its real path) that
    another user could change, else None. Such a user could rename the directory holding
    ours and put their own in its place: their socket, their state dir.

    Safe: a directory owned by `uid` (default: ours) or root, and not writable by others (nor
    by its group, unless that is the user's private group) unless sticky (/tmp: others can
    add entries but not rename ours; an entry in it that another user made is caught one
    level down, by its owner). Missing directories are skipped: they will be made by us.
    The `fix` is a plain default; callers add their own."""
    uid = os.getuid() if uid is None else uid
    seen: set[str] = set()
    for full in (os.path.abspath(path), os.path.realpath(path)):
        d = os.path.dirname(full)
        while d not in seen:
            seen.add(d)
            try:
                st = lstat(d)
            except FileNotFoundError:
                st = None
            if st is not None:
                why = _shared(st, uid)
                if why:
                    return Unsafe("shared", f"{d}, above {path}, {why}",
                                  "use a directory whose parents only you and root can change")
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
    return None


def _shared(st: os.stat_result, uid: int) -> str:
    if st.st_uid not in (uid, 0):
        return f"belongs to uid {st.st_uid} (that user can rename what is in it)"
    if stat.S_ISLNK(st.st_mode) or st.st_mode & stat.S_ISVTX:
        return ""  # a link's own mode means nothing (its directory and target are checked)
    others = st.st_mode & 0o002 or (st.st_mode & 0o020 and not _own_group(st.st_gid, uid))
    if others:
        return (f"can be written by other users and is not sticky "
                f"(mode {stat.S_IMODE(st.st_mode):o})")
    return ""


def _own_group(gid: int, uid: int) -> bool:
    """A user private group (named as the user, no other member listed): group write on the
    user's own directories is then no one else's (the usual umask 002 on such systems)."""
    import grp
    import pwd

    try:
        user, group = pwd.getpwuid(uid), grp.getgrgid(gid)
    except KeyError:
        return False
    return group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}


def peer_uid(sock) -> int | None:
    """The uid of the process at the other end of a connected Unix socket (SO_PEERCRED on
    Linux, LOCAL_PEERCRED on macOS and the BSDs); None where the system cannot say or the
    call fails: a caller that fails open then still talks. One getsockopt, and `_socket` only
    (the hook's import budget)."""
    import _socket

    try:
        if hasattr(_socket, "SO_PEERCRED"):  # struct ucred {pid_t pid; uid_t uid; gid_t gid}
            raw = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
        elif sys.platform == "darwin" or "bsd" in sys.platform:
            # struct xucred {u_int cr_version; uid_t cr_uid; ...}: 76 bytes on macOS, more on
            # FreeBSD; the kernel copies what fits
            raw = sock.getsockopt(0, getattr(_socket, "LOCAL_PEERCRED", 1), 128)  # SOL_LOCAL
        else:
            return None
    except OSError:
        return None
    return int.from_bytes(raw[4:8], sys.byteorder) if len(raw) >= 8 else None


def unusable_dir(path: str) -> str:
    """Why `path`, where one of our directories belongs, cannot serve as one, with the fix in
    the same sentence ("" when nothing on the way is at fault): a file (or anything not a
    directory) on the way to it, or a directory of ours whose mode keeps its owner out (000)."""
    parts = os.path.abspath(path).split(os.sep)
    for i in range(2, len(parts) + 1):
        p = os.sep.join(parts[:i])
        try:
            st = os.stat(p)  # following links: /tmp may be one (macOS)
        except FileNotFoundError:
            return ""
        except OSError as e:
            return (f"cannot reach {p} ({e.strerror}): give yourself access to the directories "
                    "above it (`ls -ld` each), or keep autoharness's files elsewhere")
        mode = stat.S_IMODE(st.st_mode)
        if not stat.S_ISDIR(st.st_mode):
            kind = "a file" if stat.S_ISREG(st.st_mode) else "not a directory"
            return (f"{p} is {kind} (mode {mode:03o}) where a directory belongs: move it away "
                    f"(`mv {p} {p}.old`) and start again")
        if p == os.path.abspath(path) and st.st_uid == os.getuid() and mode & 0o700 != 0o700:
            return (f"{p} has mode {mode:03o}: its owner (you) cannot list or write it: "
                    f"`chmod 700 {p}`")
    return ""
