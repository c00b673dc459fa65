"""What every reflector backend returns or raises, and which backend `auto` picks.

The pool retries `TransientError` with backoff and ends the job on `PermanentError`. This module
is cheap to import: it never imports the `anthropic` SDK (≈3 s of CPU).
"""

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field

from . import endpoints as endpoints
from . import routing as routing

NO_BACKEND = "no reflector backend"


class BackendError(Exception):
    """A reflection attempt failed; `reason` is safe to show in status (no secrets, no content)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
        self.usage: dict[str, int] | None = None  # tokens spent before failing, if any


class TransientError(BackendError):
    """Worth retrying: connection, timeout, 429, 5xx, a crashed or killed `claude` child."""

    def __init__(self, reason: str, *, retry_after: float | None = None):
        super().__init__(reason)
        self.retry_after = retry_after  # seconds the server asked us to wait, if it said


class PermanentError(BackendError):
    """Retrying won't help: 400, auth, missing backend, a reply unusable after one repair."""


def empty_usage() -> dict[str, int]:
    return {"input_tokens": 0, "output_tokens": 0, "cache_read": 0, "cache_creation": 0}


def add_usage(total: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    for k in total:
        total[k] += int(more.get(k) or 0)
    return total


@dataclass
class ReflectResult:
    """A usable reply: the raw decoded proposal items and feedback verdicts (intake validates
    each one)."""

    proposals: list[object]
    feedback: list[object] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=empty_usage)
    model: str = ""
    raw_text: str = ""

    @property
    def tokens(self) -> int:
        """Tokens to charge against the daily budget (cache reads included: they are billed)."""
        u = self.usage
        return u["input_tokens"] + u["output_tokens"] + u["cache_read"] + u["cache_creation"]


def check_reply(obj: object) -> tuple[list[object], str | None]:
    """Is a decoded tool input usable as a whole? (proposals, None) when it is, ([], the problem)
    when not. Items are not checked here (intake does)."""
    if not isinstance(obj, dict):
        return [], f"the tool input must be a JSON object, got {type(obj).__name__}"
    props = obj.get("proposals")
    if not isinstance(props, list):
        return [], "the tool input must have a `proposals` array"
    return props, None


def feedback_of(obj: object) -> list[object]:
    """The reply's `feedback` verdicts ([] when absent or not a list: a reply without them is
    still usable, its proposals count; items are checked at intake)."""
    fb = obj.get("feedback") if isinstance(obj, dict) else None
    return fb if isinstance(fb, list) else []


def _env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def has_api_key(cfg, env: Mapping[str, str] | None = None) -> bool:
    e = _env(env)
    return bool(cfg.api_key or e.get("ANTHROPIC_API_KEY") or e.get("ANTHROPIC_AUTH_TOKEN"))


def find_claude(cfg, env: Mapping[str, str] | None = None) -> str | None:
    """The `claude` executable the claude backend would run, or None."""
    return shutil.which(cfg.claude_path or "claude", path=_env(env).get("PATH", os.defpath))


def _choose(cfg, env) -> tuple[str, str]:
    backend = cfg.backend
    key = has_api_key(cfg, env)
    if backend == "none":
        return "none", f"{NO_BACKEND}: reflector.backend = none"
    if backend == "anthropic":
        if key:
            return "anthropic", ""
        return "none", (f"{NO_BACKEND}: reflector.backend = anthropic but no API key "
                        "(set ANTHROPIC_API_KEY or reflector.api_key)")
    if backend == "claude":
        if find_claude(cfg, env):
            return "claude", ""
        return "none", (f"{NO_BACKEND}: reflector.backend = claude but "
                        f"`{cfg.claude_path}` is not on PATH")
    if backend == "openai":
        missing = [k for k in ("openai_base_url", "openai_model") if not getattr(cfg, k)]
        if not missing:
            return "openai", ""
        return "none", (f"{NO_BACKEND}: reflector.backend = openai but "
                        + " and ".join(f"reflector.{k}" for k in missing) + " not set")
    if key:
        return "anthropic", ""
    if find_claude(cfg, env):
        return "claude", ""
    return "none", (f"{NO_BACKEND}: set ANTHROPIC_API_KEY (or reflector.api_key) "
                    "or install Claude Code so `claude` is on PATH")


def choose_backend(cfg, env: Mapping[str, str] | None = None) -> str:
    """`anthropic`, `claude` or `none` for a ReflectorConfig.

    `auto`: anthropic if an API key is configured, else claude if on PATH, else none. An explicit
    backend that cannot work (no key, no executable) is `none` too, so jobs wait visibly instead
    of failing and losing their lesson.
    """
    return _choose(cfg, env)[0]


def _no_userinfo(url: str | None) -> str | None:
    # A gateway URL may embed credentials (https://user:pass@host); status must not show them.
    if not url or "@" not in url:
        return url
    scheme, sep, rest = url.partition("://")
    host = rest.split("@", 1)[1] if "@" in rest.split("/", 1)[0] else rest
    return f"{scheme}{sep}{host}" if sep else host


def available(cfg, env: Mapping[str, str] | None = None) -> dict:
    """What doctor and status show: the choice, why, and what was found. Never the key itself."""
    chosen, reason = _choose(cfg, env)
    e = _env(env)
    return {
        "configured": cfg.backend,
        "backend": chosen,
        "reason": reason,
        "model": cfg.model,
        "anthropic": {
            "api_key": has_api_key(cfg, env),
            "base_url": _no_userinfo(cfg.base_url or e.get("ANTHROPIC_BASE_URL") or None),
        },
        "claude": {"path": find_claude(cfg, env)},
        "openai": openai_info(cfg),
        "destination": destination(chosen, cfg, env),
        "routes": routes_info(cfg, env),
    }


def routes_info(cfg, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Each routed kind of work as `backend model: destination` (or why it cannot run)."""
    out = {}
    for work in routing.KINDS:
        if not routing.route_of(cfg, work):
            continue
        sub = routing.for_work(cfg, work)
        chosen, reason = _choose(sub, env)
        out[work] = (f"{chosen} {routing.model_of(sub, chosen)}: {destination(chosen, sub, env)}"
                     if chosen != "none" else reason)
    return out


def openai_info(cfg) -> dict:
    """The openai backend's settings as status shows them (the output mode `auto` found, once
    a reply came; never the key)."""
    if not cfg.openai_base_url:
        return {"base_url": None, "model": cfg.openai_model or None, "output": cfg.openai_output}
    return {"base_url": _no_userinfo(cfg.openai_base_url), "model": cfg.openai_model or None,
            "output": endpoints.mode_in_use(cfg), "local": endpoints.is_loopback(cfg.openai_base_url)}


def destination(backend: str, cfg, env: Mapping[str, str] | None = None) -> str:
    """Where a window goes on `backend`, in words for status, capture and the docs."""
    if backend == "openai":
        info = openai_info(cfg)
        if info.get("local"):
            return f"{info['base_url']} on this machine (loopback: nothing leaves the machine)"
        return f"{info['base_url']} (an OpenAI-compatible endpoint, over the network)"
    if backend == "anthropic":
        url = _no_userinfo(cfg.base_url or _env(env).get("ANTHROPIC_BASE_URL") or None)
        return f"{url or 'the Anthropic API'} (over the network)"
    if backend == "claude":
        return "a child `claude -p`, which sends it to the model Claude Code is set up for"
    return "nowhere: no backend, jobs wait"
