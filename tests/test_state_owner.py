"""The book owns the daemon's state: nothing outside it writes the state (an AST walk of the
installed package), and the SessionStart context, built in a worker thread, is applied to the
state on the event loop, once per session start however many deliveries race."""

import ast
import json
import os
import socket
import threading
import uuid
from pathlib import Path

import anyio
import msgspec
import pytest

import claude_autoharness
from claude_autoharness.daemon.core import Daemon as Core
from claude_autoharness.daemon.learnings.context import rule_text
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol import paths
from claude_autoharness.protocol.config import load as load_config
from harness import Daemon, event, frame, wait_for

PACKAGE = Path(claude_autoharness.__file__).parent
# The book (its tallies in a module of their own), and the storage it loads the state with (a
# state being loaded is theirs to fill).
OWNERS = ("daemon/book.py", "daemon/tallies.py", "daemon/persist/")
MUTATING = {"append", "extend", "insert", "remove", "pop", "popitem", "clear", "update",
            "setdefault", "add", "discard", "sort", "reverse", "difference_update",
            "intersection_update", "symmetric_difference_update", "__setitem__", "__delitem__"}
READ_CALLS = {"get", "values", "items", "keys", "copy", "of"}  # a part of the state, read
# The session state machine changes what it is handed; these of its functions only read.
MACHINE = "claude_autoharness.daemon.sessions"
MACHINE_READERS = {"valid_session_id", "is_learn_command", "is_learn_call", "new_job",
                   "idle_sessions", "backoff"}


