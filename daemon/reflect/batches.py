"""Reflection on a backlog through the Message Batches API (`autoharnessctl replay --batch`).

Each transcript is cut into windows by the pool's own `Reflection` (same packet, same prompt,
same request parameters) and like a live window: records a reflector already had (live, or an
earlier batch) are left out, a window with nothing else is not sent, and once an item's
results are taken in its records are remembered as reflected, so no path judges them again.
Every window is one batch item, its custom id the job id its proposals are taken in under.
Items go out in batches chunked to the API's limits, batches are polled with backoff, and
results are taken in and charged by that same `Reflection` (the same dedup of saved lessons,
the same validation and promoter as pool jobs). The journal's records and their file are
`batchstore`'s; the API requests are `backends.anthropic_batches`.

Durable: `<state>/batches.json` (atomically replaced on every change, written in a worker
thread: no fsync on the event loop) holds every item and every batch id; an item changes only
through the journal's named changes (`batchstore.Journal`). A restart resumes polling; a result
already taken in is not taken in again (the journal says so, and intake itself is idempotent
per job id), so nothing is reflected twice. Nothing is sent twice either: the create request is
journaled (its custom ids and the time) before it goes out, and until its answer is journaled
nothing else is sent. A create whose answer never came back (the daemon died, the connection
broke) is looked up in the API's list of batches (one we do not know yet, of that many
requests, created nearest that time) and adopted; only when there is none are its items sent
again. (The API does not say which custom ids a batch holds before it ends: should the batch
adopted be another client's, its results carry none of ours, and our items are sent again once
it ends.) An errored or expired item is retried alone, in a later batch, up to
`reflector.max_attempts`. `replay --cancel` cancels the batches in flight and drops waiting
items; what had succeeded before the cancel is still taken in.

Tokens are charged against the daily budget as the pool charges them; status also shows them
at the batch price (half the standard price). No batch is sent while the budget is spent, and
a batch never carries more than the budget has left (estimated from the request sizes).
"""

import json
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, assert_never

import anyio
import msgspec
import structlog

from ...protocol import replies as r
from ...protocol.messages import BatchOp
from ..capture.source import open_transcript
from ..events import Events, IntentsQueued
from . import backends, batchstore, windows
from .backends import anthropic_batches as api
from .backends.base import has_api_key
from .batchstore import Batch, Item, Journal
from .pipeline import Reflection, evidence_of
from .pool import Projects, SeenRecords

log = structlog.get_logger("autoharness")

BATCH_PRICE = 0.5  # a batch token costs half a standard one
# Rough bytes per token, to keep a batch inside what the daily budget has left.
BYTES_PER_TOKEN = 4


def session_for(path: str) -> str:
    """The session id a transcript's batch items are recorded under (stable per file)."""
    import hashlib
    return "batch-" + hashlib.sha256(os.path.abspath(path).encode()).hexdigest()[:12]


def transcript_cwd(path: str) -> str | None:
    """The working directory the session ran in (its first record that names one)."""
    try:
        with open(open_transcript(path, None), "rb") as f:  # never a FIFO, a link or a device
            for _ in range(200):
                line = f.readline()
                if not line:
                    break
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict) and isinstance(rec.get("cwd"), str):
                    return rec["cwd"]
    except OSError:
        return None
    return None


def chunk(sizes: list[int], max_requests: int, max_bytes: int) -> list[tuple[int, int]]:
    """[start, end) index ranges of consecutive requests, each range within both limits (a
    single request over max_bytes still goes alone: the API judges it)."""
    out, start, total = [], 0, 0
    for i, n in enumerate(sizes):
        if i > start and (i - start >= max_requests or total + n > max_bytes):
            out.append((start, i))
            start, total = i, 0
        total += n
    if start < len(sizes):
        out.append((start, len(sizes)))
    return out


