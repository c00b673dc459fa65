"""The pool and the server through their narrow interfaces, without a daemon: in-memory
stand-ins for the job book, the counters and the intent queue; a real socket for the server."""

import os
import socket

import anyio
import msgspec
import pytest

from claude_autoharness.daemon import sessions as sm
from claude_autoharness.daemon.events import Events, IntentsQueued, JobDone
from claude_autoharness.daemon.jobchanges import JobBook
from claude_autoharness.daemon.listener import Connections, accept_loop
from claude_autoharness.daemon.live import Live
from claude_autoharness.daemon.reflect.pipeline import Reflection, today
from claude_autoharness.daemon.reflect.pool import ReflectorPool
from claude_autoharness.daemon.server import Server
from claude_autoharness.protocol import framing
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol.config import Config, ReflectorConfig


class MemoryBook(JobBook):
    """A JobBook that keeps every recorded version of every job, in order."""

    def __init__(self, jobs=(), sessions=()):
        self.table = {j.id: j for j in jobs}
        self.sessions = {s.session_id: s for s in sessions}
        self.recorded: list[tuple[str, str, int | None]] = []  # (job, status, session watermark)
        self.changes = 0

    def jobs(self):
        return list(self.table.values())

    def session(self, session_id):
        return self.sessions.get(session_id)

    async def record_jobs(self, jobs, session=None):
        for j in jobs:
            self.table[j.id] = j
            self.recorded.append((j.id, j.status, session.watermark if session else None))

    def watch(self):
        return anyio.Event()

    def changed(self):
        self.changes += 1


class MemoryCounters:
    def __init__(self, tokens_today=0):
        self.finished: list[bool] = []
        self.tokens = {}
        self.tokens_today = tokens_today
        self.packets = 0
        self.refusals: list[str] = []

    def job_finished(self, ok):
        self.finished.append(ok)

    def tokens_on(self, day):
        return self.tokens_today

    def add_tokens(self, day, n, backend=""):
        self.tokens[day] = self.tokens.get(day, 0) + n

    def captured(self, packet, session_id=""):
        self.packets += 1

    def refused(self, path, reason):
        self.refusals.append(path)


class NoIntents:
    def list(self, status=None):
        return []

    def intake(self, *a, **kw):
        raise AssertionError("no proposal was expected")

    def job_recorded(self, job_id):
        return False


class ListLedger:
    def __init__(self):
        self.usage = []

    def record_usage(self, **call):
        self.usage.append(call)

    def record_calls(self, s):
        pass


class SameDir:
    """Every cwd is its own project."""

    def root_of(self, cwd):
        return cwd


def make_pool(book, counters, cfg: Config | None = None, events: Events | None = None):
    reflection = Reflection(counters, NoIntents(), Live.build(cfg or Config()),
                            ledger=ListLedger(), clock=lambda: 1_000.0)
    return ReflectorPool(book, counters, reflection, projects=SameDir(),
                         events=events or Events(), clock=lambda: 1_000.0)


@pytest.mark.anyio
async def test_pool_finishes_a_job_with_nothing_new_without_the_model(home):
    """A job whose window is empty is done without a backend: recorded running then done,
    the session's watermark moved in the same record, counted as finished, and its `JobDone`
    delivered once the job is journaled done."""
    transcript = home["claude"] / "projects" / "-p" / "t.jsonl"
    transcript.parent.mkdir()
    transcript.write_bytes(b"")
    session = sm.Session(session_id="s1", transcript_path=str(transcript))
    job = sm.Job(id="j1", session_id="s1", kind="threshold", created_at=1.0,
                 transcript_path=str(transcript))
    book, counters, woken, events = MemoryBook([job], [session]), MemoryCounters(), [], Events()
    events.subscribe(JobDone, lambda e: woken.append((e.job_id, book.recorded[-1][1])))
    await make_pool(book, counters, events=events).run_job(job)
    await events.deliver()
    assert [(j, s) for j, s, _ in book.recorded] == [("j1", "running"), ("j1", "running"),
                                                     ("j1", "done")]
    assert book.recorded[-1][2] == 0 and job.window_end == 0
    assert counters.finished == [True] and counters.packets == 1
    assert woken == [("j1", "done")]


@pytest.mark.anyio
async def test_pool_fails_a_job_whose_transcript_is_gone(home):
    """A missing transcript fails the job (no retry) and counts one failure."""
    job = sm.Job(id="j2", session_id="s2", kind="threshold", created_at=1.0,
                 transcript_path=str(home["claude"] / "projects" / "-p" / "gone.jsonl"))
    book, counters = MemoryBook([job]), MemoryCounters()
    await make_pool(book, counters).run_job(job)
    assert book.recorded[-1][:2] == ("j2", "failed")
    assert job.last_error == "transcript not found"
    assert counters.finished == [False]


