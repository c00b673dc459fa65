"""The `openai` backend against a fake OpenAI-compatible endpoint on loopback (real HTTP): the
request it sends in each output mode, the fallback from tool calls to JSON-schema output, the
one repair, errors the pool retries or gives up on; then through the real daemon: a Stop to a
landed skill, feedback grounded as for any backend, retries, status, and per-kind routing."""

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from claude_autoharness.daemon.reflect import backends
from claude_autoharness.daemon.reflect.backends import endpoints as oa
from claude_autoharness.daemon.reflect.backends import routing
from claude_autoharness.daemon.reflect.prompt import Prompt, tool_schema
from claude_autoharness.protocol.config import ReflectorConfig
from fake_anthropic import FakeAnthropic, tool_reply
from fake_openai import FakeOpenAI, content_reply, error_reply, hang, tool_call_reply
from harness import ctl, wait_for
from pipeline_support import QUOTE, Env, proposal

PROMPT = Prompt(system_blocks=["instructions"], user_text="the window", max_intents=3,
                schema=tool_schema(3))
ANSWER = {"proposals": [proposal()], "feedback": []}


@pytest.fixture
def local():
    with FakeOpenAI() as f:
        yield f


def cfg(fake, **over) -> ReflectorConfig:
    return ReflectorConfig(**{"backend": "openai", "openai_base_url": fake.base_url,
                              "openai_model": "qwen-test", "timeout_s": 5.0, **over})


# ---- the backend alone -----------------------------------------------------------------------

def test_a_forced_tool_call_is_the_reply(local):
    local.push(tool_call_reply(ANSWER))
    c = cfg(local, openai_output="tools")
    out = backends.reflect("openai", PROMPT, c)
    assert out.proposals == ANSWER["proposals"]
    assert out.usage["input_tokens"] == 900 and out.usage["output_tokens"] == 70
    [req] = local.completions
    body = req.json
    assert body["model"] == "qwen-test"
    assert body["tool_choice"] == {"type": "function", "function": {"name": "propose_skill_changes"}}
    assert body["tools"][0]["function"]["parameters"] == tool_schema(3)
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "authorization" not in {k.lower() for k in req.headers}  # no key configured, none sent


def test_json_schema_mode_asks_for_a_response_format(local):
    local.push(content_reply(ANSWER))
    out = backends.reflect("openai", PROMPT, cfg(local, openai_output="json_schema"))
    assert out.proposals == ANSWER["proposals"]
    body = local.completions[0].json
    assert "tools" not in body
    assert body["response_format"]["json_schema"]["schema"] == tool_schema(3)


def test_auto_falls_back_to_json_schema_when_tools_are_refused_and_remembers(local):
    local.tools_supported = False
    local.push(content_reply(ANSWER), content_reply(ANSWER))
    c = cfg(local, openai_model="no-tools-model")
    assert oa.mode_in_use(c) == "auto"
    assert backends.reflect("openai", PROMPT, c).proposals == ANSWER["proposals"]
    assert ["tools" in r.json for r in local.completions] == [True, False]
    assert oa.mode_in_use(c) == "json_schema"
    backends.reflect("openai", PROMPT, c)  # the next call goes straight to the mode that works
    assert ["tools" in r.json for r in local.completions] == [True, False, False]


def test_an_endpoint_that_ignores_tools_and_answers_json_is_taken(local):
    local.push(content_reply(ANSWER))
    c = cfg(local, openai_model="ignores-tools")
    assert backends.reflect("openai", PROMPT, c).proposals == ANSWER["proposals"]
    assert oa.mode_in_use(c) == "json_schema"


def test_tools_forced_on_an_endpoint_without_them_says_what_to_set(local):
    local.tools_supported = False
    with pytest.raises(backends.PermanentError) as e:
        backends.reflect("openai", PROMPT, cfg(local, openai_output="tools"))
    assert "does not take tool calling" in e.value.reason
    assert 'openai_output = "json_schema"' in e.value.reason


