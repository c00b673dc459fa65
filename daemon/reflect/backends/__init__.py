"""Reflector backends: `anthropic` (the SDK), `claude` (a child `claude -p`) and `openai` (any
OpenAI-compatible chat-completions endpoint, through the standard library).

Importing this package is cheap; the SDK is imported only when the anthropic backend runs (or
`preload()` is called from a worker thread).
"""

from types import ModuleType

from claude_autoharness.daemon.reflect.backends.base import (
    NO_BACKEND,
    BackendError,
    PermanentError,
    ReflectResult,
    TransientError,
    available,
    choose_backend,
)

__all__ = [
    "NO_BACKEND", "BackendError", "PermanentError", "ReflectResult", "TransientError",
    "available", "choose_backend", "reflect",
]


def reflect(backend: str, prompt, cfg, **kwargs) -> ReflectResult:
    """Run one reflection on the named backend. Blocking: call it from a worker thread."""
    mod: ModuleType
    if backend == "anthropic":
        from claude_autoharness.daemon.reflect.backends import anthropic as mod
    elif backend == "claude":
        from claude_autoharness.daemon.reflect.backends import claude as mod
    elif backend == "openai":
        from claude_autoharness.daemon.reflect.backends import openai as mod
    else:
        raise PermanentError(f"{NO_BACKEND}: {backend!r} cannot reflect")
    return mod.reflect(prompt, cfg, **kwargs)
