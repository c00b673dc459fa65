"""Real-shaped transcript records carrying learning markers, built from the corpus."""

import copy
import json

from conftest import REAL

SHORT = REAL / "spotter" / "short.jsonl"


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _template(pred):
    return copy.deepcopy(next(r for r in _records(SHORT) if pred(r)))


def _is_assistant_text(r):
    c = (r.get("message") or {}).get("content")
    return r.get("type") == "assistant" and isinstance(c, list) and c[0].get("type") == "text"


def _is_tool_result(r):
    c = (r.get("message") or {}).get("content")
    return r.get("type") == "user" and isinstance(c, list) and c[0].get("type") == "tool_result"


def _is_tool_use(r):
    c = (r.get("message") or {}).get("content")
    return r.get("type") == "assistant" and isinstance(c, list) and c[0].get("type") == "tool_use"


def marker(topic, kind, body, doc=None):
    doc_line = f"doc-impact: {doc}\n" if doc else ""
    return f"<!-- learning\ntopic: {topic}\nkind: {kind}\n{doc_line}body: {body}\n-->"


def assistant(content, ts="2026-02-10T21:12:00.000Z", **extra):
    """A real assistant record (from the corpus) with its content replaced."""
    r = _template(_is_assistant_text)
    r["message"]["content"] = content
    r["timestamp"] = ts
    r.update(extra)
    return r


def text_blocks(*texts):
    return [{"type": "text", "text": t} for t in texts]


REAL_A = marker("auth-refresh", "decision",
                "7-day JWT refresh chosen because we want long sessions.", "readme")
REAL_B = marker("legacy-strings", "discovery", "Old transcripts store assistant content as a "
                "plain string, so both shapes must be read.")
REAL_C = marker("retry-backoff", "pattern", "Retry with jittered backoff because the API "
                "rate-limits bursts.", "docs")
REAL_D = marker("no-global-state", "anti-pattern", "Module-level caches broke test isolation; "
                "pass state explicitly.")
REAL_E = marker("v1.2-config", "convention", "Config keys are snake_case because the user "
                "asked for it.", "breaking")


def fixture_lines():
    """Every marker case (real ones and look-alikes), as real-shaped JSONL records."""
    tool_result = _template(_is_tool_result)
    tool_result["message"]["content"][0]["content"] = f"file says:\n{REAL_A}\n"
    tool_use = _template(_is_tool_use)
    tool_use["message"]["content"][0]["input"] = {"command": f"echo '{REAL_A}'"}
    user = _template(lambda r: r.get("type") == "user" and isinstance(r["message"]["content"], str))
    user["message"]["content"] = f"please remember {REAL_A}"
    thinking = assistant([{"type": "thinking", "thinking": REAL_A, "signature": "x"}])
    recs = [
        assistant(text_blocks(f"Done.\n\n{REAL_A}\n")),                                  # real
        tool_result, tool_use, user, thinking,
        assistant(text_blocks("Drop a `<!-- learning` comment when something is learned.")),
        assistant(text_blocks("<!-- learning\nkind: decision\nbody: no topic here.\n-->")),
        assistant(text_blocks(marker("...", "decision", "ellipsis topic"))),
        assistant(text_blocks(marker("Auth-Refresh", "decision", "uppercase topic"))),
        assistant(text_blocks(marker("auth refresh", "decision", "spaced topic"))),
        assistant(text_blocks(marker("kebab-case", "bug-fix | decision | pattern | ...",
                                     "one or more sentences", "none | readme | docs"))),
        assistant(text_blocks(marker("empty-body", "decision", "..."))),
        assistant(REAL_B, ts="2026-02-10T21:13:00.000Z"),                                 # real
        {"type": "summary", "summary": REAL_A, "leafUuid": "x"},
        assistant(text_blocks(marker("side-lesson", "pattern", "from a subagent")),
                  isSidechain=True),
        assistant(text_blocks("<!-- learning\ntopic: split-one\nkind: decision\n",
                              "body: split across blocks.\n-->")),
        assistant(text_blocks(f"Two lessons:\n{REAL_C}\nand\n{REAL_D}\n"),               # real x2
                  ts="2026-02-10T21:14:00.000Z"),
        assistant(text_blocks(f"The `<!-- learning` format is below.\n{REAL_E}"),        # real
                  ts="2026-02-10T21:15:00.000Z"),
    ]
    return [json.dumps(r) for r in recs]


def fixture_bytes():
    return ("\n".join(fixture_lines()) + "\n").encode()
