"""What follows a fact: the outbox delivers in publish order, only after the book journaled
the fact, and a subscriber that fails costs the others nothing and stops nothing."""

import glob
import json
import os

import anyio
import pytest

from claude_autoharness.daemon.core import Daemon as Core
from claude_autoharness.daemon.events import Events, IntentsQueued, JobDone, TurnCounted
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol import paths
from claude_autoharness.protocol.config import load as load_config


async def _until(done, what: str) -> None:
    with anyio.fail_after(30):
        while not done():
            await anyio.sleep(0.01)


@pytest.mark.anyio
async def test_events_are_delivered_in_publish_order_and_a_failing_subscriber_loses_nothing():
    """Events of mixed types reach their subscribers in publish order, an event a subscriber
    publishes comes after the ones already waiting, async subscribers are awaited in turn,
    the one that raises is skipped for that event only, and a subscription once the events
    run is refused."""
    events, got = Events(), []

    def broken(ev):
        raise RuntimeError("a subscriber's bug")

    async def later(ev):
        await anyio.sleep(0)
        got.append(("async", ev.project))

    def queued(ev):
        got.append(("queued", ev.source))
        events.publish(TurnCounted(project="told by a subscriber"))

    events.subscribe(TurnCounted, broken)
    events.subscribe(TurnCounted, lambda ev: got.append(("turn", ev.project)))
    events.subscribe(TurnCounted, later)
    events.subscribe(IntentsQueued, queued)
    async with anyio.create_task_group() as tg:
        tg.start_soon(events.run)
        events.publish(TurnCounted(project="a"))
        events.publish(IntentsQueued(source="batch"))
        events.publish(TurnCounted(project="b"))
        await _until(lambda: len(got) == 7, "all delivered")
        with pytest.raises(RuntimeError):
            events.subscribe(JobDone, got.append)
        events.publish(TurnCounted(project="c"))  # the run goes on after the failures
        await _until(lambda: len(got) == 9, "the next one delivered")
        tg.cancel_scope.cancel()
    assert got == [("turn", "a"), ("async", "a"), ("queued", "batch"), ("turn", "b"),
                   ("async", "b"), ("turn", "told by a subscriber"),
                   ("async", "told by a subscriber"), ("turn", "c"), ("async", "c")]


def _journaled(eid: str) -> bool:
    """Whether the journal's files (written, not yet fsynced) hold the record of event `eid`."""
    out = b""
    for p in sorted(glob.glob(os.path.join(paths.state_dir(), "journal*"))):
        with open(p, "rb") as f:
            out += f.read()
    return f'"eid":"{eid}"'.encode() in out


@pytest.mark.anyio
async def test_a_stop_is_told_once_journaled_and_a_failing_subscriber_stops_nothing(home):
    """A main session's Stop: its `TurnCounted` reaches a subscriber only when the Stop's
    record is in the journal file; a subscriber that raises before it does not keep it from
    the others (the review loop's, subscribed at construction, re-judges the project), and
    the daemon goes on counting and answering."""
    core = Core(load_config())
    core.load()
    project = home["tmp"] / "proj"
    project.mkdir()
    told = []

    def broken(ev):
        raise RuntimeError("a subscriber's bug")

    core.events.subscribe(TurnCounted, broken)
    core.events.subscribe(TurnCounted, lambda ev: told.append(  # the Stops' ids: 5…, then 6…
        (ev.project, _journaled(str(5 + len(told)) * 32))))
    stop = {"session_id": "s-events", "hook_event_name": "Stop", "cwd": str(project),
            "transcript_path": str(home["claude"] / "projects" / "-p" / "s.jsonl")}
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(core.events.run)
            for i, name in enumerate(["SessionStart", "Stop", "Stop"], 4):
                reply = await core.hooks.cmd_hook(m.Hook(
                    payload=json.dumps({**stop, "hook_event_name": name}).encode(),
                    id=str(i) * 32))
                assert isinstance(reply, m.HookReply)
            await _until(lambda: len(told) == 2, "both Stops told")
            _uses, _calls, due = await core.review._take(wait=False)
            assert str(project) in due  # the review's subscriber got them too
            st = await core.status.status()
            tg.cancel_scope.cancel()
    finally:
        core.book.close()
    assert told == [(str(project), True), (str(project), True)]
    assert st.events.by_kind["Stop"] == 2 and core.book.state.turns.of("project", str(project)) == 2
