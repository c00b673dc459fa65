"""The hook client: what `autoharness-hook` runs for every Claude Code hook event.

A module, not the script itself, so that it loads from its compiled cache: a script is compiled
again on every run, and that was most of the hook's cost above a bare interpreter's start.

Hot path: reads the hook JSON from stdin, wraps the raw bytes in an envelope (with a random event
id) without parsing them, sends one frame to the daemon, prints the daemon's hook output if any,
and always exits 0. An event the daemon did not answer in time is spooled, never dropped
silently: one that cannot be written (a full disk) leaves a marker the daemon counts, and one
whose locations a repository may have set (protocol/trust.py) is kept nowhere, said on stderr.
Only builtins, `os`, `sys` and `_socket` are imported here unless there is output to print.
The daemon is the user's own: the peer's uid on the socket is checked before a byte is sent.
With AUTOHARNESS_HOOK=check (its own synchronous PreToolUse entry) it is the check hook instead
(client/checkhook.py): it reads the compiled table of checks, never the socket, and counts
nothing.
"""

import os
import sys

CHILD_DENIED_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit")
# What a reflector child's file write gets, here and from the installed guard (client/settings.py
# prints it from the shell): one line of JSON, no quote the shell would need escaped.
CHILD_DENY = ('{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny",'
              '"permissionDecisionReason":"autoharness reflector sessions may not modify files"}}')
SHORT_WAIT = 0.25  # PreToolUse, Stop, SessionEnd: never hold Claude Code up
LONG_WAIT = 2.0  # SessionStart: its output is the context
CONNECT_WAIT = 0.25
READY_WAIT = 1.5  # a SessionStart that autostarted the daemon waits this long for its context
READY_POLL = 0.02


def read_stdin() -> bytes:
    chunks = []
    while True:
        try:
            b = os.read(0, 1 << 20)
        except OSError:
            break
        if not b:
            break
        chunks.append(b)
    return b"".join(chunks)


def child_guard(raw: bytes) -> None:
    """Reflector child sessions: deny file writes locally, count nothing."""
    import json

    try:
        ev = json.loads(raw)
    except ValueError:
        return
    if not isinstance(ev, dict) or ev.get("hook_event_name") != "PreToolUse":
        return
    if ev.get("tool_name") in CHILD_DENIED_TOOLS:
        sys.stdout.write(CHILD_DENY + "\n")


def event_name(raw: bytes) -> bytes:
    i = raw.find(b'"hook_event_name"')
    return raw[i + 17 : i + 64] if i >= 0 else b""


VIAS = (b"plugin", b"settings")  # AUTOHARNESS_VIA, set by the install that runs the hook


def envelope(raw: bytes, ts: float, eid: bytes, via: bytes = b"") -> bytes:
    """The `hook` request of the wire protocol (protocol/messages.py), built by hand."""
    from ..protocol import PROTOCOL

    if not raw.strip():
        raw = b"null"
    # One line per record: raw newlines in JSON are only ever whitespace.
    raw = raw.replace(b"\n", b" ").replace(b"\r", b" ")
    tail = b',"via":"%b"' % via if via in VIAS else b""
    return b'{"type":"hook","v":%d,"id":"%b","ts":%.6f%b,"payload":%b}' % (
        PROTOCOL, eid, ts, tail, raw)


def refused(reply: bytes) -> bool:
    """The daemon's error says the event itself is at fault (`retry` false): it was counted
    as rejected, and a spooled copy would only be refused again."""
    return b'"type":"error"' in reply and b'"retry":false' in reply


def decodable(raw: bytes) -> bool:
    """Whether this can be a hook event at all: Claude Code sends one JSON object. With no
    daemon to ask, anything else (junk on stdin, an empty read) is dropped rather than spooled
    for a replay to refuse. A shape check, not a parse: no `json` import on this path; the
    daemon, when it answers, judges the rest (and says `retry` false)."""
    body = raw.strip()
    return body[:1] == b"{" and body[-1:] == b"}"


