"""The learning evaluation tells a good reflector from a bad one: its core, run through the
real daemon on a small episode set against the oracle fake and the noisy fake, gives the
figures each deserves."""

import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
import learning_eval as le  # noqa: E402 (after the path insert)

SMALL = ["correction", "marker", "routine", "repeat"]


def test_oracle_and_noisy_fakes_score_as_they_should(home):
    """Oracle: both planted lessons land exactly once (the repeat does not land again), no
    duplicate, nothing landed where nothing was planted. Noisy (paraphrased evidence,
    duplicates, junk): fewer lessons land exactly once, a lesson lands twice, junk lands.
    Both spend tokens, priced per episode."""
    oracle = le.run_suite("oracle", SMALL)
    noisy = le.run_suite("noisy", SMALL)
    o, n = oracle["overall"], noisy["overall"]
    assert (o["episodes"], o["planted"], o["exactly_once"], o["duplicates"], o["unplanted"]) == (
        4, 2, 2, 0, 0)
    assert oracle["landed_by_lesson"] == {"iex-server": 1, "read-prefixes": 1}
    assert n["planted"] == 2 and n["exactly_once"] < o["exactly_once"]
    assert n["duplicates"] >= 1 and n["unplanted"] >= 1
    assert noisy["landed_by_lesson"]["iex-server"] == 0  # its evidence was no quote
    for res in (oracle, noisy):
        assert set(res["kinds"]) == set(SMALL)
        for kind in res["kinds"].values():
            assert kind["tokens"] > 0 and kind["usd"] and kind["usd"] > 0
    assert oracle["kinds"]["routine"]["unplanted"] == 0 < noisy["kinds"]["routine"]["unplanted"]
    table = le.table(noisy)
    assert "overall" in table and "noisy" in table
    # the docs' figures are this run's: each kind's counts, per fake, as the table prints them
    for res in (oracle, noisy):
        for kind in SMALL:
            assert _counts(le.table(res), kind) == _doc_counts(res["reflector"], kind), kind


def _counts(table: str, kind: str) -> list[str]:
    """A kind's row of the table without its tokens and money (the fake estimates those from
    the request's size): eps, planted, once, dups, unplanted, verdicts."""
    row = next(x for x in table.splitlines() if x.split()[:1] == [kind])
    return row.split()[1:-2]


def _doc_counts(reflector: str, kind: str) -> list[str]:
    text = (REPO / "docs" / "evaluation.md").read_text()
    block = text.split(f"reflector {reflector}, model", 1)[1].split("reflector ", 1)[0]
    return _counts(block.split("noisy/oracle")[0], kind)


def test_verdict_figures_follow_the_reflector_tool(home):
    """Verdicts are measured only when the reflector's tool takes `feedback`: then the oracle's
    match the planted ones and the noisy fake's do not; without it they are n/a."""
    kinds = ["followed", "ignored", "missed"]
    oracle = le.run_suite("oracle", kinds)
    if not le.feedback_supported():
        assert oracle["overall"]["verdicts"] is None
        assert "n/a" in le.table(oracle)
        return
    noisy = le.run_suite("noisy", kinds)
    assert oracle["overall"]["verdicts"]["matching"] == oracle["overall"]["verdicts"]["planted"] == 3
    assert noisy["overall"]["verdicts"]["matching"] < 3


def test_the_fakes_over_the_openai_protocol_score_the_same_and_cost_nothing(home):
    """The same suite through the `openai` backend (the fakes served as an OpenAI-compatible
    endpoint on loopback): the oracle's figures are the Messages API's, and a model on this
    machine costs 0."""
    oracle = le.run_suite("oracle", SMALL, protocol="openai")
    o = oracle["overall"]
    assert (o["planted"], o["exactly_once"], o["duplicates"], o["unplanted"]) == (2, 2, 0, 0)
    assert oracle["reflector"] == "oracle (openai)"
    assert o["tokens"] > 0 and o["usd"] == 0.0


def test_live_backends_side_by_side(home):
    """`--live --backend openai:oracle,openai:noisy` against one endpoint that answers as the
    model it is asked for: two suites, one line each in the side-by-side table, the good model's
    figures above the bad one's."""
    from fake_openai import FakeOpenAI, tool_call_reply

    suite = le.episodes()

    def route(body):
        reply = le.answer_of(body["model"])(le._window(body), suite, le.feedback_supported())
        return tool_call_reply(reply, usage=le.openai_usage(body, reply))

    with FakeOpenAI(route=route) as fake:
        (home["home"] / "config.toml").write_text(
            f'[reflector]\nopenai_base_url = "{fake.base_url}"\nopenai_model = "oracle"\n')
        good, bad = le.run_live(["openai:oracle", "openai:noisy"], SMALL)
        assert {r.json["model"] for r in fake.completions} == {"oracle", "noisy"}
    assert (good["reflector"], good["model"], bad["model"]) == ("openai:oracle", "oracle", "noisy")
    assert good["overall"]["exactly_once"] == 2 > bad["overall"]["exactly_once"]
    lines = le.side_by_side([good, bad]).splitlines()
    assert len(lines) == 3 and lines[1].split()[:2] == ["openai:oracle", "oracle"]
    assert lines[2].split()[:2] == ["openai:noisy", "noisy"]
