"""The anthropic backend: the real SDK against a fake Messages API server on loopback."""

import json
import socket
import subprocess
import sys
import time

import pytest

from claude_autoharness.daemon.capture.redact import default_redactor
from claude_autoharness.daemon.reflect.backends import PermanentError, TransientError
from claude_autoharness.daemon.reflect.backends import anthropic as backend
from claude_autoharness.daemon.reflect.backends import reflect as dispatch
from claude_autoharness.daemon.reflect.prompt import TOOL_NAME, build_request
from claude_autoharness.protocol.config import ReflectorConfig
from fake_anthropic import FakeAnthropic, error_reply, hang, text_reply, tool_reply

SECRET = "sk-ant-api03-" + "Zx9" * 30
API_KEY = "sk-ant-test-key-not-real"
RAW_WINDOW = ('{"type":"user","message":{"content":"deploy with ANTHROPIC_API_KEY=' + SECRET + ' please"}}\n'
              '{"type":"assistant","message":{"content":[{"type":"text","text":"Deploying."}]}}\n')
INDEX = [{"name": "deploy-steps", "layer": "project", "owner": "autoharness",
          "description": "Use when deploying the service."}]
PROPOSAL = {"action": "patch", "skill": "deploy-steps", "layer": "project", "reason": "r",
            "evidence": "Deploying.", "description": None, "body": None, "old": "a", "new": "b",
            "path": None, "content": None}


def redacted_window() -> str:
    """Redaction happens upstream in capture; the test applies capture's own rules."""
    text, counts = default_redactor().redact(RAW_WINDOW)
    assert counts and SECRET not in text
    return text


@pytest.fixture
def fake(home):
    with FakeAnthropic() as f:
        yield f
    backend.close_clients()


def cfg_for(fake, **over) -> ReflectorConfig:
    args = dict(api_key=API_KEY, base_url=fake.base_url, timeout_s=60.0, max_tokens=1000)
    args.update(over)
    return ReflectorConfig(**args)


def prompt(**over):
    args = dict(guidance=None, max_intents=3)
    args.update(over)
    return build_request(redacted_window(), "digest: earlier the user set up CI", INDEX, **args)


def test_request_forces_the_tool_and_caches_the_prefix(fake):
    """The request forces `propose_skill_changes` (strict schema), marks every static prefix
    block for caching, carries the skill index, model and max_tokens, and sends the packet as
    the user message exactly as built."""
    p = prompt()
    fake.push(tool_reply({"proposals": [PROPOSAL]}))
    result = backend.reflect(p, cfg_for(fake, model="claude-test-model"), env={})
    [req] = fake.messages_requests
    body = req.json
    assert body["tool_choice"] == {"type": "tool", "name": TOOL_NAME}
    [tool] = body["tools"]
    assert tool["name"] == TOOL_NAME and tool["strict"] is True
    assert [b["cache_control"] for b in body["system"]] == [{"type": "ephemeral"}] * 2
    assert [b["text"] for b in body["system"]] == p.system_blocks
    listing = "- deploy-steps [project, autoharness]: Use when deploying the service."
    assert listing in body["system"][1]["text"]
    assert body["model"] == "claude-test-model" and body["max_tokens"] == 1000
    assert body["messages"] == [{"role": "user", "content": p.user_text}]
    assert result.proposals == [PROPOSAL] and result.model == "claude-test-model"


def test_no_secret_reaches_the_wire(fake):
    """A secret seeded in the transcript is redacted upstream; no request body carries it (raw or
    JSON-escaped), nor the API key, and the window in the body is exactly the redacted one."""
    fake.push(tool_reply({"proposals": ["not an object"]}), tool_reply({"proposals": []}))
    backend.reflect(prompt(), cfg_for(fake), env={})
    assert fake.requests
    for req in fake.requests:
        assert SECRET.encode() not in req.body
        assert json.dumps(SECRET).encode() not in req.body
        assert API_KEY.encode() not in req.body
    assert redacted_window() in fake.messages_requests[0].json["messages"][0]["content"]


def test_usage_and_model_recorded(fake):
    """Token usage, including cache reads and writes, is reported from the reply."""
    fake.push(tool_reply({"proposals": []}, usage={
        "input_tokens": 11, "output_tokens": 22, "cache_creation_input_tokens": 33,
        "cache_read_input_tokens": 44}))
    r = backend.reflect(prompt(), cfg_for(fake), env={})
    assert r.usage == {"input_tokens": 11, "output_tokens": 22, "cache_creation": 33, "cache_read": 44}
    assert r.tokens == 110
    assert json.loads(r.raw_text) == {"proposals": []}


def test_strict_schema_accepted_by_the_server(fake):
    """The fake applies the API's strict-mode schema rules; our tool passes them, and a schema
    with `maxItems` is refused (so the check is live)."""
    backend.reflect(prompt(), cfg_for(fake), env={})
    import anthropic
    client = anthropic.Anthropic(api_key=API_KEY, base_url=fake.base_url, max_retries=0)
    tool = {"name": "t", "input_schema": {"type": "object", "additionalProperties": False,
            "properties": {"xs": {"type": "array", "maxItems": 3, "items": {"type": "string"}}},
            "required": ["xs"]}, "strict": True}
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(model="m", max_tokens=10, tools=[tool],
                               messages=[{"role": "user", "content": "x"}])
    client.close()


@pytest.mark.parametrize("status,etype", [(429, "rate_limit_error"), (500, "api_error"),
                                          (503, "api_error"), (529, "overloaded_error")])