def frame(body: bytes) -> bytes:
    """A length-prefixed frame as protocol/framing.py makes it, with the header size the
    protocol package defines (already imported: no module more on the hot path)."""
    from ..protocol import FRAME_HEADER

    return len(body).to_bytes(FRAME_HEADER, "big") + body


def send(path: str, body: bytes, wait: float, connect_wait: float = CONNECT_WAIT):
    """Send one frame; return the reply bytes, b"" if none came in time, None if unreachable.

    Nothing is sent to a socket another user listens on (their process took the path): that
    is no reply (b""), so the event is spooled, nothing is printed and no daemon is started.
    """
    import _socket

    from ..protocol.private import peer_uid

    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        s.settimeout(connect_wait)  # a local connect is immediate unless the backlog is full
        try:
            s.connect(path)
        except OSError:
            return None
        uid = peer_uid(s)  # None: the system cannot say; fail open
        if uid is not None and uid != os.getuid():
            return b""
        try:
            s.sendall(frame(body))
        except OSError:
            return b""
        # The reply deadline starts only once the (possibly large) send is done.
        s.settimeout(wait)
        from ..protocol import FRAME_HEADER

        try:
            header = recv_exactly(s, FRAME_HEADER)
            return recv_exactly(s, int.from_bytes(header, "big")) if header else b""
        except OSError:
            return b""
    finally:
        s.close()


def recv_exactly(s, n: int) -> bytes:
    """`n` bytes from the socket; b"" if it closed first (a short read is no reply)."""
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            return b""
        buf += chunk
    return buf


def send_when_ready(path: str, body: bytes, budget: float, clock, sleep) -> bytes | None:
    """Send once the daemon just started accepts connections, within `budget` seconds in all."""
    deadline = clock() + budget
    while True:
        left = deadline - clock()
        if left <= 0:
            return None
        reply = send(path, body, left, min(CONNECT_WAIT, left))
        if reply is not None:
            return reply
        sleep(min(READY_POLL, max(0.0, deadline - clock())))


def spool(state_dir: str, name: str, record: bytes) -> bool:
    """Keep one undelivered event as its own file in `<state>/spool` (the maildir pattern): it is
    written under a dot-name and renamed into place, so no two writers share a file and the
    daemon never sees a partial record. Only into the user's own 0700 directories, never
    through a symlink (each directory is checked through the descriptor it is written by).
    When the record cannot be written (a full disk), an empty `lost-event.` marker is left in
    the state dir, which needs no data block, so the daemon counts and reports the loss."""
    from ..protocol.paths import SPOOL, make_private_dirs
    from ..protocol.private import open_private_dir

    try:
        sfd = open_private_dir(state_dir, make=make_private_dirs)
    except OSError:
        return False
    try:
        try:
            try:
                os.mkdir(SPOOL, 0o700, dir_fd=sfd)
            except FileExistsError:
                pass
            dfd = open_private_dir(SPOOL, dir_fd=sfd)
        except OSError:
            return _note_lost(sfd, name)
        try:
            return _write_record(dfd, name, record) or _note_lost(sfd, name)
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)


