"""The `openai` backend: any OpenAI-compatible chat-completions endpoint.

Ollama, llama.cpp's server, vLLM, LM Studio, LiteLLM and OpenRouter all answer
`POST {base_url}/chat/completions`. The reply's JSON is asked for one of two ways:

- `tools`: a forced function call of `propose_skill_changes` (the Anthropic backend's tool);
- `json_schema`: `response_format` with the same schema, the answer in the message content.

`auto` tries `tools` first and falls back to `json_schema` once per endpoint and model when the
endpoint refuses tools (a 400/404/422/501 naming them) or answers with no tool call but a JSON
object; the mode that worked is remembered for the daemon's life and shown by status.

The client is the standard library's `urllib`: one JSON POST per reflection from a worker thread
needs no SDK, adds no dependency, and costs the daemon nothing until the backend is used (this
module is imported only then). A loopback endpoint is reached without any proxy, so a window sent
to a local model never leaves the machine. The pool owns retries: 408/409/429/5xx, timeouts and
refused connections are transient, other statuses permanent; a malformed reply gets one repair.
"""

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping

from ..prompt import TOOL_DESCRIPTION, TOOL_NAME, Prompt
from .base import (
    PermanentError,
    ReflectResult,
    TransientError,
    add_usage,
    check_reply,
    empty_usage,
    feedback_of,
)
from .endpoints import is_loopback, mode_in_use, remember

MODES = ("tools", "json_schema")
_REFUSED_STATUSES = (400, 404, 422, 501)  # how endpoints without tool support answer
_MAX_REPLY_BYTES = 8 * 1024 * 1024

def api_key(cfg, env: Mapping[str, str] | None = None) -> str:
    e = os.environ if env is None else env
    return cfg.openai_api_key or e.get("OPENAI_API_KEY", "")


def _first_mode(cfg) -> str:
    m = mode_in_use(cfg)
    return m if m in MODES else "tools"


def request_body(prompt: Prompt, cfg, mode: str, messages: list[dict]) -> dict:
    """The chat-completions request of one reflection in `mode`."""
    body: dict = {"model": cfg.openai_model, "max_tokens": int(cfg.max_tokens),
                  "messages": messages, "stream": False}
    if mode == "tools":
        body["tools"] = [{"type": "function", "function": {
            "name": TOOL_NAME, "description": TOOL_DESCRIPTION, "parameters": prompt.schema}}]
        body["tool_choice"] = {"type": "function", "function": {"name": TOOL_NAME}}
    else:
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": TOOL_NAME, "schema": prompt.schema}}
    return body


def first_messages(prompt: Prompt, mode: str) -> list[dict]:
    user = prompt.user_text
    if mode == "json_schema":
        user += (f"\n\nAnswer with the JSON object that `{TOOL_NAME}` takes, and nothing else.")
    return [{"role": "system", "content": prompt.system_text}, {"role": "user", "content": user}]


def _opener(base_url: str) -> urllib.request.OpenerDirector:
    if is_loopback(base_url):  # a local model: never through a proxy
        return urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener()


class _Refused(Exception):
    """The endpoint refused the mode (no tool calling, no response_format)."""


def post(cfg, body: dict, env: Mapping[str, str] | None = None) -> dict:
    """One POST of `body`; the decoded reply, or a Transient/PermanentError. Raises _Refused
    for a 4xx that says the endpoint does not take the mode's parameters."""
    url = cfg.openai_base_url.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    key = api_key(cfg, env)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers,
                                 method="POST")
    try:
        with _opener(url).open(req, timeout=float(cfg.timeout_s)) as resp:
            raw = resp.read(_MAX_REPLY_BYTES + 1)
    except urllib.error.HTTPError as err:
        raise _status_error(err) from None
    except TimeoutError:
        raise TransientError("openai: request timed out") from None
    except urllib.error.URLError as err:
        if isinstance(err.reason, TimeoutError):
            raise TransientError("openai: request timed out") from None
        raise TransientError(f"openai: connection error ({type(err.reason).__name__})") from None
    except (ConnectionError, OSError) as err:
        raise TransientError(f"openai: connection error ({type(err).__name__})") from None
    if len(raw) > _MAX_REPLY_BYTES:
        raise PermanentError("openai: the reply is over 8 MiB")
    try:
        reply = json.loads(raw)
    except ValueError:
        raise PermanentError("openai: the endpoint answered something that is not JSON "
                             "(is reflector.openai_base_url the API's base, ending in /v1?)"
                             ) from None
    if not isinstance(reply, dict):
        raise PermanentError("openai: the reply is not a JSON object")
    return reply


def _error_text(err: urllib.error.HTTPError) -> str:
    try:
        data = json.loads(err.read(65536) or b"{}")
    except (ValueError, OSError):
        return ""
    inner = data.get("error") if isinstance(data, dict) else None
    if isinstance(inner, dict):
        return str(inner.get("message") or inner.get("type") or "")[:300]
    if isinstance(inner, str):
        return inner[:300]
    return str(data.get("message") or "")[:300] if isinstance(data, dict) else ""


_REFUSAL_WORDS = ("tool", "function", "response_format", "json_schema", "schema")


def _status_error(err: urllib.error.HTTPError) -> Exception:
    status = err.code
    if status in (408, 409, 429) or status >= 500 and status != 501:
        raw = err.headers.get("retry-after") if err.headers is not None else None
        try:
            after = float(raw) if raw else None
        except ValueError:
            after = None
        return TransientError(f"openai: HTTP {status}", retry_after=after)
    if status in (401, 403):
        return PermanentError(f"openai: HTTP {status} (check reflector.openai_api_key or "
                              "OPENAI_API_KEY)")
    text = _error_text(err)
    if status in _REFUSED_STATUSES and (status == 501 or any(w in text.lower() for w in _REFUSAL_WORDS)):
        return _Refused(f"HTTP {status}: {text}".rstrip(": "))
    hint = " (is reflector.openai_base_url the API's base, such as http://host:port/v1?)" \
        if status == 404 else ""
    return PermanentError(f"openai: HTTP {status}: {text}".rstrip(": ") + hint)


