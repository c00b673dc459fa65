"""A fake Anthropic Messages API on loopback, for the real `anthropic` SDK to talk to.

It is a real HTTP server (stdlib `http.server` in a thread). It records every request (headers
and JSON body) and answers POST /v1/messages from a script queue: tool-use replies, error
statuses (429/500/400...), a hang (so the client's timeout fires), malformed tool inputs; a
configurable delay applies to every reply. It checks requests the way the real API would where
our code depends on it (forced tool exists, strict-schema rules, cache breakpoints, tool_result
pairing) and answers 400 otherwise. It ignores auth headers entirely (SDK 2.x sends
`Authorization: Bearer`, older ones `x-api-key`).

A request with `"stream": true` (the real Claude Code CLI always streams) gets the same reply as
server-sent events: `message_start`, per block `content_block_start` / `content_block_delta`
(`text_delta` or `input_json_delta`) / `content_block_stop`, `message_delta`, `message_stop`.
`route(body)`, when set, answers a request before the script does (returns a reply or None):
the CLI's side requests (titles and the like) must not consume scripted turns.

The Message Batches endpoints are faked too: POST /v1/messages/batches (each request's params
validated like a Messages request; the API's limits on count, size and custom ids enforced),
GET /v1/messages/batches/{id}, GET .../{id}/results (a JSONL stream), POST .../{id}/cancel and
GET /v1/messages/batches (the list, newest first, paged by `limit`, `after_id`, `before_id`).
Each item is answered at creation, by `route` or the script, as `succeeded` (a 200 reply) or
`errored` (any other status); a batch ends after `batch_polls` retrieves, or only when
`end_batches()` is called while `hold_batches` is set. Cancelling ends it with the items not yet
answered `canceled`. With `stall_batch_creates` set, a create makes its batch and then never
answers (until `stop()`): the client dies or times out not knowing the batch id;
`fail_batch_creates` answers that many creates 529 without making a batch.
"""

import itertools
import json
import re
import threading
import time
import urllib.parse
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOOL_NAME = "propose_skill_changes"
DEFAULT_USAGE = {"input_tokens": 1200, "output_tokens": 80,
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 900}
_ids = itertools.count(1)

# JSON-schema keywords strict tool use does not accept (per the structured-outputs docs).
STRICT_UNSUPPORTED = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                      "minLength", "maxLength", "maxItems", "uniqueItems", "patternProperties",
                      "minProperties", "maxProperties")
STRICT_MAX_UNIONS = 16


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict:
        return json.loads(self.body)


def tool_reply(tool_input, *, usage=None, stop_reason="tool_use", name=TOOL_NAME,
               delay=None) -> dict:
    """A 200 reply whose content is one tool_use block with `tool_input` (any JSON value)."""
    return {"status": 200, "delay": delay, "body": {
        "type": "message", "role": "assistant", "model": None,
        "content": [{"type": "tool_use", "id": f"toolu_fake{next(_ids)}", "name": name,
                     "input": tool_input}],
        "stop_reason": stop_reason, "stop_sequence": None,
        "usage": dict(DEFAULT_USAGE if usage is None else usage)}}


