"""Which backend and model each kind of work runs on.

`reflector.routes` maps a kind of work — `reflect` (a window of a session), `learn` (`/learn`),
`curate` (merges and removals), `repair` (a curator call that only rewrites one skill's
description) — to `"backend"` or `"backend:model"`; a kind it does not name runs on
`reflector.backend` with its model, and `repair` falls back to the `curate` route. The result is
the reflector config that kind of work runs with, so every backend reads its settings as usual.
"""

import msgspec

from .endpoints import is_loopback

KINDS = ("reflect", "learn", "curate", "repair")


def work_of(job_kind: str, *, skills: int = 0) -> str:
    """The kind of work of a job: a curator call over fewer than two skills can only repair."""
    if job_kind == "learn":
        return "learn"
    if job_kind == "curate":
        return "curate" if skills >= 2 else "repair"
    return "reflect"


def route_of(cfg, work: str) -> str:
    """The route string for `work` ("" when it runs on the default backend)."""
    return cfg.routes.get(work) or (cfg.routes.get("curate", "") if work == "repair" else "")


def for_work(cfg, work: str):
    """The ReflectorConfig `work` runs with: `cfg` with the route's backend and model."""
    route = route_of(cfg, work)
    if not route:
        return cfg
    backend, _, model = route.partition(":")
    if not model:
        return msgspec.structs.replace(cfg, backend=backend)
    if backend == "openai":
        return msgspec.structs.replace(cfg, backend=backend, openai_model=model)
    return msgspec.structs.replace(cfg, backend=backend, model=model)


def model_of(cfg, backend: str) -> str:
    """The model `backend` is asked for under `cfg`."""
    return cfg.openai_model if backend == "openai" else cfg.model


def runs_locally(cfg, backend: str) -> bool:
    """Whether `backend` under `cfg` runs its model on this machine (a loopback endpoint)."""
    return backend == "openai" and is_loopback(cfg.openai_base_url)
