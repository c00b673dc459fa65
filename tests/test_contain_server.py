"""Every malformed request gets a typed answer, descriptor exhaustion is survived, and many
clients sending large frames cost the daemon a bounded amount of memory.

Real daemons on temp sockets: one started under `ulimit -n 256` with 400 idle clients, one fed
partial frames of 48 MB by ten clients at once, and the accept loop alone in a process whose
descriptors really run out (EMFILE on accept).
"""

import json
import os
import resource
import socket
import subprocess
import sys
import textwrap
import threading

import pytest

from claude_autoharness.daemon.listener import LARGE_FRAMES_BYTES
from claude_autoharness.protocol import PROTOCOL
from harness import Daemon, frame, hook, pre_tool, send_raw, wait_for

DEEP = 100_000


def _reply(sock_path: str, body: bytes) -> dict:
    raw = send_raw(sock_path, frame(body), timeout=90)
    assert len(raw) >= 4, "no reply at all"
    return json.loads(raw[4:])


@pytest.fixture
def daemon(home, monkeypatch):
    monkeypatch.setenv("AUTOHARNESS_WATCH", "0")
    d = Daemon(home["home"])
    yield d
    d.stop()


def test_malformed_requests_get_a_typed_error_and_count_as_rejected(daemon):
    """JSON nested 100,000 levels deep (as a hook payload and as a request field), protocol
    version 999 and an unknown request type each get an `error` reply with its own code; each
    is counted received and rejected; the daemon keeps serving."""
    before = daemon.status()["events"]
    deep = b"[" * DEEP + b"]" * DEEP
    r = _reply(daemon.sock, b'{"type":"hook","v":1,"payload":' + deep + b"}")
    assert r["type"] == "error" and r["code"] == "too_deep"
    r = _reply(daemon.sock, b'{"type":"status","v":1,"x":' + deep + b"}")
    assert r["type"] == "error" and r["code"] == "too_deep"
    r = _reply(daemon.sock, b'{"type":"status","v":999}')
    assert r["type"] == "error" and r["code"] == "protocol_version"
    assert "999" in r["message"] and f"protocol {PROTOCOL}" in r["message"]
    assert "restart the daemon" in r["message"]
    r = _reply(daemon.sock, b'{"type":"launch-missiles","v":1}')
    assert r["type"] == "error" and r["code"] == "unknown_type"
    after = daemon.status()["events"]
    assert after["received"] - before["received"] == 4
    assert after["rejected"] - before["rejected"] == 4
    assert hook(pre_tool("s-after")).returncode == 0
    assert daemon.status()["events"]["by_kind"]["PreToolUse"] == 1


def test_client_names_a_version_mismatch_and_the_fix(daemon, tmp_path):
    """A client of another protocol version hears both versions and the fix."""
    from claude_autoharness.client import conn
    from claude_autoharness.protocol import messages as m

    with pytest.raises(conn.DaemonError) as e:
        conn.call(m.Status(v=PROTOCOL + 1))
    assert e.value.code == "protocol_version"
    assert str(PROTOCOL + 1) in e.value.message and "restart the daemon" in e.value.message


def _fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads the daemon's RSS in /proc")
def test_many_clients_sending_large_partial_frames_cost_bounded_memory(daemon):
    """Ten clients each announce a 48 MB frame and send all of it but its last byte (480 MB
    in all, were it read). The daemon reads large frames only within its daemon-wide budget:
    its RSS grows by less than that budget, not by what the clients offered, and `status`
    (a small frame) is still answered while they hold on."""
    size, clients = 48 << 20, 10
    base = _rss(daemon.proc.pid)
    socks, sent = [], [0] * clients
    chunk = b"x" * (1 << 20)

    def offer(i: int, s: socket.socket) -> None:
        s.settimeout(5)  # a client the daemon does not read from stalls here
        try:
            s.sendall((size).to_bytes(4, "big") + b"{" + chunk[:(1 << 20) - 1])
            sent[i] = 1 << 20
            while sent[i] < size - (1 << 20):
                s.sendall(chunk)
                sent[i] += len(chunk)
            s.sendall(chunk[:-1])
            sent[i] += len(chunk) - 1
        except OSError:
            pass

    threads = []
    try:
        for i in range(clients):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(daemon.sock)
            socks.append(s)
            threads.append(threading.Thread(target=offer, args=(i, s)))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        grown = _rss(daemon.proc.pid) - base
        assert sum(1 for n in sent if n == size - 1) >= 1  # the budget did let some through
        assert grown < LARGE_FRAMES_BYTES + (32 << 20) < clients * size // 2, (grown, sent)
        st = daemon.status()  # answered while every one of them holds on
        assert st["connections"]["open"] >= clients
        assert _rss(daemon.proc.pid) - base < LARGE_FRAMES_BYTES + (32 << 20)
    finally:
        for s in socks:
            s.close()
    wait_for(lambda: daemon.status()["connections"]["open"] <= 1, what="the clients gone")


