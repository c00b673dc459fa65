"""`autoharnessd`: lifecycle — config, directories, the single-instance lock, the socket,
readiness, signals, and the background tasks."""

import argparse
import errno
import fcntl
import logging
import os
import signal
import socket
import stat
import sys
from typing import TextIO, cast

import anyio
import structlog

from ..protocol import VERSION, paths, private
from ..protocol.config import ConfigError, settings_env
from ..protocol.config import load as load_config
from ..protocol.words import printable
from . import listener as accept
from . import proctitle, shutdown
from .core import Daemon
from .persist import dirs
from .persist.health import describe
from .server import Server

log = structlog.get_logger("autoharness")
SWITCH_INTERVAL_S = 0.0005


class StartupError(Exception):
    pass


def configure_logging(level: str) -> None:
    renderer = (structlog.dev.ConsoleRenderer() if sys.stdout.isatty()
                else structlog.processors.JSONRenderer())
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(cast(TextIO, _Unfailing(sys.stdout))),
        cache_logger_on_first_use=True,
    )


class _Unfailing:
    """The log's stream, whose write errors are dropped: a full disk under the log must not
    turn every log line into an exception that takes a request (or a loop) down with it."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> None:
        try:
            self.stream.write(text)
        except (OSError, ValueError):
            pass

    def flush(self) -> None:
        try:
            self.stream.flush()
        except (OSError, ValueError):
            pass


def take_lock(path: str) -> int:
    """The flock'ed pid file: exactly one daemon per state dir (never opened through a link)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        try:
            pid = os.read(fd, 32).decode().strip() or "?"
        except OSError:
            pid = "?"
        os.close(fd)
        raise StartupError(f"another autoharnessd is already running (pid {pid}; lock {path})") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def _socket_activated() -> socket.socket | None:
    """systemd socket activation: adopt fd 3 when LISTEN_PID/LISTEN_FDS name this process."""
    if os.environ.get("LISTEN_PID") != str(os.getpid()):
        return None
    try:
        n = int(os.environ.get("LISTEN_FDS", "0"))
    except ValueError:
        return None
    if n < 1:
        return None
    for var in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        os.environ.pop(var, None)
    sock = socket.socket(fileno=3)
    if sock.family != socket.AF_UNIX:
        raise StartupError("socket activation passed a non-Unix socket on fd 3")
    return sock


def bind_socket(path: str) -> socket.socket:
    """Bind the listening socket; a stale one is replaced, a live one is never touched."""
    if len(os.fsencode(path)) > paths.MAX_SOCKET_PATH:
        raise StartupError(
            f"socket path is {len(os.fsencode(path))} bytes, over the OS limit of "
            f"{paths.MAX_SOCKET_PATH}: set AUTOHARNESS_SOCKET (or AUTOHARNESS_HOME) to a shorter path"
        )
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None:
        if not stat.S_ISSOCK(st.st_mode):
            raise StartupError(f"{path} exists and is not a socket: move it away and restart")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.settimeout(1.0)
        try:
            probe.connect(path)
        except OSError as e:
            if e.errno not in (errno.ECONNREFUSED, errno.ENOENT):
                raise StartupError(f"cannot probe existing socket {path}: {e}") from None
            os.unlink(path)  # stale: its daemon is gone
        else:
            raise StartupError(f"a live daemon already answers at {path}; not replacing it")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the socket is never briefly open to others
    try:
        sock.bind(path)
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(512)
    return sock


def notify_ready() -> None:
    addr = os.environ.get("NOTIFY_SOCKET")
    if not addr:
        return
    if addr.startswith("@"):
        addr = "\0" + addr[1:]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.connect(addr)
        s.sendall(b"READY=1\nMAINPID=%d\n" % os.getpid())
    except OSError as e:
        log.warning("sd_notify failed", error=str(e))
    finally:
        s.close()


def release_spawn_lock() -> None:
    """The hook that started us handed over its spawn lock; drop it now that we listen, with
    the hook's count of spawns that did not come up (its autostart back-off)."""
    try:
        os.unlink(paths.autostart_tries_file())
    except OSError:
        pass
    fd = os.environ.pop("AUTOHARNESS_SPAWN_LOCK_FD", None)
    if fd and fd.isdigit():
        try:
            os.close(int(fd))
        except OSError:
            pass