def _message(reply: dict) -> dict:
    choices = reply.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        msg = choices[0].get("message")
        if isinstance(msg, dict):
            return msg
    return {}


def _tool_call(msg: dict) -> dict | None:
    for call in msg.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict) and fn.get("name") == TOOL_NAME:
            return call
    return None


def _decode(text: object) -> tuple[object, str]:
    if isinstance(text, dict):  # some servers hand arguments back decoded
        return text, ""
    if not isinstance(text, str) or not text.strip():
        return None, "the reply holds no JSON"
    t = text.strip()
    if t.startswith("```"):  # a fenced block, as small models like to answer
        t = t.strip("`").removeprefix("json").strip()
    try:
        return json.loads(t), ""
    except json.JSONDecodeError as e:
        return None, f"the reply's JSON does not parse ({e.msg} at char {e.pos})"


def parse_reply(reply: dict, mode: str) -> tuple[object, str, bool]:
    """(the decoded tool input, the problem or "", whether it came without the asked-for tool
    call but as content — the sign of an endpoint that ignores tools)."""
    msg = _message(reply)
    if mode == "tools":
        call = _tool_call(msg)
        if call is not None:
            obj, problem = _decode(call["function"].get("arguments"))
            return obj, problem, False
        obj, problem = _decode(msg.get("content"))
        if not problem and isinstance(obj, dict):
            return obj, "", True
        return None, f"no `{TOOL_NAME}` tool call in the reply " \
                     f"(finish_reason {_finish(reply)})", False
    obj, problem = _decode(msg.get("content"))
    return obj, problem, False


def _finish(reply: dict) -> str:
    choices = reply.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return str(choices[0].get("finish_reason"))
    return "None"


def usage_of(reply: dict) -> dict[str, int]:
    """A reply's tokens in the backends' keys; cached prompt tokens count as cache reads."""
    u = reply.get("usage")
    u = u if isinstance(u, dict) else {}
    details = u.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}
    cached = int(details.get("cached_tokens") or 0)
    prompt = int(u.get("prompt_tokens") or 0)
    return {"input_tokens": max(prompt - cached, 0), "output_tokens": int(u.get("completion_tokens") or 0),
            "cache_read": cached, "cache_creation": 0}


def _repair(messages: list[dict], reply: dict, mode: str, problem: str) -> list[dict]:
    """The conversation with the problem sent back once: as the tool call's result when the
    tool was called, else as a user turn."""
    note = (f"Your answer did not match the `{TOOL_NAME}` schema: {problem}. "
            + (f"Call `{TOOL_NAME}` again with a valid input." if mode == "tools" else
               "Answer again with only the JSON object, valid against the schema."))
    msg = _message(reply)
    call = _tool_call(msg) if mode == "tools" else None
    assistant: dict = {"role": "assistant", "content": msg.get("content") or ""}
    if call is not None:
        assistant["tool_calls"] = [call]
        return messages + [assistant, {"role": "tool", "tool_call_id": call.get("id") or "call",
                                       "content": note}]
    return messages + [assistant, {"role": "user", "content": note}]


def _ask(prompt: Prompt, cfg, mode: str, env, usage: dict) -> ReflectResult:
    messages = first_messages(prompt, mode)
    problem = ""
    for attempt in range(2):
        reply = post(cfg, request_body(prompt, cfg, mode, messages), env)
        add_usage(usage, usage_of(reply))
        obj, problem, as_content = parse_reply(reply, mode)
        if as_content and cfg.openai_output == "auto":
            mode = "json_schema"  # it answered in content: tools are ignored here
        if not problem:
            proposals, unusable = check_reply(obj)
            if unusable is None:
                remember(cfg, mode)
                return ReflectResult(proposals=proposals, feedback=feedback_of(obj), usage=usage,
                                     model=str(reply.get("model") or cfg.openai_model),
                                     raw_text=json.dumps(obj, ensure_ascii=False))
            problem = unusable
        if _finish(reply) == "length":
            problem += " (the reply hit max_tokens)"
        if attempt == 0:
            messages = _repair(messages, reply, mode, problem)
    failed = PermanentError(f"openai: unusable reply after one repair attempt: {problem}")
    failed.usage = usage  # tokens were spent all the same; the pool charges them
    raise failed


def reflect(prompt: Prompt, cfg, *, env: Mapping[str, str] | None = None) -> ReflectResult:
    """One reflection on the configured endpoint (blocking: call it from a worker thread)."""
    if not (cfg.openai_base_url and cfg.openai_model):
        raise PermanentError("openai: set reflector.openai_base_url and reflector.openai_model")
    usage = empty_usage()
    mode = _first_mode(cfg)
    try:
        return _ask(prompt, cfg, mode, env, usage)
    except _Refused as refused:
        if cfg.openai_output != "auto" or mode == "json_schema":
            what = "tool calling" if mode == "tools" else "JSON-schema output"
            other = "json_schema" if mode == "tools" else "tools"
            raise PermanentError(f"openai: the endpoint does not take {what} ({refused}); set "
                                 f"reflector.openai_output = \"{other}\" or use a model that "
                                 "supports it") from None
    try:
        return _ask(prompt, cfg, "json_schema", env, usage)
    except _Refused as refused:
        raise PermanentError(f"openai: the endpoint takes neither tool calls nor JSON-schema "
                             f"output ({refused}): use a model that supports one") from None
