"""List prices of the models a reflector may run, and what a call's tokens cost at them.

Prices are USD per million tokens, as Anthropic publishes them: input, output; a cache write
(5-minute TTL) costs 1.25× input and a cache read 0.1× input; a Message Batches item costs half
of all of it. A model id is matched on its family (dated snapshots like
`claude-haiku-4-5-20251001` price as `claude-haiku-4-5`); an unknown model has no price (the
report says n/a rather than guess). The `claude` backend's tokens are priced the same way:
what the same work would cost on the API, whatever plan pays for it.

`reflector.prices` adds (or overrides) prices per model, matched the same way: the models of an
OpenAI-compatible endpoint have no list price here. A call to a model on this machine (the
`openai` backend on a loopback endpoint) costs 0 unless the table prices it.
"""

# family -> (input, output) USD per million tokens
LIST_PRICES: dict[str, tuple[float, float]] = {
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-6": (5.0, 25.0),
    "claude-opus-4-1": (15.0, 75.0),
    "claude-opus-4": (15.0, 75.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-3-7-sonnet": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-3-5-haiku": (0.8, 4.0),
    "claude-3-haiku": (0.25, 1.25),
}
CACHE_WRITE = 1.25
CACHE_READ = 0.1
BATCH = 0.5


def prices(model: str, table: dict[str, list[float]] | None = None) -> dict[str, float] | None:
    """Per-million-token prices of each token kind for `model`, or None when unknown; `table`
    (the configured prices, model -> [input, output]) is looked up before the list prices."""
    m = (model or "").strip().lower()
    extra = {k.strip().lower(): (float(v[0]), float(v[1])) for k, v in (table or {}).items()}
    for source in (extra, LIST_PRICES):
        for family in sorted(source, key=len, reverse=True):  # longest match first
            if m == family or m.startswith(family + "-") or m.startswith(family + "@"):
                inp, out = source[family]
                return {"input_uncached": inp, "cache_write": inp * CACHE_WRITE,
                        "cache_read": inp * CACHE_READ, "output": out}
    return None


def cost_usd(model: str, tokens: dict[str, float], *, batch: bool = False,
             table: dict[str, list[float]] | None = None, local: bool = False) -> float | None:
    """What `tokens` (keyed input_uncached, cache_write, cache_read, output) cost; a `local`
    call (a model on this machine) costs 0 unless `table` prices its model."""
    p = prices(model, table)
    if p is None:
        return 0.0 if local else None
    usd = sum(p[k] * float(tokens.get(k) or 0) for k in p) / 1_000_000
    return usd * BATCH if batch else usd
