"""The Message Batches requests the batch runner makes (blocking: worker threads). Each takes
the SDK client (`anthropic.call(cfg, fn)` hands it over and maps the SDK's errors); none
imports the SDK itself."""

# How far back (seconds) the batch list is searched for a create whose answer was lost: the
# API's clock and ours may disagree, and its created_at is rounded.
CREATE_LOOKBACK_S = 600.0


def create(c, requests: list[dict]) -> str:
    """Send one batch; its id."""
    return c.messages.batches.create(requests=requests).id


def find(c, n: int, at: float, known: set[str]) -> str | None:
    """The batch of `n` requests created since `at` (give or take the lookback) that is not
    in `known`, the nearest to `at` in time; None when there is none. The list comes newest
    first, so the walk stops at the first batch older than that."""
    best = None
    for b in c.messages.batches.list(limit=100):
        t = b.created_at.timestamp()
        if t < at - CREATE_LOOKBACK_S:
            break
        rc = b.request_counts
        size = rc.processing + rc.succeeded + rc.errored + rc.canceled + rc.expired
        if b.id not in known and size == n and (best is None or abs(t - at) < best[0]):
            best = (abs(t - at), b.id)
    return best[1] if best else None


def status(c, batch_id: str) -> str:
    """The batch's processing status (`ended` once its results can be read)."""
    return c.messages.batches.retrieve(batch_id).processing_status


def cancel(c, batch_id: str) -> None:
    c.messages.batches.cancel(batch_id)


def results(c, batch_id: str) -> list[tuple[str, str, object]]:
    """(custom id, kind, payload) per item: `succeeded` with the message, `errored` with the
    error type, else the kind (`canceled`, `expired`) with None. Two requests: results()
    retrieves the batch first."""
    out: list[tuple[str, str, object]] = []
    for entry in c.messages.batches.results(batch_id):
        res = entry.result
        if res.type == "succeeded":
            out.append((entry.custom_id, "succeeded", res.message))
        elif res.type == "errored":
            err = getattr(getattr(res, "error", None), "error", None)
            out.append((entry.custom_id, "errored", getattr(err, "type", "error")))
        else:
            out.append((entry.custom_id, res.type, None))
    return out