def test_malformed_arguments_get_one_repair(local):
    local.push(tool_call_reply('{"proposals": [ oops'), tool_call_reply(ANSWER))
    out = backends.reflect("openai", PROMPT, cfg(local, openai_output="tools"))
    assert out.proposals == ANSWER["proposals"]
    first, second = local.completions
    msgs = second.json["messages"]
    assert msgs[-2]["role"] == "assistant" and msgs[-2]["tool_calls"]
    assert msgs[-1]["role"] == "tool" and "does not parse" in msgs[-1]["content"]
    assert out.usage["input_tokens"] == 1800  # the repair round's tokens count too


def test_no_tool_call_twice_is_permanent_with_the_reason(local):
    local.push(content_reply("I think the skill is fine."), content_reply("Still prose."))
    with pytest.raises(backends.PermanentError) as e:
        backends.reflect("openai", PROMPT, cfg(local, openai_output="tools"))
    assert "unusable reply after one repair attempt" in e.value.reason
    assert "no `propose_skill_changes` tool call" in e.value.reason
    assert e.value.usage["output_tokens"] == 140
    assert local.completions[1].json["messages"][-1]["role"] == "user"


def test_junk_that_parses_but_has_no_proposals_is_refused(local):
    local.push(tool_call_reply({"answer": 42}), tool_call_reply([1, 2]))
    with pytest.raises(backends.PermanentError) as e:
        backends.reflect("openai", PROMPT, cfg(local, openai_output="tools"))
    assert "must be a JSON object" in e.value.reason


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_rate_limits_and_server_errors_are_transient(local, status):
    local.push(error_reply(status, retry_after=1.5))
    with pytest.raises(backends.TransientError) as e:
        backends.reflect("openai", PROMPT, cfg(local))
    assert e.value.reason == f"openai: HTTP {status}" and e.value.retry_after == 1.5


def test_auth_errors_name_the_key_setting(local):
    local.push(error_reply(401, "bad key"))
    with pytest.raises(backends.PermanentError) as e:
        backends.reflect("openai", PROMPT, cfg(local, openai_api_key="k-test-1"))
    assert "openai_api_key" in e.value.reason
    assert local.completions[0].headers.get("Authorization") == "Bearer k-test-1"


def test_a_hang_times_out_as_transient(local):
    local.push(hang(30))
    with pytest.raises(backends.TransientError) as e:
        backends.reflect("openai", PROMPT, cfg(local, timeout_s=0.5))
    assert e.value.reason == "openai: request timed out"


def test_connection_refused_is_transient(local):
    url = local.base_url
    local.stop()
    c = ReflectorConfig(backend="openai", openai_base_url=url, openai_model="m", timeout_s=2.0)
    with pytest.raises(backends.TransientError) as e:
        backends.reflect("openai", PROMPT, c)
    assert "connection error" in e.value.reason


def test_a_page_that_is_not_the_api_says_where_to_look(local):
    c = ReflectorConfig(backend="openai", openai_base_url=local.base_url.removesuffix("/v1")
                        + "/nothing", openai_model="m", timeout_s=5.0)
    with pytest.raises(backends.PermanentError) as e:
        backends.reflect("openai", PROMPT, c)
    assert "HTTP 404" in e.value.reason


def test_choice_and_destination(local):
    c = cfg(local)
    assert backends.choose_backend(c, env={}) == "openai"
    info = backends.available(c, env={})
    assert "nothing leaves the machine" in info["destination"]
    missing = ReflectorConfig(backend="openai", openai_base_url=local.base_url)
    assert backends.choose_backend(missing, env={}) == "none"
    assert "reflector.openai_model not set" in backends.available(missing, env={})["reason"]
    remote = ReflectorConfig(backend="openai", openai_base_url="https://gw.example/v1",
                             openai_model="m")
    assert "over the network" in backends.available(remote, env={})["destination"]
    assert not oa.is_loopback("https://gw.example/v1")
    assert oa.is_loopback("http://localhost:8080/v1") and oa.is_loopback("http://[::1]:1/v1")


