"""The `anthropic` backend: one forced tool call through the official SDK.

Blocking by design: the pool runs `reflect` in a worker thread. The SDK is imported inside the
functions, never at module import, because it costs ≈3 s of CPU and must stay off the event loop.
The SDK's own retries are off (`max_retries=0`): the pool owns retries and backoff.
"""

import json
import os
import threading
from collections.abc import Mapping
from typing import Any

from ..prompt import TOOL_NAME, Prompt, tool_definition
from .base import (
    PermanentError,
    ReflectResult,
    TransientError,
    add_usage,
    check_reply,
    empty_usage,
    feedback_of,
)

CACHE = {"type": "ephemeral"}

_clients: dict[tuple, Any] = {}  # anthropic.Anthropic, imported lazily
_clients_lock = threading.Lock()


def preload() -> None:
    """Import the SDK now (call from a worker thread at startup so the first job is not slow)."""
    import anthropic  # noqa: F401


def client(cfg, env: Mapping[str, str] | None):
    """One SDK client per (key, base URL, timeout), reused so connections stay warm."""
    import anthropic

    e = os.environ if env is None else env
    api_key = cfg.api_key or e.get("ANTHROPIC_API_KEY") or None
    base_url = cfg.base_url or e.get("ANTHROPIC_BASE_URL") or None  # config beats the env
    k = (api_key, base_url, float(cfg.timeout_s))
    with _clients_lock:
        c = _clients.get(k)
        if c is None:
            kwargs: dict[str, Any] = {"base_url": base_url, "timeout": float(cfg.timeout_s), "max_retries": 0}
            if api_key:
                kwargs["api_key"] = api_key
            elif e.get("ANTHROPIC_AUTH_TOKEN"):
                kwargs["auth_token"] = e["ANTHROPIC_AUTH_TOKEN"]
            try:
                c = anthropic.Anthropic(**kwargs)
            except anthropic.AnthropicError as err:
                raise PermanentError(f"anthropic client: {err}") from None
            _clients[k] = c
        return c


def close_clients() -> None:
    """Close pooled HTTP connections (daemon shutdown, config reload)."""
    with _clients_lock:
        clients = list(_clients.values())
        _clients.clear()
    for c in clients:
        try:
            c.close()
        except Exception:
            pass


def call(cfg, fn):
    """`fn(client)` on the SDK client of `cfg`, its SDK errors mapped as `classify` maps them
    (blocking; for the Message Batches requests, which are not reflections)."""
    import anthropic

    try:
        return fn(client(cfg, None))
    except anthropic.AnthropicError as err:
        raise classify(err) from None


def _retry_after(err) -> float | None:
    try:
        v = err.response.headers.get("retry-after")
        return float(v) if v is not None else None
    except (AttributeError, ValueError, TypeError):
        return None


def classify(err: Exception) -> Exception:
    """Map an SDK exception to Transient/Permanent. Messages name the status, never content."""
    import anthropic

    if isinstance(err, anthropic.APITimeoutError):
        return TransientError("anthropic: request timed out")
    if isinstance(err, anthropic.APIConnectionError):
        return TransientError(f"anthropic: connection error ({type(err.__cause__).__name__})")
    if isinstance(err, anthropic.APIStatusError):
        status = err.status_code
        what = _error_field(err, "type")
        if status in (408, 409, 429) or status >= 500:
            return TransientError(f"anthropic: HTTP {status} {what}".rstrip(),
                                  retry_after=_retry_after(err))
        if status in (401, 403):
            return PermanentError(f"anthropic: HTTP {status} {what} (check the API key)".rstrip())
        message = _error_field(err, "message")[:300]
        detail = f"anthropic: HTTP {status} {what}: {message}"
        return PermanentError(detail.rstrip(": "))
    return PermanentError(f"anthropic: {type(err).__name__}: {err}")


def _error_field(err, key: str) -> str:
    """`key` ("type", "message") of the error body, whether nested under `error` or not."""
    body = getattr(err, "body", None)
    if isinstance(body, dict):
        inner = body["error"] if isinstance(body.get("error"), dict) else body
        return str(inner.get(key) or "")
    return ""


def _find_tool_use(msg):
    for block in getattr(msg, "content", None) or ():
        if getattr(block, "type", None) == "tool_use" and getattr(block, "name", None) == TOOL_NAME:
            return block
    return None