def _write_record(dfd: int, name: str, record: bytes) -> bool:
    from ..protocol.private import open_in

    tmp = "." + name
    try:
        fd = open_in(dfd, tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except OSError:
        return False
    try:
        try:
            view = memoryview(record)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        return True
    except OSError:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        return False


def _note_lost(sfd: int, name: str) -> bool:
    """The event could not be kept: say so where the daemon looks (an empty file needs no
    data block, so it is made on a full disk too) and on stderr (Claude Code's debug output)."""
    from ..protocol.private import open_in
    from ..protocol.spool import LOST_PREFIX  # already loaded: its caller's

    try:
        os.close(open_in(sfd, LOST_PREFIX + name, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    except OSError:
        pass
    sys.stderr.write("autoharness: this hook event could not be kept (is the disk full?); "
                     "`autoharnessctl doctor` counts such losses\n")
    return False


def autostart_enabled(paths) -> bool:
    flag = os.environ.get("AUTOHARNESS_AUTOSTART")
    if flag is not None:
        return flag.strip().lower() not in ("0", "false", "no", "off")
    try:
        import stat
        import tomllib

        # never blocks: a FIFO planted as config.toml must not hold up Claude Code
        fd = os.open(paths.config_file(), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with open(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return False  # the daemon refuses it too; `autoharnessctl doctor` says so
            return bool(tomllib.load(f).get("autostart", True))
    except Exception:
        return True


# A daemon that does not come up (a bad config, a broken install) is not respawned by every
# hook: after each spawn that did not reach `ready` the next waits twice as long.
AUTOSTART_BACKOFF_S = 10.0
AUTOSTART_BACKOFF_MAX_S = 300.0


def autostart_tries(path: str) -> tuple[int, float]:
    """(spawns since the daemon was last ready, when the last was) from `<state>/autostart.tries`
    ("COUNT UNIX_TIME"; the daemon removes it once it is ready). (0, 0.0) when absent or odd."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            words = os.read(fd, 64).split()
        finally:
            os.close(fd)
        return max(0, int(words[0])), float(words[1])
    except (OSError, ValueError, IndexError):
        return 0, 0.0


def autostart_wait(tries: int) -> float:
    """Seconds after the last of `tries` unanswered spawns before the next: 0, 10, 20, 40 ... 300."""
    if tries <= 0:
        return 0.0
    return min(AUTOSTART_BACKOFF_S * 2.0 ** min(tries - 1, 30), AUTOSTART_BACKOFF_MAX_S)


def start_daemon(paths, sock_path: str) -> bool:
    """Start `autoharnessd` detached; one spawner at a time (the daemon inherits the lock), and
    none while the last spawns' back-off runs. False when no daemon is on its way (backing
    off, the state dir not private, or the spawn failed): then nothing is worth waiting for.
    The caller has checked the session's locations (`untrusted`). Every file is opened in the
    checked state dir, never through a link, and the daemon gets `trust.autostart_env`: no
    setting of the session's."""
    import fcntl
    import time

    from ..protocol import PROTOCOL
    from ..protocol.private import open_in, open_private_dir

    try:
        sfd = open_private_dir(paths.state_dir(), make=paths.make_private_dirs)
    except OSError:
        return False  # another user's, open to others, or a link: the daemon would refuse it
    try:
        try:
            fd = open_in(sfd, os.path.basename(paths.spawn_lock_file()), os.O_RDWR | os.O_CREAT)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return True  # another hook is starting it
        tries, last = autostart_tries(paths.autostart_tries_file())
        now = time.time()
        if last <= now < last + autostart_wait(tries):
            os.close(fd)
            return False  # the last spawn did not come up: wait (`autoharnessctl doctor` says why)
        if send(sock_path, b'{"type":"status","v":%d}' % PROTOCOL, 0.5) is not None:
            os.close(fd)
            return True  # it came up meanwhile
        try:  # counted before the spawn: a daemon that dies at once has counted too
            tfd = open_in(sfd, os.path.basename(paths.autostart_tries_file()),
                          os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                os.write(tfd, b"%d %.3f\n" % (tries + 1, now))
            finally:
                os.close(tfd)
        except OSError:
            pass
        try:
            log = open_in(sfd, os.path.basename(paths.log_file()), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        except OSError:
            os.close(fd)
            return False
    finally:
        os.close(sfd)
    from ..protocol import trust

    os.set_inheritable(fd, True)
    env = trust.autostart_env(os.environ, os.getcwd())
    env["AUTOHARNESS_SPAWN_LOCK_FD"] = str(fd)
    env["AUTOHARNESS_STARTED_BY"] = "autostart"
    spawned = False
    try:
        os.posix_spawn(
            sys.executable,
            [sys.executable, "-m", "claude_autoharness.daemon"],
            env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, log, 1),
                (os.POSIX_SPAWN_DUP2, log, 2),
            ],
            setsid=True,
        )
        spawned = True
    except OSError:
        pass
    finally:
        os.close(log)
        os.close(fd)
    return spawned


def untrusted(paths) -> str:
    """Why this session's environment cannot start a daemon or keep events ("" when it can):
    its locations may be a repository's (protocol/trust.py)."""
    from ..protocol import trust

    try:
        cwd = os.getcwd()
    except OSError:
        cwd = ""
    why = trust.untrusted_location(os.environ, cwd)
    if why:
        sys.stderr.write(f"autoharness: not starting the daemon or keeping this event: {why} "
                         "(a repository's settings may have set it; start the daemon "
                         "yourself with `autoharnessctl start`)\n")
    return why


USAGE = """usage: autoharness-hook < HOOK_EVENT_JSON

What Claude Code runs for each hook event: reads the event's JSON on stdin, reports it to the
autoharness daemon (starting it if needed, spooling the event while it is down), prints the
daemon's hook output if any, and always exits 0. It is not meant to be run by hand:
`autoharnessctl install` wires it into Claude Code, `autoharnessctl doctor` checks the wiring,
`autoharnessctl status` shows what it reported. AUTOHARNESS_DISABLE=1 turns it off.
"""


def wants_usage() -> bool:
    """Any argument, or a terminal on stdin, is a person: Claude Code passes neither.
    Without this a person would wait on a silent terminal for JSON that never comes."""
    if len(sys.argv) > 1:
        return True
    try:
        return os.isatty(0)
    except OSError:
        return False


def main() -> None:
    if wants_usage():
        sys.stdout.write(USAGE)
        return
    raw = read_stdin()
    env = os.environ
    if env.get("AUTOHARNESS_DISABLE", "") not in ("", "0"):
        return
    if env.get("AUTOHARNESS_HOOK") == "check":  # the check hook's own entry: decide, count nothing
        if env.get("AUTOHARNESS_CHILD_SESSION") != "1":
            from .checkhook import main as check

            check(raw)
        return
    if env.get("AUTOHARNESS_CHILD_SESSION") == "1":
        child_guard(raw)
        return
    report(raw, env)


def report(raw: bytes, env) -> None:
    """Hand the event to the daemon (starting it if it may) and print its output, or spool it."""
    import time

    from ..protocol import paths

    # A random id per event: a spooled copy keeps it, so the daemon counts the event once
    # however many copies reach it (a reply lost after the daemon acted, a replay cut short).
    eid = os.urandom(16).hex().encode()
    body = envelope(raw, time.time(), eid, env.get("AUTOHARNESS_VIA", "").encode())
    session_start = b"SessionStart" in event_name(raw)
    sock_path = paths.socket_path()
    reply = send(sock_path, body, LONG_WAIT if session_start else SHORT_WAIT)
    autostart = reply is None and autostart_enabled(paths)
    if autostart and untrusted(paths):
        return
    if autostart and session_start:  # the session that woke the daemon gets its context too
        if start_daemon(paths, sock_path):
            reply = send_when_ready(sock_path, body, READY_WAIT, time.monotonic, time.sleep)
    # Acknowledged means a hook reply: none in time, a short read, no daemon, or an error that
    # says to retry (e.g. the daemon could not journal it: a full disk) and the event is
    # spooled, never lost. An event the daemon refused as malformed is not: it was counted as
    # rejected, and a replay would refuse it again.
    if not reply or b'"hook_reply"' not in reply:
        if (reply and refused(reply)) or not decodable(raw):
            return
        from ..protocol.spool import record_name

        if not autostart and untrusted(paths):
            return
        spool(paths.state_dir(), record_name(time.time_ns(), eid.decode()), body)
        if autostart and not session_start:
            start_daemon(paths, sock_path)
        return
    print_output(reply)


def print_output(reply: bytes) -> None:
    """The hook output in the daemon's reply, if any, on stdout (for Claude Code)."""
    if b'"output"' in reply:
        import json

        try:
            out = json.loads(reply).get("output")
        except (ValueError, AttributeError):
            out = None
        if isinstance(out, str) and out:
            sys.stdout.write(out + "\n")