def test_routes_pick_backend_and_model_per_kind_of_work():
    c = ReflectorConfig(backend="anthropic", model="claude-haiku-4-5",
                        openai_base_url="http://127.0.0.1:1/v1", openai_model="small",
                        routes={"reflect": "openai", "curate": "anthropic:claude-sonnet-4-5",
                                "learn": "openai:bigger"})
    assert routing.work_of("threshold") == "reflect"
    assert routing.work_of("curate", skills=1) == "repair"
    r = routing.for_work(c, "reflect")
    assert (r.backend, routing.model_of(r, "openai")) == ("openai", "small")
    learn = routing.for_work(c, "learn")
    assert (learn.backend, learn.openai_model) == ("openai", "bigger")
    repair = routing.for_work(c, "repair")  # falls back to the curate route
    assert (repair.backend, repair.model) == ("anthropic", "claude-sonnet-4-5")


# ---- through the real daemon ---------------------------------------------------------------

@pytest.fixture
def env_openai(home, local, monkeypatch):
    envs = []

    def make(extra=None, config: str = ""):
        if config:
            (home["home"] / "config.toml").write_text(config)
        base = {"AUTOHARNESS_REFLECTOR_BACKEND": "openai",
                "AUTOHARNESS_REFLECTOR_OPENAI_BASE_URL": local.base_url,
                "AUTOHARNESS_REFLECTOR_OPENAI_MODEL": "qwen-test", **(extra or {})}
        # no Anthropic endpoint unless a test routes work there (a closed port otherwise)
        e = Env(home, SimpleNamespace(base_url="http://127.0.0.1:9"), monkeypatch, extra_env=base)
        envs.append(e)
        return e

    yield make
    for e in envs:
        e.daemon.stop()