@pytest.mark.anyio
async def test_pool_refuses_a_transcript_outside_the_roots(home, tmp_path):
    """A transcript outside the transcript roots is never read: the job fails and the
    refusal goes to the counters."""
    outside = tmp_path / "t.jsonl"
    outside.write_bytes(b"{}\n")
    job = sm.Job(id="j3", session_id="s3", kind="threshold", created_at=1.0,
                 transcript_path=str(outside))
    book, counters = MemoryBook([job]), MemoryCounters()
    await make_pool(book, counters).run_job(job)
    assert book.recorded[-1][:2] == ("j3", "failed")
    assert counters.refusals == [str(outside)]


def test_pool_waits_when_the_daily_token_budget_is_spent(home):
    """With a backend available, the counters' tokens for today decide whether jobs wait."""
    cfg = Config(reflector=ReflectorConfig(backend="anthropic", api_key="sk-test",
                                           daily_token_budget=100))
    assert make_pool(MemoryBook(), MemoryCounters(tokens_today=99), cfg).blocked_reason() == ""
    reason = make_pool(MemoryBook(), MemoryCounters(tokens_today=100), cfg).blocked_reason()
    assert "daily token budget of 100 reached" in reason
    assert today(0).startswith("day:")


class MemoryConnCounters:
    def __init__(self):
        self.peers = 0
        self.rejected = 0

    def peer_rejected(self):
        self.peers += 1

    def request_rejected(self):
        self.rejected += 1