def text_reply(text: str, *, usage=None) -> dict:
    """A 200 reply with only text (a model that ignored the forced tool)."""
    return {"status": 200, "body": {
        "type": "message", "role": "assistant", "model": None,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": dict(DEFAULT_USAGE if usage is None else usage)}}


def message_reply(*blocks: dict, usage=None, stop_reason=None) -> dict:
    """A 200 reply with these content blocks (see `text_block`, `tool_use_block`); the stop
    reason is `tool_use` when a block calls a tool, else `end_turn`."""
    if stop_reason is None:
        stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    return {"status": 200, "body": {
        "type": "message", "role": "assistant", "model": None, "content": list(blocks),
        "stop_reason": stop_reason, "stop_sequence": None,
        "usage": dict(DEFAULT_USAGE if usage is None else usage)}}


def text_block(text: str) -> dict:
    return {"type": "text", "text": text}


def tool_use_block(name: str, tool_input: dict) -> dict:
    return {"type": "tool_use", "id": f"toolu_fake{next(_ids)}", "name": name, "input": tool_input}


def sse_events(message: dict) -> bytes:
    """`message` (a complete Messages API reply) as the API streams it."""
    def event(kind: str, data: dict) -> bytes:
        return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()

    usage = dict(message.get("usage") or {})
    start = dict(message, content=[], stop_reason=None, stop_sequence=None,
                 usage=dict(usage, output_tokens=1))
    out = [event("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(message.get("content") or []):
        if block["type"] == "tool_use":
            empty = dict(block, input={})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        elif block["type"] == "thinking":
            empty = dict(block, thinking="")
            delta = {"type": "thinking_delta", "thinking": block["thinking"]}
        else:
            empty = dict(block, text="")
            delta = {"type": "text_delta", "text": block.get("text", "")}
        out.append(event("content_block_start",
                         {"type": "content_block_start", "index": i, "content_block": empty}))
        out.append(event("content_block_delta",
                         {"type": "content_block_delta", "index": i, "delta": delta}))
        out.append(event("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(event("message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": message.get("stop_reason"),
                  "stop_sequence": message.get("stop_sequence")},
        "usage": {"output_tokens": usage.get("output_tokens", 1)}}))
    out.append(event("message_stop", {"type": "message_stop"}))
    return b"".join(out)


def error_reply(status: int, etype: str = "api_error", message: str = "fake error",
                headers=None) -> dict:
    return {"status": status, "headers": headers or {},
            "body": {"type": "error", "error": {"type": etype, "message": message}}}


def hang() -> dict:
    """Never answer (until the server stops): the client's own timeout must fire."""
    return {"hang": True}


def strict_schema_problems(schema, where="input_schema") -> list[str]:
    """What the API's strict mode would reject in a tool's input schema."""
    problems: list[str] = []
    unions = 0

    def walk(node, at):
        nonlocal unions
        if not isinstance(node, dict):
            return
        for kw in STRICT_UNSUPPORTED:
            if kw in node:
                problems.append(f"{at}: `{kw}` is not supported in strict mode")
        if node.get("minItems", 0) not in (0, 1):
            problems.append(f"{at}: minItems other than 0 or 1")
        if isinstance(node.get("type"), list) or "anyOf" in node:
            unions += 1
        if node.get("type") == "object" or "properties" in node:
            if node.get("additionalProperties") is not False:
                problems.append(f"{at}: objects need additionalProperties: false")
            props = node.get("properties", {})
            if sorted(node.get("required", [])) != sorted(props):
                problems.append(f"{at}: every property must be required")
            for k, v in props.items():
                walk(v, f"{at}.{k}")
        if "items" in node:
            walk(node["items"], f"{at}[]")
        for sub in node.get("anyOf", []):
            walk(sub, f"{at}|")

    walk(schema, where)
    if unions > STRICT_MAX_UNIONS:
        problems.append(f"{where}: {unions} union-typed parameters (max {STRICT_MAX_UNIONS})")
    return problems


def request_problems(body: dict) -> list[str]:
    """The subset of the real API's request validation our backend could trip over."""
    problems = []
    for k in ("model", "max_tokens", "messages"):
        if k not in body:
            problems.append(f"{k}: field required")
    tools = body.get("tools") or []
    names = {t.get("name") for t in tools}
    for t in tools:
        if t.get("strict"):
            problems += strict_schema_problems(t.get("input_schema"), f"tools.{t.get('name')}")
    choice = body.get("tool_choice") or {}
    if choice.get("type") == "tool" and choice.get("name") not in names:
        problems.append("tool_choice: names a tool that is not defined")
    breakpoints = 0
    system = body.get("system")
    blocks = list(system) if isinstance(system, list) else []
    for m in body.get("messages", []):
        if isinstance(m.get("content"), list):
            blocks += m["content"]
    blocks += tools
    breakpoints = sum(1 for b in blocks if isinstance(b, dict) and b.get("cache_control"))
    if breakpoints > 4:
        problems.append("a maximum of 4 blocks with cache_control may be provided")
    msgs = body.get("messages", [])
    for i, m in enumerate(msgs):
        want = "user" if i % 2 == 0 else "assistant"
        if m.get("role") != want:
            problems.append(f"messages.{i}: roles must alternate starting with user")
        if isinstance(m.get("content"), list):
            for b in m["content"]:
                if b.get("type") == "tool_result":
                    before = msgs[i - 1].get("content") if i else None
                    prev = before if isinstance(before, list) else []
                    ids = {p.get("id") for p in prev if p.get("type") == "tool_use"}
                    if b.get("tool_use_id") not in ids:
                        problems.append(f"messages.{i}: tool_result without a matching tool_use")
    return problems


BATCH_MAX_REQUESTS = 100_000
BATCH_MAX_BYTES = 256 * 1024 * 1024
_CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


@dataclass
class FakeBatch:
    id: str
    custom_ids: list[str]
    results: dict[str, dict]  # custom id -> the `result` object it will have
    created_at: float
    polls_left: int
    status: str = "in_progress"
    ended_at: float | None = None
    cancel_at: float | None = None

    def counts(self) -> dict:
        c = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        for cid in self.custom_ids:
            if self.status != "ended":
                c["processing"] += 1
            else:
                c[self.results[cid]["type"]] += 1
        return c

    def body(self, base_url: str) -> dict:
        return {"id": self.id, "type": "message_batch", "processing_status": self.status,
                "request_counts": self.counts(), "created_at": _iso(self.created_at),
                "expires_at": _iso(self.created_at + 86_400), "ended_at": _iso(self.ended_at),
                "archived_at": None, "cancel_initiated_at": _iso(self.cancel_at),
                "results_url": (f"{base_url}/v1/messages/batches/{self.id}/results"
                                if self.status == "ended" else None)}


def batch_problems(body: dict) -> list[str]:
    """What the real API rejects in a batch create request (the limits our chunking obeys)."""
    reqs = body.get("requests")
    if not isinstance(reqs, list) or not reqs:
        return ["requests: a non-empty list is required"]
    problems = []
    if len(reqs) > BATCH_MAX_REQUESTS:
        problems.append(f"requests: at most {BATCH_MAX_REQUESTS} per batch")
    ids = [r.get("custom_id") for r in reqs]
    if any(not isinstance(i, str) or not _CUSTOM_ID.fullmatch(i) for i in ids):
        problems.append("custom_id: 1-64 of [a-zA-Z0-9_-]")
    if len(set(ids)) != len(ids):
        problems.append("custom_id: must be unique within the batch")
    for r in reqs:
        params = r.get("params") or {}
        if params.get("stream"):
            problems.append("params.stream: not supported in batches")
        problems += [f"{r.get('custom_id')}: {p}" for p in request_problems(params)]
    return problems


class FakeAnthropic:
    """Start with `with FakeAnthropic() as fake:`; point the SDK at `fake.base_url`."""

    def __init__(self, *, delay: float = 0.0, validate: bool = True, route=None):
        self.delay = delay
        self.validate = validate  # False: skip `request_problems` (the CLI's own requests)
        self.route = route
        self.requests: list[Recorded] = []
        self.script: deque = deque()
        self.default = tool_reply({"proposals": []})
        self.batches: dict[str, FakeBatch] = {}
        self.batch_polls = 1  # retrieves a batch answers `in_progress` before it ends
        self.hold_batches = False  # True: batches end only at end_batches() (or a cancel)
        self.stall_batch_creates = False  # True: a create makes the batch, then never answers
        self.fail_batch_creates = 0  # this many creates are answered 529, no batch made
        self._release = threading.Event()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def push(self, *replies: dict) -> "FakeAnthropic":
        self.script.extend(replies)
        return self

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def messages_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.split("?")[0] == "/v1/messages"]

    @property
    def batch_creates(self) -> list[Recorded]:
        return [r for r in self.requests
                if r.method == "POST" and r.path.split("?")[0] == "/v1/messages/batches"]

    def end_batches(self) -> None:
        """Let every held batch end (its items were answered at creation)."""
        with self._lock:
            for b in self.batches.values():
                if b.status == "in_progress":
                    b.polls_left = 0
            self.hold_batches = False

    def _batch_result(self, params: dict) -> dict:
        reply = (self.route(params) if self.route else None) or self._next()
        if reply.get("status", 200) != 200:
            return {"type": "errored", "error": dict(reply["body"])}
        msg = json.loads(json.dumps(reply["body"]))
        msg["id"] = f"msg_fake{next(_ids)}"
        msg["model"] = msg.get("model") or params.get("model")
        return {"type": "succeeded", "message": msg}

    def _create_batch(self, body: dict) -> FakeBatch:
        results = {r["custom_id"]: self._batch_result(r["params"]) for r in body["requests"]}
        b = FakeBatch(id=f"msgbatch_fake{next(_ids):06d}", custom_ids=list(results),
                      results=results, created_at=time.time(), polls_left=self.batch_polls)
        with self._lock:
            self.batches[b.id] = b
        return b

    def list_page(self, query: dict) -> dict:
        """GET /v1/messages/batches: newest first; `after_id` pages to older batches,
        `before_id` to newer ones, `limit` (1-1000, default 20) per page."""
        with self._lock:
            order = sorted(self.batches.values(), key=lambda b: (b.created_at, b.id),
                           reverse=True)
        ids = [b.id for b in order]
        limit = max(1, min(1000, int(query.get("limit", 20))))
        if query.get("after_id") in ids:
            page = order[ids.index(query["after_id"]) + 1:][:limit]
            more = ids.index(query["after_id"]) + 1 + limit < len(ids)
        elif query.get("before_id") in ids:
            end = ids.index(query["before_id"])
            page, more = order[max(0, end - limit):end], end - limit > 0
        else:
            page, more = order[:limit], limit < len(ids)
        return {"data": [b.body(self.base_url) for b in page], "has_more": more,
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None}

    def _retrieve(self, b: FakeBatch) -> None:
        with self._lock:
            if b.status == "in_progress" and not self.hold_batches:
                if b.polls_left <= 0:
                    b.status, b.ended_at = "ended", time.time()
                b.polls_left -= 1
            elif b.status == "canceling":
                for cid in b.custom_ids:  # nothing was processed after the cancel
                    if b.results[cid]["type"] != "succeeded":
                        b.results[cid] = {"type": "canceled"}
                b.status, b.ended_at = "ended", time.time()

    def _next(self) -> dict:
        with self._lock:
            return self.script.popleft() if self.script else self.default

    def start(self) -> "FakeAnthropic":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out in two writes: with Nagle and the client's delayed ACK
            # every reply would wait ~40 ms
            disable_nagle_algorithm = True

            def log_message(self, *a):  # keep test output clean
                pass

            def _read_body(self) -> bytes:
                if self.headers.get("transfer-encoding", "").lower() == "chunked":
                    out = b""
                    while True:
                        size = int(self.rfile.readline().strip().split(b";")[0], 16)
                        if size == 0:
                            self.rfile.readline()
                            return out
                        out += self.rfile.read(size)
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("content-length") or 0))

            def _send(self, status: int, body: dict, headers=None, stream=False):
                stream = stream and status == 200 and body.get("type") == "message"
                data = sse_events(body) if stream else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type",
                                 "text/event-stream" if stream else "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("request-id", f"req_fake{next(_ids)}")
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _send_raw(self, status: int, data: bytes, ctype: str):
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _wait(self):
                if fake.delay:
                    fake._release.wait(fake.delay)

            def _batch_path(self):
                m = re.fullmatch(r"/v1/messages/batches(?:/([A-Za-z0-9_]+)(/results|/cancel)?)?",
                                 self.path.split("?")[0])
                if m is None:
                    return None
                b = fake.batches.get(m.group(1)) if m.group(1) else None
                return m, b

            def do_GET(self):
                with fake._lock:
                    fake.requests.append(Recorded("GET", self.path, {k.lower(): v for k, v
                                                                    in self.headers.items()}, b""))
                self._wait()
                found = self._batch_path()
                if found is not None and found[0].group(1) is None:
                    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
                    return self._send(200, fake.list_page(query))
                if found is None or found[1] is None:
                    return self._send(404, error_reply(404, "not_found_error")["body"])
                m, b = found
                if m.group(2) == "/results":
                    if b.status != "ended":
                        return self._send(400, error_reply(
                            400, "invalid_request_error", "batch has not ended")["body"])
                    lines = [json.dumps({"custom_id": cid, "result": b.results[cid]})
                             for cid in b.custom_ids]
                    return self._send_raw(200, ("\n".join(lines) + "\n").encode(),
                                          "application/binary")
                if m.group(2) is None:
                    fake._retrieve(b)
                    return self._send(200, b.body(fake.base_url))
                self._send(404, error_reply(404, "not_found_error")["body"])

            def _post_batch(self, raw: bytes):
                self._wait()
                m, b = self._batch_path()
                if m.group(2) == "/cancel":
                    if b is None:
                        return self._send(404, error_reply(404, "not_found_error")["body"])
                    with fake._lock:
                        if b.status == "in_progress":
                            b.status, b.cancel_at = "canceling", time.time()
                    return self._send(200, b.body(fake.base_url))
                if m.group(1):
                    return self._send(404, error_reply(404, "not_found_error")["body"])
                if len(raw) > BATCH_MAX_BYTES:
                    return self._send(413, error_reply(413, "request_too_large")["body"])
                try:
                    body = json.loads(raw)
                except ValueError:
                    return self._send(400, error_reply(400, "invalid_request_error",
                                                       "body is not JSON")["body"])
                problems = batch_problems(body) if fake.validate else []
                if problems:
                    return self._send(400, error_reply(400, "invalid_request_error",
                                                       "; ".join(problems[:5]))["body"])
                with fake._lock:
                    fail, fake.fail_batch_creates = (fake.fail_batch_creates > 0,
                                                     max(0, fake.fail_batch_creates - 1))
                if fail:
                    return self._send(529, error_reply(529, "overloaded_error")["body"])
                batch = fake._create_batch(body)
                if fake.stall_batch_creates:  # made, but the answer never comes
                    fake._release.wait(60)
                    self.close_connection = True
                    return
                self._send(200, batch.body(fake.base_url))

            def do_POST(self):
                raw = self._read_body()
                rec = Recorded("POST", self.path, {k.lower(): v for k, v in self.headers.items()},
                               raw)
                with fake._lock:
                    fake.requests.append(rec)
                if self._batch_path() is not None:
                    return self._post_batch(raw)
                if self.path.split("?")[0] != "/v1/messages":
                    return self._send(404, error_reply(404, "not_found_error")["body"])
                try:
                    body = json.loads(raw)
                except ValueError:
                    return self._send(400, error_reply(400, "invalid_request_error",
                                                       "body is not JSON")["body"])
                problems = request_problems(body) if fake.validate else []
                if problems:
                    return self._send(400, error_reply(400, "invalid_request_error",
                                                       "; ".join(problems))["body"])
                reply = (fake.route(body) if fake.route else None) or fake._next()
                if reply.get("hang"):
                    fake._release.wait(60)
                    self.close_connection = True
                    return
                wait = reply.get("delay")
                wait = fake.delay if wait is None else wait
                if wait:
                    fake._release.wait(wait)
                out = json.loads(json.dumps(reply["body"]))
                if out.get("type") == "message":
                    out["id"] = f"msg_fake{next(_ids)}"
                    out["model"] = out.get("model") or body.get("model")
                try:
                    self._send(reply.get("status", 200), out, reply.get("headers"),
                               stream=bool(body.get("stream")))
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        if self._server:
            self._server.shutdown()
            self._server.server_close()
        if self._thread:
            self._thread.join(5)

    def __enter__(self) -> "FakeAnthropic":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