def feedback():
    r = ctl("queue", "feedback", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_stop_lands_a_skill_through_a_local_model(env_openai, local):
    local.push(tool_call_reply({"proposals": [proposal()], "feedback": [
        {"skill": "no-such-skill", "layer": "project", "verdict": "missed", "evidence": QUOTE}]}))
    e = env_openai()
    e.work()
    wait_for(lambda: e.status()["intents"]["landed"] == 1, timeout=60, what="landing")
    assert "read the first error" in e.skill().read_text()
    assert QUOTE in local.completions[0].body.decode()
    [v] = feedback()  # the verdict is grounded as any backend's: no such skill, refused
    assert v["status"] != "accepted"
    rf = e.status()["reflector"]
    assert rf["backend"] == "openai" and rf["model"] == "qwen-test"
    assert rf["output"] == "tools"
    assert "nothing leaves the machine" in rf["destination"]
    text = ctl("status").stdout
    assert "reflector: openai qwen-test (tool calls); windows go to" in text
    cap = ctl("capture", "--session", e.sid, "--from", "0")
    assert cap.returncode == 0, cap.stderr
    assert "sent to: " + local.base_url + " on this machine (loopback: nothing leaves the " \
        "machine)" in cap.stdout


def test_a_429_then_success_is_retried(env_openai, local):
    local.push(error_reply(429, retry_after=0.05), tool_call_reply({"proposals": [proposal()]}))
    e = env_openai()
    e.work()
    wait_for(lambda: e.status()["intents"]["landed"] == 1, timeout=60, what="landing")
    assert len(local.completions) == 2 and e.status()["jobs"]["failed"] == 0


def test_a_500_series_gives_up_with_the_reason(env_openai, local):
    local.push(*[error_reply(500)] * 3)
    e = env_openai({"AUTOHARNESS_REFLECTOR_MAX_ATTEMPTS": "3"})
    e.work()
    wait_for(lambda: e.status()["jobs"]["failed"] == 1, timeout=60, what="job failed")
    assert len(local.completions) == 3
    [f] = e.status()["jobs"]["recent_failures"]
    assert "openai: HTTP 500" in f["error"]


def test_junk_from_a_weak_model_is_refused_and_lands_nothing(env_openai, local):
    junk = proposal(skill="Bad Name!!", evidence="words the session never said")
    local.push(tool_call_reply({"proposals": [junk]}))
    e = env_openai()
    e.work()
    wait_for(lambda: e.status()["intents"]["rejected"] == 1, timeout=60, what="rejection")
    assert not (e.project / ".claude" / "skills").exists() or \
        not any((e.project / ".claude" / "skills").iterdir())


def test_learn_routed_to_another_backend(env_openai, local, home):
    """`routes = { learn = "anthropic" }`: the threshold window goes to the local model, the
    /learn call to the Anthropic fake; status names both."""
    with FakeAnthropic() as api:
        api.push(tool_reply({"proposals": []}))
        local.push(tool_call_reply({"proposals": []}))
        e = env_openai({"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key",
                        "ANTHROPIC_BASE_URL": api.base_url, "AUTOHARNESS_REFLECT_EVERY": "2"},
                       config='[reflector]\nroutes = { learn = "anthropic:claude-sonnet-4-5" }\n')
        e.work()
        wait_for(lambda: e.status()["jobs"]["done"] == 1, timeout=60, what="reflection")
        r = ctl("learn", "--session", e.sid, "run the linter before committing")
        assert r.returncode == 0, r.stderr
        wait_for(lambda: e.status()["jobs"]["done"] == 2, timeout=60, what="learn job")
        assert len(local.completions) == 1
        [req] = api.messages_requests
        assert req.json["model"] == "claude-sonnet-4-5"
        assert "run the linter before committing" in req.body.decode()
        routes = e.status()["reflector"]["routes"]
        assert routes["learn"].startswith("anthropic claude-sonnet-4-5")


def test_a_local_model_costs_nothing_and_a_priced_one_what_the_table_says(env_openai, local):
    local.push(tool_call_reply({"proposals": []}))
    e = env_openai()
    e.work()
    wait_for(lambda: e.status()["jobs"]["done"] == 1, timeout=60, what="reflection")
    cost = json.loads(ctl("report", "--json").stdout)["cost"]
    assert cost["calls"] == 1 and cost["usd"] == 0.0
    e.daemon.stop()
    (e.home["home"] / "config.toml").write_text('[reflector]\nprices = { "qwen-test" = [2.0, 10.0] }\n')
    e.daemon = type(e.daemon)(e.home["home"])
    cost = json.loads(ctl("report", "--json").stdout)["cost"]
    assert cost["usd"] == pytest.approx((900 * 2.0 + 70 * 10.0) / 1_000_000)


def test_a_backend_budget_holds_its_jobs_and_says_so(env_openai, local):
    local.push(tool_call_reply({"proposals": []}), tool_call_reply({"proposals": []}))
    e = env_openai(config="[reflector]\nbackend_budgets = { openai = 500 }\n")
    e.work()
    wait_for(lambda: e.status()["jobs"]["done"] == 1, timeout=60, what="first reflection")
    e.work()  # 970 tokens spent of 500: the next job waits for tomorrow
    wait_for(lambda: e.status()["jobs"]["pending"] == 1, timeout=60, what="second job queued")
    wait_for(lambda: e.status()["jobs"]["waiting"], timeout=60, what="the waiting reason")
    assert "openai backend's daily token budget of 500 reached" in e.status()["jobs"]["waiting"]
    assert len(local.completions) == 1


def test_the_idle_daemon_never_imports_the_openai_client():
    """Users of the other backends pay nothing for this one: importing the daemon and asking
    what backend is available loads neither the backend module nor urllib's HTTP client."""
    code = ("import sys\n"
            "import claude_autoharness.daemon.app\n"
            "from claude_autoharness.daemon.reflect import backends\n"
            "from claude_autoharness.protocol.config import ReflectorConfig\n"
            "backends.available(ReflectorConfig(), env={})\n"
            "print([m for m in ('claude_autoharness.daemon.reflect.backends.openai',"
            " 'urllib.request', 'http.client') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
