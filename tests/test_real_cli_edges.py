"""The edges of a real session on the real Claude Code CLI (npm `@anthropic-ai/claude-code`),
model scripted: a final reply the model takes a while to give, a subagent's calls, a forked
session, a session whose only work is `/learn`.

As in tests/test_real_cli.py, each test is one fresh user (tests/real_cli.py) with autoharness
installed; the CLI talks to a streaming loopback fake of the Messages API, never the network,
and the daemon is started by the hook.
"""


from fake_anthropic import message_reply, text_block, tool_use_block
from harness import wait_for
from real_cli import CliModel, strings

# how long the fake holds the final reply back: the transcript is quiet meanwhile, twice as long
# as a job waits for a quiet transcript (reflect/pool.py SETTLE_S), however loaded the machine
HOLD_S = 2.0
RUNS = 10


def bash(command: str) -> dict:
    return tool_use_block("Bash", {"command": command, "description": "run it"})


def reply(*blocks, delay: float | None = None) -> dict:
    out = message_reply(*blocks)
    if delay is not None:
        out["delay"] = delay  # the fake waits this long before it answers
    return out


def marker(topic: str, body: str) -> str:
    return (f"<!-- learning\ntopic: {topic}\nkind: convention\ndoc-impact: none\n"
            f"body: {body}\n-->")


def seen_by_reflector(model: CliModel, *texts: str) -> bool:
    """Whether one reflector request carries every one of `texts`."""
    return any(all(t in "\n".join(strings(r["messages"])) for t in texts)
               for r in model.reflector_requests())


def test_final_reply_held_back_reaches_the_reflector_every_time(sandbox, model):
    """Ten sessions, each crossing the threshold (2 calls) and then waiting 2 s for the model's
    final reply, which holds a learning marker and its lesson: in every one of the ten, the
    threshold job's window carries that final answer to the reflector (the job is cut after
    the turn's final record, or carries the Stop event's text), never just the turn before."""
    box = sandbox(AUTOHARNESS_REFLECT_EVERY=2, AUTOHARNESS_REFLECTOR_BACKEND="anthropic")
    for n in range(1, RUNS + 1):
        # keys and topics of fixed width: none is a prefix of another
        topic, lesson = f"held-final-{n:02d}", f"Lesson {n:02d}: check the lock file first."
        model.script(f"held run {n:02d}.",
                     reply(bash(f"echo one {n}")),
                     reply(bash(f"echo two {n}")),
                     reply(text_block(f"Run {n} done.\n\n" + marker(topic, lesson)),
                           delay=HOLD_S))
        box.run_stream(f"held run {n:02d}.", before_exit=lambda _, n=n: wait_for(
            lambda: box.stops() == n, timeout=90, what=f"Stop {n}"))
        wanted = (f"topic: {topic}", lesson)
        wait_for(lambda w=wanted: seen_by_reflector(model, *w), timeout=90,
                 what=f"run {n}'s final answer at the reflector")
    assert box.status()["jobs"]["by_kind"].get("threshold") == RUNS


def test_subagent_calls_are_shown_apart_and_not_activity(sandbox, model):
    """The model calls the Agent tool; its subagent runs 3 Bash calls; the main session runs
    1 Bash: activity counts the 2 main-session calls (Bash, Agent), the subagent's 3 are shown
    apart (`subagent_calls`, the SUBAGENT column), and every PreToolUse arrived."""
    box = sandbox(AUTOHARNESS_REFLECT_EVERY=1000)
    model.script("delegate main work",
                 reply(bash("echo main")),
                 reply(tool_use_block("Agent", {
                     "description": "Three echoes", "subagent_type": "general-purpose",
                     "prompt": "SUBTASK-ECHOES run three echoes and report"})),
                 reply(text_block("The subagent ran its echoes.")))
    model.script("SUBTASK-ECHOES",
                 reply(bash("echo sub 1")), reply(bash("echo sub 2")), reply(bash("echo sub 3")),
                 reply(text_block("Three echoes ran.")))

    def counted(sid):
        st = box.status() or {"sessions": []}
        return [(s["activity"], s["subagent_calls"]) for s in st["sessions"]
                if s["session_id"] == sid] == [(2, 3)]

    shown = []

    def live_session(r):  # while the session is live, `status` lists it
        wait_for(lambda: counted(r["session_id"]), timeout=90,
                 what="main and subagent calls counted")
        shown.extend(ln for ln in box.ctl("status").stdout.splitlines() if r["session_id"] in ln)

    result = box.run_stream("delegate main work", before_exit=live_session)
    assert result["subtype"] == "success"
    assert box.status()["events"]["by_kind"]["PreToolUse"] == 5
    [row] = shown
    assert row.split()[1] == "2" and row.split()[4] == "3"


def test_fork_first_window_holds_no_prompt_already_reflected(sandbox, model):
    """A session crosses the threshold and is reflected; `--resume ID --fork-session` makes a
    new session whose transcript starts with copies of those records; the fork's first
    threshold window reaches the reflector with the fork's own prompt and none of its
    parent's, which were reflected already."""
    box = sandbox(AUTOHARNESS_REFLECT_EVERY=2, AUTOHARNESS_REFLECTOR_BACKEND="anthropic")
    model.script("parent prompt alpha", reply(bash("echo a1")), reply(bash("echo a2")),
                 reply(text_block("Parent done.")))
    parent = box.run_stream("parent prompt alpha", before_exit=lambda _: wait_for(
        lambda: box.stops() == 1, timeout=90, what="the parent's Stop"))
    wait_for(lambda: seen_by_reflector(model, "parent prompt alpha"), timeout=90,
             what="the parent's reflection")
    model.script("fork prompt beta", reply(bash("echo b1")), reply(bash("echo b2")),
                 reply(text_block("Fork done.")))
    fork = box.run_stream("fork prompt beta", "--resume", parent["session_id"],
                          "--fork-session", before_exit=lambda _: wait_for(
                              lambda: box.stops() == 2, timeout=90, what="the fork's Stop"))
    assert fork["session_id"] != parent["session_id"]
    assert "parent prompt alpha" in box.transcript(fork["session_id"]).read_text()
    wait_for(lambda: seen_by_reflector(model, "fork prompt beta"), timeout=90,
             what="the fork's reflection")
    [req] = [r for r in model.reflector_requests()
             if "fork prompt beta" in "\n".join(strings(r["messages"]))]
    assert "parent prompt alpha" not in "\n".join(strings(req["messages"]))


def test_learn_only_session_costs_one_model_call(sandbox, model):
    """`claude -p "/learn LESSON"` in a new session: the command's one Bash call queues the
    learn job and is no activity, so SessionEnd queues nothing more — exactly one reflector
    model call for the whole session."""
    box = sandbox(AUTOHARNESS_REFLECT_EVERY=1000, AUTOHARNESS_REFLECTOR_BACKEND="anthropic")
    lesson = "run the migrations before the integration tests"
    result = box.run(f"/learn {lesson}")
    wait_for(lambda: seen_by_reflector(model, lesson), timeout=90, what="the learn reflection")
    st = box.status()
    assert st["events"]["by_kind"].get("SessionEnd") == 1
    assert st["jobs"]["by_kind"] == {"learn": 1}
    wait_for(lambda: (box.status()["jobs"]["pending"], box.status()["jobs"]["running"]) == (0, 0),
             timeout=60, what="no job left")
    assert len(model.reflector_requests()) == 1
    assert all(s["activity"] == 0 for s in box.status()["sessions"]
               if s["session_id"] == result["session_id"])