def test_daemon_under_a_low_descriptor_limit_survives_more_idle_clients(home, monkeypatch):
    """`autoharnessd` under `ulimit -n 256` (hard too, so it cannot raise it): 400 idle
    clients connect; `status` is still answered during the flood, the connection cap is the
    limit minus the reserve, the oldest idle clients were dropped, and once they are gone the
    daemon holds no more descriptors than before."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1024:
        pytest.skip(f"this test needs 1024 descriptors for its clients (hard limit {hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1024), hard))
    monkeypatch.setenv("AUTOHARNESS_WATCH", "0")
    d = Daemon(home["home"], limit_fds=256)
    clients = []
    try:
        baseline = _fd_count(d.proc.pid)
        for _ in range(400):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(d.sock)
            clients.append(s)
        st = d.status()  # answered while 400 idle clients hold on
        conns = st["connections"]
        assert conns["cap"] == 256 - 64 and conns["open"] <= conns["cap"]
        assert conns["dropped_idle"] > 0
        assert _fd_count(d.proc.pid) < 256
        assert hook(pre_tool("s-flood")).returncode == 0
        for s in clients:
            s.close()
        clients.clear()
        wait_for(lambda: _fd_count(d.proc.pid) <= baseline + 1, what="descriptors released")
        st = d.status()
        assert st["events"]["by_kind"]["PreToolUse"] == 1
        assert d.proc.poll() is None
    finally:
        for s in clients:
            s.close()
        d.stop()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads /proc/PID/limits")
def test_daemon_raises_its_soft_descriptor_limit(home, monkeypatch):
    """Started with a soft limit of 256 under a hard limit of 4096, the daemon runs with 4096
    and keeps the configured cap of 256 connections (the limit no longer constrains it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 4096:
        pytest.skip(f"needs a hard descriptor limit of 4096 (have {hard})")
    monkeypatch.setenv("AUTOHARNESS_WATCH", "0")
    d = Daemon(home["home"], limit_fds=(256, 4096))
    try:
        limits = open(f"/proc/{d.proc.pid}/limits").read()
        row = next(line for line in limits.splitlines() if line.startswith("Max open files"))
        assert row.split()[3:5] == ["4096", "4096"], row
        assert d.status()["connections"]["cap"] == 256
    finally:
        d.stop()


ACCEPT_CHILD = textwrap.dedent("""
    import os, resource, socket, sys
    import anyio
    from claude_autoharness.daemon.listener import Connections, accept_loop

    async def handle(conn):
        data = await conn.stream.receive()
        conn.idle = False
        await conn.stream.send(b"ok:" + data)

    async def main(path):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(path)
        sock.listen(512)
        used = len(os.listdir("/proc/self/fd"))
        resource.setrlimit(resource.RLIMIT_NOFILE, (used + 20, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        listener = await anyio.abc.SocketListener.from_socket(sock)
        print("ready", flush=True)
        await accept_loop(listener, Connections(cap=10_000), handle)

    anyio.run(main, sys.argv[1])
""")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_accept_survives_emfile(short_tmp):
    """The accept loop in a process 20 descriptors from its limit: 60 idle clients make
    `accept` fail with EMFILE; the loop logs it once, drops the oldest idle connections and
    keeps accepting, so a client that speaks is still answered."""
    path = str(short_tmp / "s")
    p = subprocess.Popen([sys.executable, "-c", ACCEPT_CHILD, path], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    clients = []
    try:
        assert p.stdout.readline().strip() == b"ready"
        for _ in range(60):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            clients.append(s)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(path)
        s.sendall(b"hello")
        assert s.recv(100) == b"ok:hello"
        s.close()
        assert p.poll() is None
    finally:
        for c in clients:
            c.close()
        p.kill()
        out = p.communicate()[0].decode()
    assert out.count("accept failed") == 1 and "EMFILE" in out, out
