"""The event loop and the worker threads share nothing unguarded, and the loop never waits on
a disk: the promoter's thread is fed through its inbox while the loop keeps sending under
load, the batch journal is written (and fsynced) in a worker thread while `status` is
answered, and a batch item changes only through the journal's named changes."""

import ast
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import anyio
import pytest

from claude_autoharness.daemon import events as ev
from claude_autoharness.daemon.core import Daemon as Core
from claude_autoharness.protocol.config import load as load_config
from conftest import REPO
from harness import CTL, Daemon, open_fifo_writer_when_read
from promote_support import desc_for, seed

STUCK = str(Path(__file__).with_name("stuck_daemon.py"))


def promoter_idle(core: Core) -> bool:
    """Every pass done: the promoter loop waits for word and none is pending."""
    st = core.review._inbox.statistics()
    return st.current_buffer_used == 0 and st.tasks_waiting_receive == 1


@pytest.mark.anyio
async def test_the_promoter_thread_and_the_loop_lose_and_double_nothing_under_load(home):
    """The loop sends 900 skill uses, with tool calls, turns and verdicts between them, in
    bursts while the promoter's thread records, judges and grounds what it took before:
    every use is recorded exactly once (the skills' counts and the report's ledger), and
    every verdict is grounded (none is left queued)."""
    project = home["tmp"] / "proj"
    (project / ".claude" / "skills").mkdir(parents=True)
    names = [f"load-skill-{k}" for k in range(3)]
    for name in names:
        seed(project, name, desc_for(name), f"Run the {name} steps.\n")
    root = str(project)
    core = Core(load_config())
    core.load()
    sent: Counter = Counter()
    verdicts = []
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(core.review.loop)
            for k in range(900):
                name = names[k % len(names)]
                core.review.skill_used(ev.SkillUsed("name", name, root, "sess-load"))
                sent[name] += 1
                core.review.call_heard(ev.CallHeard({"session_id": "sess-load", "tool_name": "Bash",
                                                     "tool_input": {"command": f"echo {k}"}},
                                                    root))
                if k % 10 == 0:
                    core.review.turn_counted(ev.TurnCounted(root))
                if k % 100 == 0:
                    quote = f"the user ran step {k} by hand"
                    verdicts += core.intents.intake(
                        f"job-load-{k}", "sess-load", "reflector", [], quote, root, 3,
                        raw_feedback=[{"skill": names[0], "verdict": "missed",
                                       "evidence": quote}])
                    core.review.wake()
                if k % 7 == 0:  # a burst sent: the promoter's thread works meanwhile
                    await anyio.sleep(0.001)
            with anyio.fail_after(120):
                while not promoter_idle(core):
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
        skills = await anyio.to_thread.run_sync(core.live.promoter.list_skills, root)
    finally:
        core.book.close()
    assert {i.name: i.uses for i in skills if i.name in sent} == dict(sent)
    assert Counter(os.path.basename(rec["dir"])
                   for rec in core.ledger.log.records("use")) == sent
    assert core.intents.verdicts("queued") == []
    assert len(core.intents.verdicts()) == 9


def test_status_is_answered_while_the_batch_journal_is_written(home, monkeypatch):
    """A slow disk under the batch journal: its first write (with its fsyncs) is held in a
    worker thread until the test lets it go. Meanwhile the loop answers `status`, which
    shows the items queued, and the `replay --batch` that is journaling them waits; let go,
    the replay is answered and the journal holds the items."""
    monkeypatch.setenv("AUTOHARNESS_WATCH", "0")
    backlog = home["tmp"] / "backlog"
    backlog.mkdir()
    for k in range(3):
        rec = {"type": "user", "cwd": str(home["tmp"]), "sessionId": f"s{k}",
               "message": {"role": "user", "content": f"lesson {k}: run make check-{k}"}}
        (backlog / f"t{k}.jsonl").write_text(json.dumps(rec) + "\n")
    fifo = home["tmp"] / "held-write"
    os.mkfifo(fifo)
    d = Daemon(home["home"], argv=[sys.executable, STUCK, str(fifo), "batchsave"])
    replay = subprocess.Popen([CTL, "replay", "--batch", str(backlog)], text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        writer = open_fifo_writer_when_read(fifo)  # the journal's write is held now
        try:
            assert d.status()["batches"]["items"]["waiting"] == 3
            assert replay.poll() is None  # still waiting for its journal
        finally:
            os.close(writer)
        out, err = replay.communicate(timeout=60)
        assert replay.returncode == 0, err
        assert "3 window(s) queued" in out
        journal = json.loads((home["home"] / "state" / "batches.json").read_bytes())
        assert len(journal["items"]) == 3
    finally:
        if replay.poll() is None:
            replay.kill()
        d.stop()


ITEM_CHANGES = "daemon/reflect/batchstore.py"


def field_writes(source: str) -> list[str]:
    """Every assignment to an attribute of anything but `self` itself (`x.f = `, `self.j.f += `)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for el in t.elts if isinstance(t, ast.Tuple) else [t]:
                    if isinstance(el, ast.Attribute) and not (
                            isinstance(el.value, ast.Name) and el.value.id == "self"):
                        out.append(f"{el.lineno}: {ast.unparse(el)}")
    return out


def test_a_batch_item_changes_only_through_the_journals_named_changes():
    """The batch runner sets no field of an item, a batch or the journal: every change of an
    item's life is one of the journal's named changes, in one place."""
    runner = (REPO / "daemon/reflect/batches.py").read_text(encoding="utf-8")
    assert field_writes(runner) == []
    assert field_writes("def f(self, item):\n    item.status = 'done'\n"
                        "def g(self):\n    self.j.tokens += 1\n    self.ok = 1\n") == [
        "2: item.status", "4: self.j.tokens"]
    assert field_writes((REPO / ITEM_CHANGES).read_text(encoding="utf-8"))  # they are there