class BatchRunner:
    """Owns the batch journal; `run()` is the daemon task that submits and polls."""

    def __init__(self, reflection: Reflection, *, projects: Projects, events: Events,
                 seen: SeenRecords | None = None, clock: Callable[[], float] = time.time):
        """`reflection` cuts, prompts, takes in and charges as it does for the pool's jobs;
        `projects` maps a transcript's cwd to its project; `events` hears `IntentsQueued`
        once an item's results are taken in (the promoter's turn); `seen`: the records
        already reflected (the pool's)."""
        self.reflection = reflection
        self.seen = seen
        self.live = reflection.live
        self.projects = projects
        self.events = events
        self.clock = clock
        self.j = Journal()
        self.changed = anyio.Event()
        self.waiting_reason = ""
        self._lock = anyio.Lock()  # a command or a pass at a time: saves go out in order

    # ---- journal -------------------------------------------------------------------------

    def load(self) -> None:
        self.j = batchstore.load()

    async def save(self) -> None:
        """Journal the changes made so far (under `_lock`): encoded on the loop (the journal
        is the loop's), written and fsynced in a worker thread."""
        data = msgspec.Raw(msgspec.json.encode(self.j))
        await anyio.to_thread.run_sync(batchstore.save, data)

    # ---- commands ------------------------------------------------------------------------

    async def command(self, op: BatchOp, transcripts: list[str], project: str | None
                      ) -> r.BatchSubmitted | r.BatchCanceled | r.BatchesInfo:
        match op:
            case "status":
                return self.status()
            case "cancel":
                return await self._change(self._cancel)
            case "submit":
                return await self._change(self._submit, transcripts, project)
            case _:
                assert_never(op)

    async def _change(self, change: Callable[..., Awaitable[Any]], *args) -> Any:
        """One change of the items, under the lock and saved; then the runner is woken."""
        async with self._lock:
            out = await change(*args)
            await self.save()
        self.changed.set()
        return out

    async def _submit(self, transcripts: list[str], project: str | None) -> r.BatchSubmitted:
        known = {(i.transcript, i.start) for i in self.j.items.values() if i.status != "canceled"}
        out, items = await anyio.to_thread.run_sync(self._cut, transcripts, project, known)
        self.j.add(items)
        return out

    def _cut(self, transcripts: list[str], project: str | None, known: set[tuple[str, int]]
             ) -> tuple[r.BatchSubmitted, list[Item]]:
        """Cut every transcript into windows: one new item per window not `known` (blocking)."""
        items: list[Item] = []
        skipped = reflected = 0
        missing = []
        for path in transcripts:
            path = os.path.abspath(path)
            if not os.path.isfile(path):
                missing.append(path)
                continue
            cwd = project or transcript_cwd(path)
            root = self.projects.root_of(cwd)
            start, size = 0, os.path.getsize(path)
            while start < size:
                packet = self.reflection.cut(path, start, reflected=self.seen)
                if packet.watermark_to <= start:
                    break
                if (path, start) in known:
                    skipped += 1
                elif not packet.kept_records and packet.reflected_records:
                    reflected += 1
                elif packet.window.strip():
                    items.append(Item(id="b" + uuid.uuid4().hex[:15], transcript=path,
                                      start=start, end=packet.watermark_to,
                                      session_id=session_for(path), project=root))
                start = packet.watermark_to
        return r.BatchSubmitted(items=len(items), skipped=skipped, missing=missing,
                                reflected=reflected), items

    async def _cancel(self) -> r.BatchCanceled:
        canceled = self.j.cancel_waiting()
        batches = [b for b in self.j.batches.values() if b.status == "in_progress"]
        for b in batches:
            try:
                await self._api(api.cancel, b.id)
                self.j.canceling(b.id)
            except backends.BackendError as e:
                log.warning("batch cancel failed", batch=b.id, reason=e.reason)
        return r.BatchCanceled(batches=len(batches), waiting_dropped=canceled)

    def status(self) -> r.BatchesInfo:
        counts = {k: 0 for k in ("waiting", "submitted", "done", "failed", "canceled")}
        for i in self.j.items.values():
            counts[i.status] = counts.get(i.status, 0) + 1
        flying = [b for b in self.j.batches.values() if b.status != "ended"]
        return r.BatchesInfo(
            in_flight=[r.BatchInFlight(id=b.id, items=len(b.items), status=b.status)
                       for b in flying],
            items=counts, tokens=self.j.tokens,
            tokens_at_batch_price=int(self.j.tokens * BATCH_PRICE), price_ratio=BATCH_PRICE,
            requests=self.j.requests, waiting=self.waiting_reason or None)

    # ---- the loop ------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            self.changed = anyio.Event()
            try:
                async with self._lock:
                    await self._pass()
            except Exception:
                log.exception("batch pass failed")
            now = self.clock()
            polls = [b.next_poll_at for b in self.j.batches.values() if b.status != "ended"]
            timeout = max(0.01, min(polls) - now) if polls else 3600.0
            if self.waiting_reason and self.j.waiting():
                timeout = min(timeout, 60.0)
            if self.j.creating is not None:  # a create with no answer: look it up like a poll
                timeout = min(timeout, self.live.cfg.reflector.batch_poll_s)
            with anyio.move_on_after(timeout):
                await self.changed.wait()

    async def _pass(self) -> None:
        if await self._settle_create():
            await self._submit_waiting()
        now = self.clock()
        for b in list(self.j.batches.values()):
            if b.status != "ended" and b.next_poll_at <= now:
                await self._poll(b)

    def _blocked(self) -> str:
        if not has_api_key(self.live.cfg.reflector):
            return ("replay --batch needs the Anthropic API: set ANTHROPIC_API_KEY "
                    "(or reflector.api_key)")
        return self.reflection.budget_spent("batch items", "anthropic")

    async def _submit_waiting(self) -> None:
        waiting = self.j.waiting()
        self.waiting_reason = self._blocked() if waiting else ""
        if not waiting or self.waiting_reason:
            return
        cfg = self.live.cfg.reflector
        reqs, uuids, failed, empty = await anyio.to_thread.run_sync(self._build, waiting)
        for item, reason in failed:
            self.j.failed(item, reason)
        for item in empty:  # reflected since it was queued: nothing to send
            self.j.done(item, [])
        if not reqs:  # all failed or had nothing new
            await self.save()
            return
        sizes = [len(json.dumps(r)) for r in reqs]
        left = self.reflection.tokens_left("anthropic")
        if left is not None:  # send no more than the budget has left
            n, total = 0, 0
            for size in sizes:
                total += size // BYTES_PER_TOKEN + cfg.max_tokens
                if total > left:
                    break
                n += 1
            if n < len(reqs):
                self.waiting_reason = (f"daily token budget of {cfg.daily_token_budget}: "
                                       f"{len(reqs) - n} batch item(s) wait for tomorrow")
            reqs, sizes = reqs[:n], sizes[:n]
        for a, b in chunk(sizes, cfg.batch_max_requests, cfg.batch_max_bytes):
            part = reqs[a:b]
            ids = [r["custom_id"] for r in part]
            self.j.sending(ids, uuids, self.clock())
            await self.save()  # on disk before the request leaves: a lost answer is looked up
            try:
                batch_id = await self._api(api.create, part)
            except backends.BackendError as e:
                # the batch may exist all the same: the next pass looks for it first
                self.waiting_reason = f"batch create failed: {e.reason}"
                log.warning("batch create failed", reason=e.reason, items=len(part))
                break
            await self._submitted(batch_id, ids)
            log.info("batch submitted", batch=batch_id, items=len(ids))

    async def _submitted(self, batch_id: str, ids: list[str]) -> None:
        """Journal `batch_id` as carrying the items `ids` (and no create as pending)."""
        self.j.submitted(batch_id, ids, now=self.clock(),
                         interval=self.live.cfg.reflector.batch_poll_s)
        await self.save()  # the batch id is on disk before anything else happens

    async def _settle_create(self) -> bool:
        """Resolve a create whose answer was never journaled: adopt the batch it made, or
        learn that it made none (its items go out again). False while that cannot be told
        (the list request failed): nothing may be sent until it can."""
        c = self.j.creating
        if c is None:
            return True
        try:
            found = await self._api(api.find, len(c.items), c.at, set(self.j.batches))
        except backends.BackendError as e:
            self.waiting_reason = ("cannot tell whether the last batch create reached the API "
                                   f"(listing batches failed: {e.reason}); retrying")
            return False
        if found is None:
            log.info("batch create never arrived: its items go out again", items=len(c.items))
            self.j.create_lost()
            await self.save()
            return True
        waiting = [cid for cid in c.items
                   if cid in self.j.items and self.j.items[cid].status == "waiting"]
        await self._submitted(found, waiting)
        log.info("batch create adopted after a lost answer", batch=found, items=len(waiting))
        if len(waiting) < len(c.items):  # canceled meanwhile: cancel the batch that carries them
            try:
                await self._api(api.cancel, found)
                self.j.canceling(found)
                await self.save()
            except backends.BackendError as e:
                log.warning("batch cancel failed", batch=found, reason=e.reason)
        return True

    def _build(self, items: list[Item]) -> tuple[list[dict], dict[str, list[str]],
                                                 list[tuple[Item, str]], list[Item]]:
        """The request of every item, the uuids of the records each window carries, the items
        that failed (with why) and those with nothing left to send (blocking: reads
        transcripts, saves windows; changes nothing: the loop applies what it returns)."""
        from .backends.anthropic import request_params

        rf = self.reflection
        reqs, uuids, failed, empty = [], {}, [], []
        indexes: dict[str | None, list[dict]] = {}  # one listing per project, not per item
        for item in items:
            try:
                packet = rf.cut(item.transcript, item.start, reflected=self.seen)
            except OSError as e:
                failed.append((item, f"cannot read transcript: {e.strerror}"))
                continue
            if not packet.kept_records:
                empty.append(item)
                continue
            uuids[item.id] = list(packet.uuids)
            if item.project not in indexes:
                indexes[item.project] = rf.skill_index(item.project)
            prompt = rf.prompt(packet, None, item.project, skills=indexes[item.project])
            rf.save_window(item.id, evidence_of(packet))
            reqs.append({"custom_id": item.id,
                         "params": request_params(prompt, self.live.cfg.reflector)})
        return reqs, uuids, failed, empty

    async def _poll(self, b: Batch) -> None:
        cfg = self.live.cfg.reflector
        try:
            status = await self._api(api.status, b.id)
        except backends.BackendError as e:
            log.info("batch poll failed", batch=b.id, reason=e.reason)
            status = None
        if status != "ended":
            interval = min(cfg.batch_poll_max_s, max(b.interval, cfg.batch_poll_s) * 2)
            self.j.poll_later(b, interval=interval, at=self.clock() + interval)
            await self.save()
            return
        try:
            results = await self._api(api.results, b.id, requests=2)  # it retrieves first
        except backends.BackendError as e:
            log.info("batch results failed", batch=b.id, reason=e.reason)
            self.j.poll_later(b, interval=b.interval, at=self.clock() + b.interval)
            return
        for cid, kind, payload in results:
            item = self.j.items.get(cid)
            if item is None or item.status != "submitted" or item.batch != b.id:
                continue  # not ours, or taken in already (a restart re-reads results)
            await self._take(item, kind, payload)
            await self.save()
        for cid in b.items:  # in the batch but absent from its results: send again
            item = self.j.items.get(cid)
            if item is not None and item.status == "submitted" and item.batch == b.id:
                self.j.retry(item, "missing from the batch results",
                             max_attempts=self.live.cfg.reflector.max_attempts)
        self.j.ended(b)
        await self.save()
        self.changed.set()

    async def _take(self, item: Item, kind: str, payload) -> None:
        from .backends.anthropic import reply_result, usage_of

        if kind == "canceled":
            self.j.canceled(item, "the batch was canceled")
            return
        if kind != "succeeded":
            self.j.retry(item, f"batch item {kind}: {payload}",
                         max_attempts=self.live.cfg.reflector.max_attempts)
            return
        usage = usage_of(payload)
        self.j.counted(tokens=sum(usage.values()))
        # keyed by item and attempt: results read again after a restart count once
        model = getattr(payload, "model", "") or self.live.cfg.reflector.model
        await self.reflection.charge(usage, job=item.id, attempt=item.attempts, kind="batch",
                                     backend="anthropic", model=model, batch=True)
        result, problem = reply_result(payload, model)
        if result is None:
            self.j.failed(item, f"unusable reply: {problem}")
            return
        window = await anyio.to_thread.run_sync(windows.read_window, item.id)
        try:  # its last window ended by the transcript's mtime
            before, ended = await anyio.to_thread.run_sync(lambda: (
                self.reflection.session_loads.before(item.transcript, item.end),
                os.path.getmtime(item.transcript)))
        except OSError:  # gone since: a `missed` cannot be told from an earlier load
            before, ended = [], 0.0
        intents, _ = await self.reflection.take_in(item.id, item.session_id, "reflector", result,
                                                   window or "", item.project,
                                                   keep_window=False, loaded_before=before,
                                                   window_at=ended)
        self.j.done(item, [i.id for i in intents])
        self.events.publish(IntentsQueued(source="batch"))  # its intents are the promoter's now
        await self._remember(item)

    async def _remember(self, item: Item) -> None:
        """The item's records were judged: later windows, live or batched, leave them out."""
        if self.seen is None or not item.uuids:
            return
        try:
            await anyio.to_thread.run_sync(self.seen.add, item.uuids)
        except OSError as e:  # kept in memory; at worst re-judged after a restart
            log.warning("reflected records not saved", item=item.id, error=e.strerror)

    async def _api(self, fn, *args, requests: int = 1):
        """`fn(client, *args)`, one Batches API call (`requests` of them), in a worker thread;
        counted here, on the loop, where status reads the count."""
        from .backends import anthropic as sdk

        self.j.counted(requests=requests)
        return await anyio.to_thread.run_sync(sdk.call, self.live.cfg.reflector,
                                              lambda c: fn(c, *args))