def test_rate_limits_and_server_errors_are_transient(fake, status, etype):
    """429 and 5xx are TransientError, after exactly one request (the pool retries, not the SDK);
    a `retry-after` header is passed on."""
    fake.push(error_reply(status, etype, headers={"retry-after": "7"}))
    with pytest.raises(TransientError) as ei:
        backend.reflect(prompt(), cfg_for(fake), env={})
    assert str(status) in ei.value.reason and ei.value.retry_after == 7.0
    assert len(fake.messages_requests) == 1


@pytest.mark.parametrize("status,etype", [(400, "invalid_request_error"),
                                          (401, "authentication_error"),
                                          (403, "permission_error"), (404, "not_found_error")])
def test_client_errors_are_permanent(fake, status, etype):
    """400, auth failures and unknown models are PermanentError: retrying cannot help."""
    fake.push(error_reply(status, etype, "nope"))
    with pytest.raises(PermanentError) as ei:
        backend.reflect(prompt(), cfg_for(fake), env={})
    assert str(status) in ei.value.reason
    assert API_KEY not in ei.value.reason


def test_hang_times_out_as_transient(fake):
    """A server that never answers ends in TransientError once the configured timeout passes."""
    fake.push(hang())
    t0 = time.monotonic()
    with pytest.raises(TransientError, match="timed out"):
        backend.reflect(prompt(), cfg_for(fake, timeout_s=0.5), env={})
    # the fake holds a hang for 60 s: only the client's timeout ends it sooner (the bound is
    # generous, so a loaded machine's slow start is no failure)
    assert 0.5 <= time.monotonic() - t0 < 30


def test_connection_refused_is_transient(home):
    """Nothing listening (the API unreachable) is a TransientError."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    cfg = ReflectorConfig(api_key=API_KEY, base_url=f"http://127.0.0.1:{port}", timeout_s=2.0)
    with pytest.raises(TransientError, match="connection"):
        backend.reflect(prompt(), cfg, env={})
    backend.close_clients()


def test_malformed_tool_input_gets_one_repair(fake):
    """A tool input without a `proposals` array is sent back once as an error tool_result; the
    repaired reply is used and the usage of both calls is summed."""
    fake.push(tool_reply({"changes": []}), tool_reply({"proposals": [PROPOSAL]}))
    r = backend.reflect(prompt(), cfg_for(fake), env={})
    assert r.proposals == [PROPOSAL]
    first, second = fake.messages_requests
    msgs = second.json["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert msgs[1]["content"][0]["type"] == "tool_use"
    [result] = msgs[2]["content"]
    assert result["type"] == "tool_result" and result["is_error"] is True
    assert result["tool_use_id"] == msgs[1]["content"][0]["id"]
    assert "proposals" in result["content"]
    assert second.json["tool_choice"] == first.json["tool_choice"]
    assert r.usage["input_tokens"] == 2400


def test_still_malformed_after_repair_is_permanent(fake):
    """A reply unusable after the one repair attempt is a PermanentError; no third request."""
    fake.push(tool_reply(["not", "an", "object"]), tool_reply({"proposals": "none"}))
    with pytest.raises(PermanentError, match="after one repair") as ei:
        backend.reflect(prompt(), cfg_for(fake), env={})
    assert len(fake.messages_requests) == 2
    assert ei.value.usage["output_tokens"] == 160  # spent tokens are still reported


def test_text_only_reply_is_repaired_as_text(fake):
    """A reply with no tool call gets a plain-text repair turn asking for the tool."""
    fake.push(text_reply("I think nothing needs to change."), tool_reply({"proposals": []}))
    assert backend.reflect(prompt(), cfg_for(fake), env={}).proposals == []
    msgs = fake.messages_requests[1].json["messages"]
    assert msgs[2]["content"][0]["type"] == "text" and TOOL_NAME in msgs[2]["content"][0]["text"]


def test_individual_bad_items_pass_through_to_intake(fake):
    """A well-formed reply whose items are malformed is not repaired: intake records each item
    (as a schema rejection), so the operator sees what was proposed."""
    fake.push(tool_reply({"proposals": [{"action": "explode"}, PROPOSAL]}))
    r = backend.reflect(prompt(), cfg_for(fake), env={})
    assert r.proposals == [{"action": "explode"}, PROPOSAL]
    assert len(fake.messages_requests) == 1


def test_config_base_url_beats_environment(fake, monkeypatch):
    """`reflector.base_url` wins over ANTHROPIC_BASE_URL; without it the env var is used, and the
    key comes from ANTHROPIC_API_KEY when the config has none."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # discard port: would fail
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    backend.reflect(prompt(), ReflectorConfig(base_url=fake.base_url, timeout_s=60.0))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    backend.reflect(prompt(), ReflectorConfig(timeout_s=60.0))
    assert len(fake.messages_requests) == 2
    for req in fake.messages_requests:
        auth = req.headers.get("authorization", "") + req.headers.get("x-api-key", "")
        assert "sk-ant-from-env" in auth


def test_dispatch_by_backend_name(fake):
    """`backends.reflect(name, ...)` runs the named backend; `none` is refused as permanent."""
    assert dispatch("anthropic", prompt(), cfg_for(fake), env={}).proposals == []
    with pytest.raises(PermanentError, match="no reflector backend"):
        dispatch("none", prompt(), cfg_for(fake))


def test_sdk_not_imported_at_module_import():
    """Importing the backends, prompt and intents never imports the ≈3 s `anthropic` SDK."""
    code = ("import sys\n"
            "import claude_autoharness.daemon.reflect.backends.anthropic\n"
            "import claude_autoharness.daemon.reflect.backends.claude\n"
            "import claude_autoharness.daemon.reflect.prompt, claude_autoharness.daemon.intents\n"
            "print('anthropic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