def _is_book(node: ast.AST, books: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "book" or node.id in books
    return isinstance(node, ast.Attribute) and node.attr == "book"


def _annotated(arg: ast.arg, name: str) -> bool:
    a = arg.annotation
    return (isinstance(a, ast.Name) and a.id == name) or (
        isinstance(a, ast.Attribute) and a.attr == name)


class _Scope:
    """One function (or module) body: the names bound to the book, and to parts of its state
    (flow-insensitive: a name bound to a part of the state anywhere in the body is one)."""

    def __init__(self, body: ast.AST, machines: set[str], machine_fns: set[str]):
        self.body = body
        self.machines, self.machine_fns = machines, machine_fns
        self.books: set[str] = set()
        self.parts: set[str] = set()
        args = body.args if isinstance(body, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
        for arg in (args.args + args.kwonlyargs) if args else []:
            if _annotated(arg, "Book"):
                self.books.add(arg.arg)
            if _annotated(arg, "State"):
                self.parts.add(arg.arg)
        while self._bind():
            pass

    def _machine(self, f: ast.AST) -> bool:
        """Whether `f` names a function of the session state machine that may change what
        it is handed (`sm.flush`, or `flush` imported from it)."""
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            return f.value.id in self.machines and f.attr not in MACHINE_READERS
        return isinstance(f, ast.Name) and f.id in self.machine_fns

    def state(self, node: ast.AST) -> bool:
        """Whether `node` is the state or a part of it."""
        if isinstance(node, ast.Attribute):
            if node.attr == "state" and _is_book(node.value, self.books):
                return True
            return self.state(node.value)
        if isinstance(node, ast.Subscript):
            return self.state(node.value)
        if isinstance(node, ast.Name):
            return node.id in self.parts
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            return node.func.attr in READ_CALLS | {"pop", "setdefault"} and self.state(
                node.func.value)
        if isinstance(node, ast.NamedExpr):
            return self.state(node.value)
        return False

    def _bind(self) -> bool:
        grew = False

        def bind(target: ast.AST, to_state: bool, to_book: bool) -> None:
            nonlocal grew
            for n in ast.walk(target):
                if isinstance(n, ast.Name):
                    if to_state and n.id not in self.parts:
                        self.parts.add(n.id)
                        grew = True
                    if to_book and n.id not in self.books:
                        self.books.add(n.id)
                        grew = True

        for node in ast.walk(self.body):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    bind(t, self.state(node.value), _is_book(node.value, self.books))
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                bind(node.target, self.state(node.iter), False)
        return grew

    def writes(self) -> list[tuple[int, str]]:
        out = []
        for node in ast.walk(self.body):
            targets: list[ast.AST] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            elif isinstance(node, ast.Delete):
                targets = node.targets
            for t in targets:
                for el in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    if isinstance(el, (ast.Attribute, ast.Subscript)) and (
                            self.state(el.value) or self.state(el)):
                        out.append((node.lineno, "assigns " + ast.unparse(el)))
            if isinstance(node, ast.Call):
                f = node.func
                if isinstance(f, ast.Attribute) and f.attr in MUTATING and self.state(f.value):
                    out.append((node.lineno, "calls " + ast.unparse(f)))
                    continue
                args = list(node.args) + [k.value for k in node.keywords]
                if self._machine(f) and any(self.state(a) for a in args):
                    out.append((node.lineno, f"hands the state to {ast.unparse(f)}()"))
        return out


def state_writes(source: str) -> list[tuple[int, str]]:
    """Each place in `source` that writes the book's state: an assignment to it or into it,
    a mutating call on a part of it, or a part of it handed to a function that may change it.
    The state is reached as `book.state` or `<...>.book.state`, through names bound to it, or
    through a parameter annotated `State`."""
    tree = ast.parse(source)
    machines, machine_fns = set(), set()  # how this module names the state machine
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == MACHINE.rsplit(".", 1)[0]:
            machines |= {a.asname or a.name for a in node.names if a.name == "sessions"}
        elif isinstance(node, ast.ImportFrom) and node.module == MACHINE:
            machine_fns |= {a.asname or a.name for a in node.names
                            if a.name not in MACHINE_READERS}
        elif isinstance(node, ast.Import):
            machines |= {a.asname for a in node.names if a.name == MACHINE and a.asname}
    found = set(_Scope(tree, machines, machine_fns).writes())
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found |= set(_Scope(node, machines, machine_fns).writes())
    return sorted(found)


def package_modules() -> list[tuple[str, str]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith(OWNERS):
            out.append((rel, path.read_text("utf-8")))
    return out


def test_nothing_outside_the_book_writes_the_state():
    """Every change to the daemon's state goes through a named method of the book, which
    journals it or marks it for the next persist: no other module of the installed package
    assigns to the state, mutates a part of it, or hands a part of it to code that may."""
    modules = package_modules()
    assert any(rel == "daemon/handlers/hooks.py" for rel, _ in modules)  # the walk sees them
    found = [f"{rel}:{line}: {what}" for rel, src in modules for line, what in state_writes(src)]
    assert found == [], "\n".join(found)
    marking = [rel for rel, src in modules if "mark_dirty" in src]
    assert marking == [], marking  # the book marks its own changes


# A job's and a session's changes are the job book's (daemon/jobchanges.py) and the state
# machine's (daemon/sessions.py): elsewhere a parameter typed Job or Session is only read.
JOB_OWNERS = (*OWNERS, "daemon/jobchanges.py", "daemon/sessions.py")
TYPED = {"Job", "Session"}


def typed_param_writes(source: str) -> list[tuple[int, str]]:
    """(line, what) for each assignment to a field of a parameter annotated Job or Session."""
    out = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
        names = {a.arg for a in args if a.annotation is not None
                 and ast.unparse(a.annotation).rsplit(".", 1)[-1] in TYPED}
        for node in ast.walk(fn):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                for el in t.elts if isinstance(t, ast.Tuple) else [t]:
                    if isinstance(el, ast.Attribute) and isinstance(el.value, ast.Name) \
                            and el.value.id in names:
                        out.append((el.lineno, ast.unparse(el)))
    return out


def test_the_pool_asks_the_job_book_to_change_a_job():
    """No module but the job book and the state machine sets a field of a job or session it
    is handed: the pool's starts, windows, attempts, ends, failures and retries are the job
    book's named changes, each journaled."""
    modules = [(rel, src) for rel, src in package_modules() if not rel.startswith(JOB_OWNERS)]
    assert any(rel == "daemon/reflect/pool.py" for rel, _ in modules)
    found = [f"{rel}:{line}: {what}" for rel, src in modules
             for line, what in typed_param_writes(src)]
    assert found == [], "\n".join(found)
    caught = typed_param_writes("async def _fail(self, job: Job, why: str):\n"
                                "    job.status, job.last_error = 'failed', why\n"
                                "def f(s: sm.Session):\n    s.watermark += 1\n")
    assert [w for _, w in caught] == ["job.status", "job.last_error", "s.watermark"]


@pytest.mark.parametrize("source", [
    "def f(self):\n    self.book.state.paused = True\n",
    "def f(self):\n    self.book.state.events.rejected += 1\n",
    "def f(book):\n    book.state.project_marks['/p'] = 1.0\n",
    "def f(self):\n    state = self.book.state\n    state.reflections_since_curate = 0\n",
    "def f(self, sid):\n    s = self.book.state.sessions.get(sid)\n    s.context_sent = []\n",
    "def f(self):\n    for s in self.book.state.sessions.values():\n        s.activity = 0\n",
    "def f(self):\n    self.book.state.turns.projects.pop('/p')\n",
    "from claude_autoharness.daemon import sessions as sm\n"
    "def f(self):\n    sessions = self.book.state.sessions\n    sm.flush(sessions, [], now=0)\n",
    "from claude_autoharness.daemon.sessions import transcript_calls\n"
    "def f(self, sid):\n    transcript_calls(self.book.state.sessions[sid], [])\n",
    "def f(self, state: State):\n    state.watcher = {}\n",
    "def f(self):\n    b = self.book\n    del b.state.jobs['j']\n",
    "def f(self):\n    self.d.book.state.tokens.update(total=1)\n",
])
def test_the_walk_catches_each_kind_of_write(source):
    """The check is no formality: each kind of write it is meant to find, it finds."""
    assert state_writes(source), source


@pytest.mark.parametrize("source", [
    "def f(self):\n    return self.book.state.paused\n",
    "def f(self, sid):\n    s = self.book.state.sessions.get(sid)\n    return s.activity\n",
    "def f(self):\n    return len(self.book.state.sessions), sorted(self.book.state.jobs)\n",
    "def f(self):\n    self.due.update(self.book.state.turns.projects)\n",
    "def f(self):\n    self.state = 'a promoter state dir'\n",
    "from claude_autoharness.daemon import sessions as sm\n"
    "def f(self):\n    return sm.idle_sessions(self.book.state.sessions, now=0)\n",
    "def f(self):\n    return r.SessionInfo(activity=self.book.state.sessions['s'].activity)\n",
])
def test_the_walk_lets_reads_through(source):
    assert state_writes(source) == [], source


# ---- the SessionStart context: built in a thread, applied on the loop ---------------------


def start_event(home, sid: str, source: str = "startup") -> dict:
    proj = home["tmp"] / "proj"
    proj.mkdir(exist_ok=True)
    tdir = home["claude"] / "projects" / paths.project_slug(str(proj))
    tdir.mkdir(parents=True, exist_ok=True)
    transcript = tdir / f"{sid}.jsonl"
    transcript.touch()
    return event("SessionStart", sid, cwd=str(proj), source=source,
                 transcript_path=str(transcript))


def context_of(reply: str | bytes) -> str:
    return json.loads(reply)["hookSpecificOutput"]["additionalContext"] if reply else ""


@pytest.mark.anyio
async def test_the_context_is_built_in_a_thread_and_applied_on_the_loop(home):
    """While a session start's context is being built (a worker thread, held here), the state
    does not change and the loop serves other events; what went out is then recorded on the
    loop's thread, and a resume of the session is given nothing again."""
    core = Core(load_config())
    core.load()
    loop_thread = threading.get_ident()
    building, release = threading.Event(), threading.Event()
    threads = {}

    def held_catch_up(project_dir: str) -> None:
        threads["build"] = threading.get_ident()
        building.set()
        release.wait(60)

    applied = core.book.context_delivered

    def recording_apply(session_id, parts):
        threads["apply"] = threading.get_ident()
        applied(session_id, parts)

    core.hooks.start_context.catch_up = held_catch_up
    core.book.context_delivered = recording_apply  # type: ignore[method-assign]
    try:
        ev = start_event(home, "s-held")
        replies: list[m.HookReply] = []

        async def start() -> None:
            replies.append(await core.hooks.cmd_hook(
                m.Hook(payload=json.dumps(ev).encode(), id="a" * 32)))

        async with anyio.create_task_group() as tg:
            tg.start_soon(start)
            await anyio.to_thread.run_sync(building.wait, 60)
            assert core.book.session("s-held").context_sent == []  # nothing applied yet
            other = event("PreToolUse", "s-other", tool_name="Bash", tool_use_id="toolu_1",
                          cwd=ev["cwd"])
            await core.hooks.cmd_hook(m.Hook(payload=json.dumps(other).encode(), id="b" * 32))
            assert core.book.session("s-other").calls_hook == 1  # the loop went on meanwhile
            assert core.book.session("s-held").context_sent == []
            release.set()
        [reply] = replies
        assert rule_text() in context_of(reply.output or "")
        assert threads["build"] != loop_thread and threads["apply"] == loop_thread
        assert core.book.session("s-held").context_sent == ["rule"]
        resume = dict(ev, source="resume")
        again = await core.hooks.cmd_hook(m.Hook(payload=json.dumps(resume).encode(),
                                                 id="c" * 32))
        assert not again.output
    finally:
        release.set()
        core.book.close()


def deliver(sock: str, payload: dict) -> str:
    """One SessionStart sent as a hook sends it, with its own event id, waiting as long as it
    takes for the reply (no hook deadline a loaded machine could miss); the context given."""
    body = msgspec.json.encode(m.Hook(payload=msgspec.Raw(json.dumps(payload).encode()),
                                      id=uuid.uuid4().hex))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(120)
    try:
        s.connect(sock)
        s.sendall(frame(body))
        header = s.recv(4, socket.MSG_WAITALL)
        data = s.recv(int.from_bytes(header, "big"), socket.MSG_WAITALL)
    finally:
        s.close()
    output = json.loads(data).get("output")
    return context_of(output) if output else ""


def journaled_context() -> dict[str, list[str]]:
    """Each session's `context_sent` as the snapshot and the journal segments hold it."""
    out: dict[str, list[str]] = {}
    d = paths.state_dir()
    snap = paths.snapshot_file()
    if os.path.exists(snap):
        for sid, s in json.load(open(snap))["sessions"].items():
            out[sid] = s.get("context_sent", [])
    journals = sorted(n for n in os.listdir(d) if n.startswith("journal") and n.endswith(".jsonl"))
    journals.sort(key=lambda n: (n == "journal.jsonl", n))  # the open one holds the newest
    for name in journals:
        for line in open(os.path.join(d, name), encoding="utf-8"):
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            for s in rec.get("sessions", []) + ([rec["session"]] if rec.get("session") else []):
                out[s["session_id"]] = s.get("context_sent", [])
    return out


def test_racing_deliveries_of_a_start_give_the_context_once(home):
    """Many hooks deliver the same session's start at once (each its own event id, as the
    plugin and a settings install do) while several other sessions start: each start's
    context goes out exactly once. What went out is journaled: after kill -9, a resume of
    those sessions is given nothing again, and a fresh session still gets it."""
    d = Daemon(home["home"])
    sids = ["s-race"] + [f"s-many-{i}" for i in range(4)]
    try:
        payloads = [start_event(home, "s-race")] * 6 + [start_event(home, s) for s in sids[1:]]
        given: list[str] = [""] * len(payloads)

        def send(i: int) -> None:
            given[i] = deliver(d.sock, payloads[i])

        threads = [threading.Thread(target=send, args=(i,)) for i in range(len(payloads))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(1 for g in given[:6] if g) == 1, given[:6]
        assert all(rule_text() in g for g in given[6:]), given[6:]
        wait_for(lambda: all(journaled_context().get(s) == ["rule"] for s in sids),
                 timeout=60, what="what went out journaled")
        assert d.status()["events"]["by_kind"]["SessionStart"] == 10  # each counted once
    finally:
        d.kill9()
    d = Daemon(home["home"])
    try:
        for sid in sids:
            assert deliver(d.sock, start_event(home, sid, "resume")) == "", sid
        assert rule_text() in deliver(d.sock, start_event(home, "s-fresh"))
    finally:
        d.stop()