def _ask(path: str, raw: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(60)
        s.connect(path)
        s.sendall(raw)
        return framing.recv_frame(s, timeout=60)


@pytest.mark.anyio
async def test_server_dispatches_counts_and_calls_back_after_replying(short_tmp):
    """One request per connection goes to `dispatch`; its reply comes back framed and
    `replied` runs after it is sent; a frame that is not a request and an oversized frame are
    counted and answered with a typed error, without reaching dispatch."""
    seen, replied = [], []
    counters = MemoryConnCounters()

    async def dispatch(req):
        seen.append(type(req).__name__)
        return m.Ok(data={"pong": True})

    server = Server(dispatch, counters, replied=lambda: replied.append(len(seen)))
    path = str(short_tmp / "s.sock")
    listener = await anyio.create_unix_listener(path)
    os.chmod(path, 0o600)
    async with anyio.create_task_group() as tg:
        tg.start_soon(accept_loop, listener, Connections(8), server.handle)
        ok = await anyio.to_thread.run_sync(_ask, path, framing.frame(m.encode(m.Status())))
        bad = await anyio.to_thread.run_sync(_ask, path, framing.frame(b'{"type":"nope"}'))
        huge = (framing.MAX_FRAME + 1).to_bytes(framing.HEADER, "big")
        too_big = await anyio.to_thread.run_sync(_ask, path, huge)
        tg.cancel_scope.cancel()
    assert msgspec.json.decode(ok) == {"type": "ok", "data": {"pong": True}}
    assert m.reply_decoder.decode(bad).code == "unknown_type"
    assert m.reply_decoder.decode(too_big).code == "too_large"
    assert seen == ["Status"] and replied == [1]
    assert counters.rejected == 2 and counters.peers == 0


def test_status_reply_is_the_typed_struct(home):
    """A real daemon's `status` decodes strictly into `replies.Status`, field for field: the
    reply is assembled from the schema, not by hand."""
    from claude_autoharness.protocol import replies
    from harness import Daemon

    d = Daemon(home["home"])
    try:
        st = d.status()
    finally:
        d.stop()
    typed = msgspec.convert(st, replies.Status, strict=True)
    assert sorted(st) == sorted(replies.Status.__struct_fields__)
    assert msgspec.to_builtins(typed) == st


class KeptIntents:
    """An IntentSink that keeps what intake was handed (and queues nothing)."""

    def __init__(self):
        self.taken: list[tuple] = []

    def list(self, status=None):
        return []

    def intake(self, job_id, session_id, source, raw, window, root, max_intents, redactor,
               raw_feedback=(), **judged):
        self.taken.append((job_id, source, raw, window, root))
        return []

    def job_recorded(self, job_id):
        return False


@pytest.mark.anyio
async def test_batch_runner_runs_on_the_shared_reflection_without_a_daemon(home):
    """The batch runner sees only a `Reflection` (over in-memory counters, queue and ledger),
    the projects and the events: a transcript is cut into one item, sent through the real SDK to the fake
    Batches endpoints, its reply taken in with the window that was sent, its tokens charged
    to today and recorded in the ledger once (at the batch price), and the promoter woken."""
    from claude_autoharness.daemon.reflect.batches import BatchRunner
    from fake_anthropic import FakeAnthropic, tool_reply

    project = home["tmp"] / "proj"
    project.mkdir()
    transcript = home["tmp"] / "t.jsonl"
    rule = "always run make check before pushing"
    transcript.write_text(msgspec.json.encode(
        {"type": "user", "cwd": str(project), "sessionId": "s",
         "message": {"role": "user", "content": rule}}).decode() + "\n")
    proposal = {"action": "create", "skill": "check", "evidence": rule}
    usage = {"input_tokens": 40, "output_tokens": 2}
    with FakeAnthropic() as fake:
        fake.route = lambda params: tool_reply({"proposals": [proposal]}, usage=usage)
        cfg = Config(reflector=ReflectorConfig(api_key="sk-ant-test", base_url=fake.base_url,
                                               batch_poll_s=0.05, batch_poll_max_s=0.2))
        counters, intents, ledger, woken = MemoryCounters(), KeptIntents(), ListLedger(), []
        events = Events()
        events.subscribe(IntentsQueued, lambda e: woken.append(e.source))
        reflection = Reflection(counters, intents, Live.build(cfg), ledger=ledger)
        runner = BatchRunner(reflection, projects=SameDir(), events=events)
        runner.load()
        sent = await runner.command("submit", [str(transcript)], None)
        assert (sent.items, sent.skipped, sent.missing) == (1, 0, [])
        async with anyio.create_task_group() as tg:
            tg.start_soon(runner.run)
            with anyio.fail_after(60):
                while runner.status().items["done"] < 1:
                    await anyio.sleep(0.02)
            tg.cancel_scope.cancel()
    [(job_id, source, raw, window, root)] = intents.taken
    assert (source, raw, root) == ("reflector", [proposal], str(project))
    assert rule in window and len(fake.batch_creates) == 1
    assert counters.tokens == {today(runner.clock()): 42}
    assert [(c["job"], c["kind"], c["batch"], c["usage"]["input_tokens"])
            for c in ledger.usage] == [(job_id, "batch", True, 40)]
    await events.deliver()
    assert woken == ["batch"]


def test_the_daemon_wires_each_part_once_at_construction():
    """The daemon hands every part what it uses when it builds it: nowhere does it set a
    field of a part it built (`self.part.field = ...`), so no collaborator is wired later,
    and a part's constructor says everything it depends on."""
    import ast
    import inspect

    from claude_autoharness.daemon import core

    tree = ast.parse(inspect.getsource(core))
    late = [ast.unparse(t) for node in ast.walk(tree)
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Attribute)
            and isinstance(t.value.value, ast.Name) and t.value.value.id == "self"]
    assert late == []


def test_nothing_outside_the_daemon_assigns_to_it_or_its_parts():
    """No module of the package sets a field of a built `Daemon` or of one of its parts
    (`daemon.part.field = ...`): what a part needs is given at construction, the connection
    cap included, which status then shows as given."""
    import ast
    from pathlib import Path

    import claude_autoharness.daemon as pkg
    from claude_autoharness.daemon.core import Daemon
    from claude_autoharness.protocol.config import Config

    late = []
    for path in sorted(Path(pkg.__file__).parent.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef,
                                                                ast.AsyncFunctionDef))):
            held = {a.arg for a in fn.args.args + fn.args.kwonlyargs
                    if a.annotation is not None and "Daemon" in ast.unparse(a.annotation)}
            held |= {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign)
                     and isinstance(n.value, ast.Call) and ast.unparse(n.value.func) == "Daemon"
                     for t in n.targets if isinstance(t, ast.Name)}
            for n in ast.walk(fn):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target] \
                    if isinstance(n, (ast.AugAssign, ast.AnnAssign)) else []
                for t in targets:
                    root = t
                    while isinstance(root, (ast.Attribute, ast.Subscript)):
                        root = root.value
                    if t is not root and isinstance(root, ast.Name) and root.id in held:
                        late.append(f"{path.name}: {ast.unparse(t)}")
    assert late == []
    assert Daemon(Config(), connection_cap=3).connections.stats()["cap"] == 3
