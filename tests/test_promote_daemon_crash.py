"""Crash safety of landings through the real daemon: kill -9 at random points, restart, repeat."""

import hashlib
import os
import random
import time

from claude_autoharness.daemon.intents import IntentQueue
from claude_autoharness.daemon.promote import skillfile
from claude_autoharness.daemon.promote.land import Promoter
from claude_autoharness.protocol import paths
from claude_autoharness.protocol.config import PromoterConfig
from harness import Daemon, wait_for

WINDOW = "the user said: always run the linter before pushing, it catches import cycles"
N_SKILLS = 20
UPDATES = 9  # each skill: one create, then nine updates -> 200 intents


def topic(k: int) -> str:
    """Words of skill k's own: the promoter refuses a create whose description is near a live
    skill's."""
    return " ".join(hashlib.sha256(f"{k}.{i}".encode()).hexdigest()[:6] for i in range(4))


def queue_intents(project: str) -> list[str]:
    os.makedirs(paths.state_dir(), mode=0o700)
    q = IntentQueue()
    q.load()
    ids = []
    for round_ in range(UPDATES + 1):
        props = []
        for k in range(N_SKILLS):
            props.append({
                "action": "create" if round_ == 0 else "update", "skill": f"lint-rule-{k}",
                "layer": "project", "reason": "the user corrected the workflow",
                "evidence": "always run the linter before pushing",
                "description": f"Use when pushing {topic(k)} changes (version {round_}).",
                "body": f"Run the linter before every push (version {round_}).\n"})
        for j, p in enumerate(props):
            job = f"crashjob{round_:02d}{j:02d}"
            os.makedirs(paths.windows_dir(), mode=0o700, exist_ok=True)
            with open(os.path.join(paths.windows_dir(), f"{job}.txt"), "w") as f:
                f.write(WINDOW)
            ids += [i.id for i in q.intake(job, "crash-sess", "reflector", [p], WINDOW,
                                           project, 1)]
    return ids


def test_kill9_during_landings_never_leaves_half_a_skill(home):
    """200 queued intents; the daemon is SIGKILLed at random moments while it lands them and
    restarted each time. In the end every intent is landed exactly once, and every SKILL.md
    parses, is owned, and is exactly its last recorded version."""
    project = home["tmp"] / "proj"
    project.mkdir()
    ids = queue_intents(str(project))
    assert len(ids) == len(set(ids)) == N_SKILLS * (UPDATES + 1)
    rng = random.Random(7)
    landed_between_kills = []
    for _ in range(25):
        d = Daemon(home["home"])
        time.sleep(rng.uniform(0.0, 0.08))
        d.kill9()
        q = IntentQueue()
        q.load()
        landed_between_kills.append(q.counts()["landed"])
    # the kills really fell in the middle of the work: progress was made across restarts
    assert sum(0 < n < len(ids) for n in landed_between_kills) >= 5
    d = Daemon(home["home"])
    try:
        wait_for(lambda: d.status()["intents"]["queued"] == 0, timeout=120, what="drain")
        counts = d.status()["intents"]
    finally:
        d.stop()
    q = IntentQueue()
    q.load()
    statuses = {i.id: i.status for i in q.list()}
    assert set(statuses) == set(ids)
    assert counts["landed"] == len(ids), counts
    pr = Promoter(PromoterConfig())
    for k in range(N_SKILLS):
        name = f"lint-rule-{k}"
        md = project / ".claude" / "skills" / name / "SKILL.md"
        fields, body = skillfile.parse(md.read_text())
        assert fields["name"] == name
        assert body.strip() == f"Run the linter before every push (version {UPDATES})."
        history = pr.history(name, project_root=str(project))
        assert len(history) == UPDATES + 1  # each intent landed once, none twice
    assert not [p for p in project.rglob("*") if ".tmp" in p.name]