def _raw_text(msg) -> str:
    """The reply as the operator would want to read it: the tool input, else any text."""
    block = _find_tool_use(msg)
    if block is not None:
        return json.dumps(block.input, ensure_ascii=False)
    return "".join(getattr(b, "text", "") or "" for b in getattr(msg, "content", None) or ())


def _assistant_content(msg) -> list[dict]:
    out = []
    for b in getattr(msg, "content", None) or ():
        t = getattr(b, "type", None)
        if t == "text":
            out.append({"type": "text", "text": b.text})
        elif t == "tool_use":
            out.append({"type": "tool_use", "id": b.id, "name": b.name, "input": b.input})
    return out or [{"type": "text", "text": "(no content)"}]


def _repair_turns(msg, problem: str) -> list[dict]:
    """Send the problem back once: as a failed tool_result if the tool was called, else as text."""
    note = (f"Your call did not match the `{TOOL_NAME}` schema: {problem}. "
            f"Call `{TOOL_NAME}` again with a valid input.")
    block = _find_tool_use(msg)
    if block is not None:
        user = [{"type": "tool_result", "tool_use_id": block.id, "is_error": True, "content": note}]
    else:
        user = [{"type": "text", "text": note}]
    return [{"role": "assistant", "content": _assistant_content(msg)},
            {"role": "user", "content": user}]


def _system(prompt: Prompt) -> list[dict]:
    # Each static block is a cache breakpoint: the instructions stay cached even when the skill
    # index (the later block) changes. Tools come before system in the cached prefix.
    return [{"type": "text", "text": t, "cache_control": CACHE} for t in prompt.system_blocks]


def request_params(prompt: Prompt, cfg) -> dict:
    """The Messages API parameters of one reflection (also one Message Batches item)."""
    return {"model": cfg.model, "max_tokens": int(cfg.max_tokens), "system": _system(prompt),
            "tools": [tool_definition(prompt.max_intents)],
            "tool_choice": {"type": "tool", "name": TOOL_NAME},
            "messages": [{"role": "user", "content": prompt.user_text}]}


def reply_result(msg, model: str) -> tuple[ReflectResult | None, str]:
    """(the result, "") of a usable reply, else (None, what is wrong with it). `usage` is
    the reply's own; `model` stands in when the reply names none."""
    block = _find_tool_use(msg)
    if block is None:
        return None, f"no `{TOOL_NAME}` call in the reply (stop_reason {msg.stop_reason})"
    proposals, problem = check_reply(block.input)
    if problem is not None:
        if getattr(msg, "stop_reason", None) == "max_tokens":
            problem += " (the reply hit max_tokens)"
        return None, problem
    return ReflectResult(proposals=proposals, feedback=feedback_of(block.input),
                         usage=usage_of(msg), model=getattr(msg, "model", "") or model,
                         raw_text=_raw_text(msg)), ""


def usage_of(msg) -> dict[str, int]:
    """A reply's tokens, in the backends' usage keys."""
    u = getattr(msg, "usage", None)
    return {
        "input_tokens": int(getattr(u, "input_tokens", 0) or 0),
        "output_tokens": int(getattr(u, "output_tokens", 0) or 0),
        "cache_read": int(getattr(u, "cache_read_input_tokens", 0) or 0),
        "cache_creation": int(getattr(u, "cache_creation_input_tokens", 0) or 0),
    }


def reflect(prompt: Prompt, cfg, *, env: Mapping[str, str] | None = None) -> ReflectResult:
    """One reflection: a forced `propose_skill_changes` call, with at most one repair round.

    Raises TransientError (connection, timeout, 408/409/429/5xx) or PermanentError (other
    4xx, auth, a reply still unusable after the repair).
    """
    import anthropic

    sdk = client(cfg, env)
    params = request_params(prompt, cfg)
    messages: list[dict] = params.pop("messages")
    usage = empty_usage()
    problem = ""
    for attempt in range(2):
        try:
            msg = sdk.messages.create(**params, messages=messages)
        except anthropic.AnthropicError as err:
            raise classify(err) from None
        add_usage(usage, usage_of(msg))
        result, problem = reply_result(msg, cfg.model)
        if result is not None:
            result.usage = usage  # the repair round's tokens count too
            return result
        if attempt == 0:
            messages = messages + _repair_turns(msg, problem)
    unusable = PermanentError(f"anthropic: unusable reply after one repair attempt: {problem}")
    unusable.usage = usage  # tokens were spent all the same; the pool charges them
    raise unusable