def tighten_state_files(state_dir: str) -> None:
    """State files are 0600: one loosened by hand (or an old umask) is fixed, and said so."""
    for name in os.listdir(state_dir):
        path = os.path.join(state_dir, name)
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and st.st_mode & 0o077 and st.st_uid == os.getuid():
            os.chmod(path, 0o600)
            log.warning("state file was open to others; now 0600", file=path,
                        mode=f"{st.st_mode & 0o777:o}")


def _setting_for(which: str) -> str:
    """The setting that moves the state (`state`) or socket (`socket`) directory."""
    env = os.environ
    if which == "socket" and env.get("AUTOHARNESS_SOCKET"):
        return "AUTOHARNESS_SOCKET"
    if env.get("AUTOHARNESS_HOME"):
        return "AUTOHARNESS_HOME"
    if which == "socket" and env.get("XDG_RUNTIME_DIR", "").strip() and sys.platform != "darwin":
        return "XDG_RUNTIME_DIR"
    return "XDG_STATE_HOME" if sys.platform != "darwin" else "AUTOHARNESS_HOME"


def refuse_shared(path: str, which: str) -> None:
    """Refuse a state or socket directory another user could swap: one with a directory above
    it that is theirs, or writable by others and not sticky (an attacker's dir in /tmp). The
    hook and the CLI would otherwise talk to their socket, and the state be written into
    their directory."""
    bad = private.shared_ancestor(path)
    if bad:
        setting = _setting_for(which)
        raise StartupError(
            f"refusing to start: the {which} directory {path} is not safe from other users: "
            f"{bad.what}. Fix: set {setting} to a directory of yours whose parents only you and "
            f"root can change (for example `export {setting}=$HOME/.autoharness"
            f"{'/autoharness.sock' if setting == 'AUTOHARNESS_SOCKET' else ''}`), or remove "
            "the other user's directory, then start again")


def prepare_dirs(sock_path: str) -> None:
    sock_dir = os.path.dirname(sock_path)
    refuse_shared(paths.state_dir(), "state")  # before anything is made or written there
    refuse_shared(sock_dir, "socket")
    why = private.unusable_dir(paths.state_dir())
    if why:  # a 000 state dir passes as private, then fails every listing and write
        raise StartupError(why)
    try:
        dirs.ensure_private_dir(paths.state_dir())
        tighten_state_files(paths.state_dir())
        dirs.pin_dir(paths.state_dir())  # every later state write checks it is still this one
        if os.environ.get("AUTOHARNESS_SOCKET"):
            # an explicit socket's directory must already be safe
            bad = private.private_problem(sock_dir, fixes={
                "not_dir": f"point AUTOHARNESS_SOCKET into a directory of yours, not {sock_dir}",
                "not_owner": "point AUTOHARNESS_SOCKET into a directory of yours"})
            if bad:
                raise StartupError(str(bad))
        else:
            dirs.ensure_private_dir(sock_dir)
    except dirs.UnsafeDir as e:
        raise StartupError(str(e)) from None
    except OSError as e:
        why = private.unusable_dir(paths.state_dir()) or private.unusable_dir(sock_dir)
        raise StartupError(why or f"cannot prepare directories: {e}") from None


async def serve(daemon: Daemon, sock: socket.socket, on_forced_exit=lambda: None) -> None:
    """Serve until a stop is requested; from then on the process ends within the stop
    deadline even if a worker thread never returns (`on_forced_exit` runs first)."""
    from anyio.abc import SocketListener

    listener = await SocketListener.from_socket(sock)
    server = Server(daemon.dispatch, daemon.book, replied=daemon.after_reply)
    async with anyio.create_task_group() as tg:
        await tg.start(_signals, daemon)
        tg.start_soon(accept.accept_loop, listener, daemon.connections, server.handle)
        await daemon.spool.replay()
        daemon.start_background(tg)
        notify_ready()
        release_spawn_lock()
        log.info("ready", socket=daemon.socket_path, pid=os.getpid(), version=VERSION)
        await daemon.stop_event.wait()
        shutdown.exit_by_deadline(on_forced_exit)
        tg.cancel_scope.cancel()
    await listener.aclose()


