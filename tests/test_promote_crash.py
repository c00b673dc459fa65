"""Crash safety of landing: a crash at any point leaves every skill either old or new, never
half-written and never ownerless, once `recover()` has run."""

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from claude_autoharness.daemon.persist import quarantine
from claude_autoharness.daemon.promote import recovery, skillfile, skilltree
from claude_autoharness.daemon.promote.land import Promoter
from claude_autoharness.daemon.promote.plan import SKILL_MD
from claude_autoharness.protocol.config import PromoterConfig
from promote_support import (
    CRASH_POINTS,
    WINDOW,
    Crash,
    check_consistent,
    crash_on_skill_md_replace,
    histories,
    intent,
    land,
    workload,
)


def _setup_and_op(env, action: str, name: str):
    """Prepare `name` for `action` with clean landings; return the operation to crash."""
    proj = str(env["proj"])
    if action != "create":
        land(env, intent("create", name, body="Old body.\n"))
    if action in ("remove_file", "add_file", "revert"):
        land(env, intent("add_file", name, path="references/a.md", content="old\n"))
    if action == "revert":
        land(env, intent("update", name, body="Newer body.\n"))
    if action == "restore":
        land(env, intent("archive", name))
    return {
        "create": lambda p: p.promote(intent("create", name), WINDOW, proj),
        "update": lambda p: p.promote(intent("update", name, body="New body.\n"), WINDOW, proj),
        "patch": lambda p: p.promote(intent("patch", name, old="Old", new="New"), WINDOW, proj),
        "add_file": lambda p: p.promote(intent("add_file", name, path="references/a.md",
                                               content="new\n"), WINDOW, proj),
        "remove_file": lambda p: p.promote(intent("remove_file", name, path="references/a.md"),
                                           WINDOW, proj),
        "archive": lambda p: p.promote(intent("archive", name), WINDOW, proj),
        "revert": lambda p: p.revert(name, to=1, project_root=proj),
        "restore": lambda p: p.restore(name, proj),
    }[action]


@pytest.mark.parametrize("action", ["create", "update", "patch", "add_file", "remove_file",
                                    "archive", "revert", "restore"])
def test_crash_at_every_step_then_recover(env, action):
    """For every filesystem call a landing makes, crash right there, restart, recover: the
    skill is exactly its old or its new version, owned, with nothing pending or left over.
    Walks the crash point forward until the landing completes without crashing."""
    for n in range(1, 500):
        op = _setup_and_op(env, action, f"{action.replace('_', '-')}-{n}")
        calls = [0]

        def wrap(fn, calls=calls, n=n):
            def crashing(*a, **kw):
                calls[0] += 1
                if calls[0] == n:
                    raise Crash
                return fn(*a, **kw)
            return crashing

        with pytest.MonkeyPatch.context() as mp:
            for point in CRASH_POINTS:
                mp.setattr(os, point, wrap(getattr(os, point)))
            try:
                out = op(Promoter(PromoterConfig()))
            except Crash:
                out = None
        Promoter(PromoterConfig()).recover()
        check_consistent(env["pr"].state, [env["skills"]])
        if out is not None:
            assert out.status == "landed", out.findings
            break
    else:
        pytest.fail("the landing never completed")
    assert n > 5  # the walk really crossed the landing's steps


def test_recover_completes_an_interrupted_landing_and_reports_it(env):
    """A crash after the landing record was journaled but before SKILL.md was replaced is
    completed at start: recover() names the intent, the skill is the new version and owned."""
    land(env, intent("create", "mid", body="Old body.\n"))
    it = intent("update", "mid", body="New body.\n")
    crash_on_skill_md_replace(env, it)
    assert "Old body." in (env["skills"] / "mid" / SKILL_MD).read_text()
    [rec] = Promoter(PromoterConfig()).recover()
    assert (rec.intent_id, rec.result) == (it.id, "completed")
    assert skillfile.parse((env["skills"] / "mid" / SKILL_MD).read_text())[1] == "New body.\n"
    check_consistent(env["pr"].state, [env["skills"]])
    assert land(env, it).version == 2  # the queue's replay finds it landed


