"""The daily token tallies the reflector's budgets are judged by, as the state keeps them:
`"total"`, `"day:YYYY-MM-DD"` and `"day:YYYY-MM-DD/<backend>"`. Only today's counts are kept."""


def tokens_on(tally: dict[str, int], day: str, backend: str = "") -> int:
    """Tokens charged to `day` (to `backend` alone, when one is named)."""
    return tally.get(f"{day}/{backend}" if backend else day, 0)


def charge(tally: dict[str, int], day: str, n: int, backend: str = "") -> None:
    """Charge `n` tokens to `day`, to `day/backend` and to the total; other days are dropped."""
    for k in [k for k in tally if k.startswith("day:") and k.split("/")[0] != day]:
        del tally[k]
    keys = ["total", day] + ([f"{day}/{backend}"] if backend else [])
    for k in keys:
        tally[k] = tally.get(k, 0) + n