async def _signals(daemon: Daemon, *, task_status=anyio.TASK_STATUS_IGNORED) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        task_status.started()
        async for signum in signals:
            if signum == signal.SIGHUP:
                try:
                    daemon.reload_config()
                except Exception:  # a reload must never take the daemon down
                    log.exception("config reload failed")
            else:
                log.info("stopping", signal=signal.Signals(signum).name)
                daemon.stop_event.set()


def run() -> None:
    # Worker threads (redaction, SDK replies, fsyncs) hold the GIL in long stretches; a shorter
    # switch interval lets the event loop answer hooks between them.
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    sources: dict[str, str] = {}
    cfg = load_config(env=settings_env(), sources=sources)
    configure_logging(cfg.log_level)
    fd_limit = accept.raise_fd_limit()
    sock_path = paths.socket_path()
    prepare_dirs(sock_path)
    lock_fd = take_lock(paths.lock_file())
    cap = accept.connection_cap(cfg.max_connections, fd_limit)
    log.info("limits", fd_limit=fd_limit, max_connections=cap)
    daemon = Daemon(cfg, settings_from=sources, connection_cap=cap)
    sock = _socket_activated()
    owned_socket = sock is None
    if sock is None:
        sock = bind_socket(sock_path)
    sock_ino = os.stat(sock_path).st_ino if owned_socket else None

    def remove_socket() -> None:
        if owned_socket:
            try:
                if os.stat(sock_path).st_ino == sock_ino:
                    os.unlink(sock_path)
            except OSError:
                pass

    try:
        try:
            daemon.load()
            daemon.book.persist_now(snapshot=False)  # what load changed; a snapshot only if due
        except OSError as e:  # an unreadable or unwritable state file: say which, and the fix
            raise StartupError(f"cannot load or save the daemon state: {describe(e)}, "
                               "then start again") from None
        anyio.run(serve, daemon, sock, remove_socket)
        stop_children()
        try:
            daemon.book.persist_now()
        except OSError as e:  # the journal holds everything acknowledged: said, not fatal
            log.error("state not saved at stop", reason=describe(e))
    finally:
        daemon.book.close()
        remove_socket()
        log.info("stopped")
        os.close(lock_fd)  # last: a `stop` waiting for its release finds everything written


def stop_children() -> None:
    """Kill reflector children and drop API clients: a model call in flight must not hold the
    exit up (its job is durable and runs again at the next start)."""
    mods = sys.modules
    try:
        if "claude_autoharness.daemon.reflect.backends.claude" in mods:
            mods["claude_autoharness.daemon.reflect.backends.claude"].terminate_all()
        if "claude_autoharness.daemon.reflect.backends.anthropic" in mods:
            mods["claude_autoharness.daemon.reflect.backends.anthropic"].close_clients()
    except Exception:
        log.exception("stopping reflector children failed")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="autoharnessd",
        description="The autoharness daemon (runs in the foreground). Claude Code hooks report to "
        "it over a Unix socket; it counts work per session and reflects on it. Paths follow "
        "AUTOHARNESS_HOME, AUTOHARNESS_SOCKET, AUTOHARNESS_CONFIG and CLAUDE_CONFIG_DIR.",
    )
    parser.add_argument("--version", action="version", version=f"autoharnessd {VERSION}")
    parser.parse_args(argv)
    proctitle.set_name()
    try:
        run()
    except ConfigError as e:  # its text is already printable
        print(f"autoharnessd: {e}", file=sys.stderr)
        sys.exit(2)
    except StartupError as e:  # one line, whatever a path in it holds
        print(f"autoharnessd: {printable(str(e))}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        pass
    except Exception as e:  # one line for the user; the traceback goes to the log
        log.exception("autoharnessd failed")
        print(f"autoharnessd: stopped by an unexpected error: {describe(e)} "
              "(its traceback is in the daemon's log output)", file=sys.stderr)
        sys.stderr.flush()
        os._exit(1)
    # State is persisted; don't wait for worker threads still inside a model call.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