def test_recover_abandons_a_landing_someone_edited_since(env):
    """If the user changed SKILL.md between the crash and the restart, recover() does not
    overwrite their edit: the landing is abandoned, and nothing is left pending."""
    land(env, intent("create", "edited", body="Old body.\n"))
    crash_on_skill_md_replace(env, intent("update", "edited", body="New body.\n"))
    md = env["skills"] / "edited" / SKILL_MD
    md.write_text(md.read_text() + "The user's own line.\n")
    [rec] = Promoter(PromoterConfig()).recover()
    assert rec.result == "abandoned"
    assert md.read_text().endswith("The user's own line.\n")
    assert os.listdir(os.path.join(env["pr"].state, "pending")) == []


def test_a_landing_that_can_neither_finish_nor_roll_back_goes_to_the_quarantine(env,
                                                                                  monkeypatch):
    """An interrupted landing whose completion and rollback both fail at start is abandoned:
    its record moves into the one quarantine (status and doctor list it), is not left among
    the pending records, and is never retried."""
    land(env, intent("create", "stuck", body="Old body.\n"))
    crash_on_skill_md_replace(env, intent("update", "stuck", body="New body.\n"))
    [pending] = os.listdir(os.path.join(env["pr"].state, "pending"))

    def fail(sd, rec):
        raise OSError(5, "I/O error")

    monkeypatch.setattr(recovery, "complete", fail)
    monkeypatch.setattr(recovery, "rollback", fail)
    [rec] = Promoter(PromoterConfig()).recover()
    assert rec.result == "abandoned"
    assert os.listdir(os.path.join(env["pr"].state, "pending")) == []
    [kept] = quarantine.files()
    assert os.path.basename(kept).startswith(pending + ".")
    assert Promoter(PromoterConfig()).recover() == []


# The child: the same workload every run, resumed from where the parent last heard of it;
# it SIGKILLs itself at its `kill_at`-th filesystem call (0: never).
CHILD = textwrap.dedent("""
    import os, signal, sys
    from claude_autoharness.daemon.promote.land import Promoter
    from claude_autoharness.protocol.config import PromoterConfig
    from promote_support import WINDOW, workload

    start, kill_at, proj = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    calls = [0]

    def wrap(fn):
        def dying(*a, **kw):
            calls[0] += 1
            if calls[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return fn(*a, **kw)
        return dying

    for point in {points!r}:
        setattr(os, point, wrap(getattr(os, point)))
    pr = Promoter(PromoterConfig())
    pr.recover()
    for it, _expected, _state in workload()[start:]:
        out = pr.promote(it, WINDOW, proj)
        print(it.id, out.status, flush=True)
""").format(points=CRASH_POINTS)

def test_sigkill_during_many_landings_never_leaves_half_a_skill(env):
    """A process landing 200 intents is SIGKILLed again and again at random points (its own
    n-th filesystem call, or a random moment); after each kill recover() leaves every skill
    old or new, parseable, owned, named like its directory. In the end every intent was
    landed or rejected exactly once, and the tree is what the intents say it should be."""
    rng = random.Random(1)
    work = workload()
    proj, state = str(env["proj"]), env["pr"].state
    child_env = dict(os.environ, PYTHONPATH=os.path.dirname(__file__))
    statuses: list[str] = []
    kills = 0
    for _round in range(400):
        if len(statuses) == len(work):
            break
        timed = _round % 4 == 3
        kill_at = 0 if timed else rng.randint(1, 200)
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(len(statuses)), str(kill_at), proj],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env)
        if timed:
            time.sleep(rng.uniform(0.3, 1.2))
            child.send_signal(signal.SIGKILL)
        stdout, stderr = child.communicate(timeout=120)
        assert child.returncode in (0, -signal.SIGKILL), stderr
        kills += child.returncode == -signal.SIGKILL
        for line in stdout.splitlines():
            intent_id, status = line.split()
            assert intent_id == work[len(statuses)][0].id
            statuses.append(status)
        Promoter(PromoterConfig()).recover()
        check_consistent(state, [env["skills"]])
    assert len(statuses) == len(work), "the workload never finished"
    assert kills >= 10
    assert statuses == [expected for _, expected, _ in work]
    landed_ids = [e["intent"] for entries in histories(state).values() for e in entries]
    assert sorted(landed_ids) == sorted(it.id for it, expected, _ in work if expected == "landed")
    final = work[-1][2]
    for name, want in final.items():
        d = env["skills"] / name
        if want is None:
            assert not d.exists()
            continue
        body, files = want
        assert skillfile.parse((d / SKILL_MD).read_text())[1] == body
        assert {rel: (d / rel).read_text() for rel in skilltree.scan_tree(str(d))[0]
                if rel != SKILL_MD} == files
