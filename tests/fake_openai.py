"""A fake OpenAI-compatible chat-completions endpoint on loopback (what Ollama, llama.cpp's
server, vLLM and LiteLLM serve), for the `openai` backend to talk to over real HTTP.

A stdlib `http.server` in a thread. It records every request and answers
POST /v1/chat/completions from a script queue: a forced tool call, a JSON answer in the message
content (the JSON-schema mode), plain text with no tool call, malformed arguments, error statuses.
It checks requests as a real server would where the backend depends on it: a model is named,
`tool_choice` names a function that `tools` defines, `response_format` carries a schema. With
`tools_supported=False` it answers a request carrying `tools` with 400 "tools are not supported"
(as servers and models without tool calling do); with `schema_supported=False` the same for
`response_format`.
"""

import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from fake_anthropic import Recorded

TOOL_NAME = "propose_skill_changes"
USAGE = {"prompt_tokens": 900, "completion_tokens": 70, "total_tokens": 970}
_ids = itertools.count(1)


def _completion(message: dict, finish: str, usage=None) -> dict:
    return {"status": 200, "body": {
        "id": f"chatcmpl-{next(_ids)}", "object": "chat.completion", "model": "",
        "choices": [{"index": 0, "message": {"role": "assistant", **message},
                     "finish_reason": finish}],
        "usage": usage or USAGE}}


def tool_call_reply(arguments, *, name: str = TOOL_NAME, usage=None) -> dict:
    """A forced tool call; `arguments` a dict (sent as its JSON) or a raw string."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return _completion({"content": None, "tool_calls": [{
        "id": f"call_{next(_ids)}", "type": "function",
        "function": {"name": name, "arguments": args}}]}, "tool_calls", usage)


def content_reply(text_or_obj, *, usage=None) -> dict:
    """An answer in the message content (JSON-schema mode, or a model ignoring tools)."""
    text = text_or_obj if isinstance(text_or_obj, str) else json.dumps(text_or_obj)
    return _completion({"content": text}, "stop", usage)


def error_reply(status: int, message: str = "fake error", *, retry_after: float | None = None) -> dict:
    headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
    return {"status": status, "body": {"error": {"message": message, "type": "fake"}},
            "headers": headers}


def hang(seconds: float = 30.0) -> dict:
    """No answer for `seconds` (the client's timeout fires first)."""
    return {"status": 200, "hang": seconds, "body": {}}


def request_problems(body: dict) -> list[str]:
    out = []
    if not isinstance(body.get("model"), str) or not body["model"]:
        out.append("model: required")
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        out.append("messages: required")
    tools = body.get("tools")
    if "tool_choice" in body:
        names = [t.get("function", {}).get("name") for t in tools or []]
        chosen = (body["tool_choice"] or {}).get("function", {}).get("name")
        if chosen not in names:
            out.append(f"tool_choice: {chosen!r} is not in tools")
    if tools is not None:
        for t in tools:
            if t.get("type") != "function" or not isinstance(t.get("function", {}).get("parameters"), dict):
                out.append("tools: each needs type function and parameters")
    rf = body.get("response_format")
    if rf is not None and not (rf.get("type") == "json_schema"
                               and isinstance(rf.get("json_schema", {}).get("schema"), dict)):
        out.append("response_format: json_schema with a schema expected")
    return out


class FakeOpenAI:
    def __init__(self, *, tools_supported: bool = True, schema_supported: bool = True,
                 route=None):
        """`route(body)`, when set, answers a valid request before the script (a reply, or None
        to fall through to it)."""
        self.route = route
        self.tools_supported = tools_supported
        self.schema_supported = schema_supported
        self.requests: list[Recorded] = []
        self._script: list[dict] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._stopping = threading.Event()  # set by stop(): a hanging reply ends

    def push(self, *replies: dict) -> "FakeOpenAI":
        with self._lock:
            self._script.extend(replies)
        return self

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def completions(self) -> list[Recorded]:
        return [r for r in self.requests if r.path == "/v1/chat/completions"]

    def _answer(self, body: dict) -> dict:
        problems = request_problems(body)
        if problems:
            return error_reply(400, "; ".join(problems))
        if "tools" in body and not self.tools_supported:
            return error_reply(400, "tools are not supported by this model")
        if "response_format" in body and not self.schema_supported:
            return error_reply(400, "response_format json_schema is not supported")
        reply = self.route(body) if self.route is not None else None
        with self._lock:
            if reply is None:
                reply = self._script.pop(0) if self._script else content_reply("the script is empty")
        if "choices" in reply.get("body", {}):  # servers answer as the model they were asked for
            reply = {**reply, "body": {**reply["body"], "model": body["model"]}}
        return reply

    def start(self) -> "FakeOpenAI":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                fake.requests.append(Recorded("POST", self.path, dict(self.headers.items()), raw))
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": "not found"}})
                try:
                    body = json.loads(raw)
                except ValueError:
                    return self._send(400, {"error": {"message": "invalid JSON"}})
                reply = fake._answer(body)
                if reply.get("hang"):
                    fake._stopping.wait(reply["hang"])
                    return
                self._send(reply["status"], reply["body"], reply.get("headers"))

            def _send(self, status: int, body: dict, headers=None):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "FakeOpenAI":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
