"""Reflector backends: `anthropic` (the SDK), `claude` (a child `claude -p`) and `openai` (any
OpenAI-compatible chat-completions endpoint, through the standard library).

Importing this package is cheap; the SDK is imported only when the anthropic backend runs (or
`preload()` is called from a worker thread).
"""

from types import ModuleType

from .base import (
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
        from . import anthropic as mod
    elif backend == "claude":
        from . import claude as mod
    elif backend == "openai":
        from . import openai as mod
    else:
        raise PermanentError(f"{NO_BACKEND}: {backend!r} cannot reflect")
    return mod.reflect(prompt, cfg, **kwargs)
