"""Does the reflector learn what a session teaches, and only that? An evaluation through the
real daemon.

A suite of episodes, each one session whose transcript is built from real Claude Code records
(`tests/corpus/real/`: spotter and fasthooks fixtures, MIT, see its SOURCES.md) with a lesson
planted in records of the same shape (or, for the failed approach, the real one the session
holds): a user correction, a convention stated once, a failed approach and the fix, a learning
marker, routine work with nothing to learn, the same lesson met a second time, and three
episodes around a skill already in the library (loaded and followed, loaded and ignored, needed
and not loaded). Each goes through a fresh daemon as a live session does: hook events, a
threshold job, the reflector, intake and the promoter. The figures come from what autoharness
stores (the intent queue, `skills list`, the report's ledger of model usage):

- planted lessons landed exactly once (over the whole suite: the repeat must not land again);
- duplicate landings (a lesson landed more than once);
- landings where nothing was planted;
- verdicts that match the planted ones (n/a while the reflector's tool has no `feedback`);
- tokens and money per episode (list price of the model).

By default (and in CI) the model is a scripted fake on loopback: `oracle` answers what was
planted, `noisy` answers junk, paraphrased evidence and duplicates; both run and their figures
are printed side by side with the noisy/oracle ratio. `--protocol openai` serves the fakes as
an OpenAI-compatible endpoint (the `openai` backend) instead of the Messages API. `--live` runs
the suite against the backend and model your own configuration selects (real tokens, real
money), or against each of `--backend a,b` (`backend` or `backend:model`, each with the rest of
its settings from your configuration), side by side.

    .venv/bin/python bench/learning_eval.py                 # oracle and noisy fakes
    .venv/bin/python bench/learning_eval.py --live          # your configured reflector
    .venv/bin/python bench/learning_eval.py --live --backend openai,anthropic
    .venv/bin/python bench/learning_eval.py --kinds correction,routine --json
"""

import argparse
import copy
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))
from _common import start_daemon, stop, temp_home  # noqa: E402 (after the path insert)

CORPUS = REPO / "tests" / "corpus" / "real"
BIN = Path(sys.executable).parent
CTL = str(BIN / "autoharnessctl")
PROJECT_SKILL = "run-tests-with-make"
VERDICTS = ("helped", "ignored", "harmful", "missed")


# ---- episodes ------------------------------------------------------------------------------------

@dataclass
class Lesson:
    """A lesson planted in an episode: the verbatim quote a grounded proposal cites, and what
    an oracle would propose for it."""

    id: str
    quote: str
    skill: str
    description: str
    body: str


@dataclass
class Verdict:
    skill: str
    verdict: str
    quote: str


@dataclass
class Episode:
    kind: str
    base: str  # corpus transcript the real records come from
    lines: list[int]  # which of its records (0-based)
    planted: list[dict] = field(default_factory=list)  # records added, in the corpus's shape
    lessons: list[Lesson] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)


def _read(name: str) -> list[dict]:
    with open(CORPUS / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


SPOTTER = "spotter/short.jsonl"
FASTHOOKS = "fasthooks/sample_main_transcript.jsonl"


def _template(name: str, index: int) -> dict:
    return copy.deepcopy(_read(name)[index])


def user_text(text: str) -> dict:
    rec = _template(FASTHOOKS, 1)
    rec["uuid"] = str(uuid.uuid4())
    rec["message"] = {"role": "user", "content": text}
    return rec


def assistant_text(text: str) -> dict:
    rec = _template(FASTHOOKS, 6)
    rec["uuid"] = str(uuid.uuid4())
    rec["message"]["content"] = [{"type": "text", "text": text}]
    return rec


def tool_call(name: str, tool_input: dict, result: str, *, error: bool = False) -> list[dict]:
    use = _template(FASTHOOKS, 3)
    tid = "toolu_bench" + uuid.uuid4().hex[:16]
    use["uuid"] = str(uuid.uuid4())
    use["message"]["content"] = [{"type": "tool_use", "id": tid, "name": name, "input": tool_input}]
    res = _template(FASTHOOKS, 4)
    res["uuid"] = str(uuid.uuid4())
    res["message"]["content"] = [{"type": "tool_result", "tool_use_id": tid, "content": result,
                                  "is_error": error}]
    res.pop("toolUseResult", None)
    return [use, res]


IEX = Lesson("iex-server", "always start it with `iex -S mix phx.server` so the error stays readable",
             "start-phoenix-under-iex",
             "Use when starting the Phoenix dev server: run it under iex so startup errors stay "
             "readable.", "Start the server with `iex -S mix phx.server`, not `mix phx.server`.")
DOCSTRING = Lesson("py-conventions",
                   "every new Python file starts with a module docstring and a `main()` guard",
                   "python-file-conventions",
                   "Use when creating a Python file in this workspace: module docstring first, "
                   "code under a main guard.",
                   "1. Start with a module docstring.\n2. Put the entry code under "
                   "`if __name__ == \"__main__\": main()`.")
PYTHON3 = Lesson("python3", "python: command not found", "use-python3",
                 "Use when running a Python script in this workspace: call python3, there is "
                 "no python command.", "Run scripts with `python3 script.py`; `python` is not "
                 "installed here.")
READ_PREFIX = Lesson("read-prefixes", "The Read tool prefixes every line with its number and an "
                     "arrow; strip them before comparing file content.", "read-tool-line-prefixes",
                     "Use when comparing what the Read tool returned with file content: strip "
                     "the line-number prefixes first.", "Read output lines look like `   1→text`: "
                     "drop everything up to the arrow before comparing.")
MARKER = ("Here it is. <!-- learning\ntopic: read-tool-line-prefixes\nkind: discovery\n"
          f"doc-impact: none\nbody: {READ_PREFIX.quote}\n-->")


def episodes() -> list[Episode]:
    """The suite, in the order it runs (the repeat comes after the first meeting)."""
    return [
        Episode("correction", SPOTTER, list(range(0, 13)), [user_text(
            "No, stop. Don't run mix phx.server in the foreground here: " + IEX.quote + ".")],
            [IEX]),
        Episode("convention", FASTHOOKS, list(range(8, 17)), [user_text(
            "For the record, in this workspace " + DOCSTRING.quote + ".")], [DOCSTRING]),
        Episode("failed_fix", FASTHOOKS, list(range(33, 56)), [], [PYTHON3]),
        Episode("marker", FASTHOOKS, list(range(17, 24)), [assistant_text(MARKER)], [READ_PREFIX]),
        Episode("routine", FASTHOOKS, list(range(0, 8)), []),
        Episode("repeat", SPOTTER, list(range(0, 8)), [user_text(
            "Again: " + IEX.quote + ". Please keep that in mind.")], [IEX]),
        Episode("followed", FASTHOOKS, [1], [
            user_text("please run the tests"),
            *tool_call("Skill", {"skill": PROJECT_SKILL}, f"Launching skill: {PROJECT_SKILL}"),
            *tool_call("Bash", {"command": "make test"}, "make test\n12 passed in 3.1s"),
            assistant_text("All 12 tests passed with make test.")],
            verdicts=[Verdict(PROJECT_SKILL, "helped", "All 12 tests passed with make test.")]),
        Episode("ignored", FASTHOOKS, [1], [
            user_text("please run the tests"),
            *tool_call("Skill", {"skill": PROJECT_SKILL}, f"Launching skill: {PROJECT_SKILL}"),
            *tool_call("Bash", {"command": "pytest -q"},
                       "E   OperationalError: no such table: users", error=True),
            assistant_text("The tests fail: the users table is missing.")],
            verdicts=[Verdict(PROJECT_SKILL, "ignored",
                              "The tests fail: the users table is missing.")]),
        Episode("missed", FASTHOOKS, [1], [
            user_text("please run the tests"),
            *tool_call("Bash", {"command": "pytest -q"},
                       "E   OperationalError: no such table: users", error=True),
            assistant_text("The tests fail before they start: the database has no tables.")],
            verdicts=[Verdict(PROJECT_SKILL, "missed",
                              "The tests fail before they start: the database has no tables.")]),
    ]


KINDS = [e.kind for e in episodes()]


def transcript(ep: Episode) -> list[dict]:
    base = _read(ep.base)
    return [copy.deepcopy(base[i]) for i in ep.lines] + copy.deepcopy(ep.planted)


# ---- the fakes ---------------------------------------------------------------------------------

def feedback_supported() -> bool:
    """Whether this version's reflector tool takes skill verdicts (`feedback`)."""
    from claude_autoharness.daemon.reflect.prompt import tool_schema

    return "feedback" in tool_schema(3).get("properties", {})


def _window(body: dict) -> str:
    """The user text of a reflection request, JSON escapes undone (what a model reads)."""
    from claude_autoharness.daemon.promote.evidence import decode_escapes

    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    content = users[0].get("content") if users else ""
    text = content if isinstance(content, str) else "".join(
        b.get("text", "") for b in content if isinstance(b, dict))
    return decode_escapes(text)


def _usage(body: dict, reply: dict) -> dict:
    """Tokens a model would bill for this request: ~4 bytes a token, the system prompt read
    from the cache."""
    system = json.dumps(body.get("system") or [])
    user = json.dumps(body.get("messages") or [])
    return {"input_tokens": len(user) // 4, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": len(system) // 4,
            "output_tokens": len(json.dumps(reply)) // 4 + 20}


def _proposal(lesson: Lesson, *, evidence: str | None = None, skill: str | None = None,
              description: str | None = None) -> dict:
    return {"action": "create", "skill": skill or lesson.skill, "layer": "project",
            "reason": "planted lesson", "evidence": evidence if evidence is not None else lesson.quote,
            "description": description or lesson.description, "body": lesson.body,
            "old": None, "new": None, "path": None, "content": None}


def _present(quote: str, window: str) -> bool:
    return quote in window


def oracle_answer(window: str, suite: list[Episode], with_feedback: bool) -> dict:
    """What was planted in this window, exactly: one grounded proposal per lesson, the planted
    verdicts."""
    out: dict = {"proposals": []}
    seen: set[str] = set()
    for ep in suite:
        for lesson in ep.lessons:
            if lesson.id not in seen and _present(lesson.quote, window):
                seen.add(lesson.id)
                out["proposals"].append(_proposal(lesson))
    if with_feedback:
        out["feedback"] = [{"skill": v.skill, "layer": "project", "verdict": v.verdict,
                            "evidence": v.quote}
                           for ep in suite for v in ep.verdicts
                           if _present(v.quote, window)]
    return out


FLIP = {"helped": "ignored", "ignored": "helped", "missed": "helped", "harmful": "helped"}


def noisy_answer(window: str, suite: list[Episode], with_feedback: bool) -> dict:
    """A bad reflector: every other lesson with paraphrased evidence (not a quote), the rest
    proposed twice under two names, a junk lesson from whatever the user asked, wrong
    verdicts."""
    out: dict = {"proposals": []}
    seen: set[str] = set()
    order = [lesson.id for ep in suite for lesson in ep.lessons]
    for ep in suite:
        for lesson in ep.lessons:
            if lesson.id in seen or not _present(lesson.quote, window):
                continue
            seen.add(lesson.id)
            if sorted(set(order)).index(lesson.id) % 2 == 0:
                reworded = " ".join(reversed(lesson.quote.split()))  # not a quote any more
                out["proposals"].append(_proposal(lesson, evidence=reworded))
            else:
                out["proposals"].append(_proposal(lesson))
                out["proposals"].append(_proposal(
                    lesson, skill=lesson.skill + "-again",
                    description="Use whenever this comes up again: " + lesson.body[:70]))
    asked = _first_user_text(window, [lesson.quote for ep in suite for lesson in ep.lessons])
    if asked:
        out["proposals"].append({
            "action": "create", "skill": "junk-" + uuid.uuid5(uuid.NAMESPACE_URL, asked).hex[:8],
            "layer": "project", "reason": "the user asked something",
            "evidence": asked, "description": f"Use when the user asks: {asked[:80]}",
            "body": "Do what the user asked.", "old": None, "new": None, "path": None,
            "content": None})
    if with_feedback:
        out["feedback"] = [{"skill": v.skill, "layer": "project", "verdict": FLIP[v.verdict],
                            "evidence": v.quote}
                           for ep in suite for v in ep.verdicts
                           if _present(v.quote, window)]
    return out


def _first_user_text(window: str, planted: list[str]) -> str:
    """The first user prompt of the window that carries no planted lesson (junk is about
    nothing that was planted)."""
    for line in window.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        msg = rec.get("message") if isinstance(rec, dict) else None
        if rec.get("type") == "user" and isinstance(msg, dict) and isinstance(msg.get("content"), str):
            text = msg["content"].strip()
            if len(text) >= 12 and not any(q in text for q in planted):
                return text
    return ""


def answer_of(kind: str):
    """The scripted reflector `kind` (`oracle` or `noisy`)."""
    return oracle_answer if kind == "oracle" else noisy_answer


def openai_usage(body: dict, reply: dict) -> dict:
    """`_usage` in the chat-completions protocol's keys (the system prompt read from cache)."""
    u = _usage({"system": body["messages"][:1], "messages": body["messages"][1:]}, reply)
    cached = u["cache_read_input_tokens"]
    return {"prompt_tokens": u["input_tokens"] + cached, "completion_tokens": u["output_tokens"],
            "prompt_tokens_details": {"cached_tokens": cached}}


def fake_server(kind: str, suite: list[Episode], protocol: str = "anthropic"):
    """The `kind` fake on loopback, speaking the Messages API or (`openai`) chat completions."""
    answer = answer_of(kind)
    with_feedback = feedback_supported()
    if protocol == "openai":
        from fake_openai import FakeOpenAI, tool_call_reply

        def route_openai(body: dict):
            reply = answer(_window(body), suite, with_feedback)
            return tool_call_reply(reply, usage=openai_usage(body, reply))

        return FakeOpenAI(route=route_openai)
    from fake_anthropic import FakeAnthropic, tool_reply

    def route(body: dict):
        if not body.get("tools"):
            return None
        reply = answer(_window(body), suite, with_feedback)
        return tool_reply(reply, usage=_usage(body, reply))

    return FakeAnthropic(route=route)


def fake_env(server, protocol: str) -> dict:
    """The daemon's environment for a fake `server` of `protocol`."""
    if protocol == "openai":
        return {"AUTOHARNESS_REFLECTOR_BACKEND": "openai",
                "AUTOHARNESS_REFLECTOR_OPENAI_BASE_URL": server.base_url,
                "AUTOHARNESS_REFLECTOR_OPENAI_MODEL": "fake-local"}
    return {"ANTHROPIC_API_KEY": "sk-ant-bench-not-a-real-key",
            "ANTHROPIC_BASE_URL": server.base_url, "AUTOHARNESS_REFLECTOR_BACKEND": "anthropic"}


# ---- running a suite ------------------------------------------------------------------------------

def ctl(env: dict, *args: str, timeout: float = 120) -> dict | list:
    r = subprocess.run([CTL, *args, "--json"], capture_output=True, text=True, env=env,
                       timeout=timeout)
    if r.returncode != 0:
        raise SystemExit(f"autoharnessctl {' '.join(args)} failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def hook(env: dict, event: dict) -> None:
    subprocess.run([str(BIN / "autoharness-hook")], input=json.dumps(event).encode(),
                   capture_output=True, env=env, timeout=60)


def wait_for(pred, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


def seed_skill(project: Path) -> None:
    """The library skill the verdict episodes are about, landed as the promoter lands any."""
    from claude_autoharness.daemon.persist.dirs import ensure_private_dir
    from claude_autoharness.daemon.promote.land import Promoter
    from claude_autoharness.daemon.proposals import Intent, Proposal
    from claude_autoharness.protocol import paths
    from claude_autoharness.protocol.config import PromoterConfig

    evidence = "run the tests with make test: it creates the test database first"
    p = Proposal(action="create", skill=PROJECT_SKILL, layer="project", reason="seeded",
                 evidence=evidence, description="Use when running this project's tests: run "
                 "make test, which creates the test database first.",
                 body="Run `make test`, never `pytest` directly: it creates the test database.")
    ensure_private_dir(paths.state_dir())
    out = Promoter(PromoterConfig()).promote(
        Intent(id="seed-" + PROJECT_SKILL, source="reflector", created_at=time.time(),
               proposal=p), evidence, str(project))
    if out.status != "landed":
        raise SystemExit(f"could not seed the library skill: {out.findings}")


def _norm(text: str) -> str:
    from claude_autoharness.daemon.promote.evidence import decode_escapes, normalize

    return normalize(decode_escapes(text or ""))


def matches(evidence: str, lesson: Lesson) -> bool:
    ev, q = _norm(evidence), _norm(lesson.quote)
    return bool(ev) and len(ev) >= 12 and (q in ev or ev in q)


def run_suite(fake: str | None, kinds: list[str] | None = None, *,
              live_env: dict | None = None, model: str | None = None,
              episode_timeout: float = 120.0, protocol: str = "anthropic",
              label: str | None = None) -> dict:
    """Run the episodes of `kinds` (default all) through a fresh daemon; `fake` is `oracle` or
    `noisy` (a loopback server speaking `protocol`), or None with `live_env` (a configured
    backend, named `label` in the figures)."""
    suite = [e for e in episodes() if kinds is None or e.kind in kinds]
    lessons = {lesson.id: lesson for e in suite for lesson in e.lessons}
    d, env = temp_home()
    saved = {k: os.environ.get(k) for k in ("AUTOHARNESS_HOME", "CLAUDE_CONFIG_DIR")}
    server = daemon = None
    try:
        env.update({"AUTOHARNESS_REFLECT_EVERY": "1", "AUTOHARNESS_REFLECTOR_BACKOFF_BASE_S": "0.2"})
        if fake is not None:
            server = fake_server(fake, suite, protocol).start()
            env.update(fake_env(server, protocol))
        else:
            env.update(live_env or {})
        os.environ.update(AUTOHARNESS_HOME=env["AUTOHARNESS_HOME"],
                          CLAUDE_CONFIG_DIR=env["CLAUDE_CONFIG_DIR"])
        project = d / "proj"
        (project / ".claude" / "skills").mkdir(parents=True)
        if any(e.verdicts for e in suite):
            seed_skill(project)
        daemon, _ = start_daemon(env)
        from claude_autoharness.daemon.reportlog import ReportLog

        ledger = ReportLog(os.path.join(env["AUTOHARNESS_HOME"], "state", "report.jsonl"))
        model = model or ctl(env, "status")["reflector"]["model"]
        results = [run_episode(env, project, ep, i, ledger, episode_timeout) for i, ep in
                   enumerate(suite)]
        name = fake if protocol == "anthropic" or fake is None else f"{fake} ({protocol})"
        return score(suite, lessons, results, model, name or label or "live")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if server is not None:
            server.stop()
        stop(daemon, d)


def run_episode(env: dict, project: Path, ep: Episode, n: int, ledger, timeout: float) -> dict:
    from claude_autoharness.protocol.paths import project_slug

    sid = f"eval-{n:02d}-{ep.kind}"
    slug = Path(env["CLAUDE_CONFIG_DIR"]) / "projects" / project_slug(str(project))
    slug.mkdir(parents=True, exist_ok=True)
    path = slug / f"{sid}.jsonl"
    records = transcript(ep)
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(json.dumps(r) + "\n" for r in records))
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    feedback_before = _feedback(env, project)
    usage_before = len(list(ledger.records("usage")))
    done_before = _finished(env)
    base = {"session_id": sid, "transcript_path": str(path), "cwd": str(project)}
    hook(env, {**base, "hook_event_name": "SessionStart", "source": "startup"})
    calls = [b for r in records if r.get("type") == "assistant"
             for b in (r["message"].get("content") or []) if isinstance(b, dict)
             and b.get("type") == "tool_use"] or [{"name": "Bash", "input": {"command": "ls"},
                                                   "id": f"toolu_pad{n}"}]
    for b in calls[-3:]:  # the hooks see the last tool calls (the window holds all)
        hook(env, {**base, "hook_event_name": "PreToolUse", "tool_name": b["name"],
                   "tool_input": b["input"], "tool_use_id": b["id"]})
    hook(env, {**base, "hook_event_name": "Stop"})
    wait_for(lambda: _finished(env) > done_before, timeout, f"the {ep.kind} reflection")
    def settled() -> list[dict] | None:
        mine = [i for i in ctl(env, "queue", "list") if i.get("session_id") == sid]
        return None if any(i.get("status") == "queued" for i in mine) else mine

    intents = wait_for(lambda: (lambda xs: None if xs is None else [xs])(settled()),
                       timeout, f"the {ep.kind} intents")[0]
    hook(env, {**base, "hook_event_name": "SessionEnd", "reason": "other"})
    usage = list(ledger.records("usage"))[usage_before:]
    after = _feedback(env, project)
    delta = {}
    if after is not None and feedback_before is not None:
        for skill, fb in after.items():
            prev = feedback_before.get(skill, {})
            delta[skill] = {k: fb.get(k, 0) - prev.get(k, 0) for k in VERDICTS}
    return {"episode": ep, "intents": intents, "usage": usage,
            "feedback": delta if after is not None else None}


def _finished(env: dict) -> int:
    jobs = ctl(env, "status")["jobs"]
    return jobs["done"] + jobs["failed"]


def _feedback(env: dict, project: Path) -> dict | None:
    """Verdict counts per skill, or None when this version's `skills list` has none."""
    out, any_fb = {}, False
    for s in ctl(env, "skills", "list", "--project", str(project)):
        fb = s.get("feedback")
        if isinstance(fb, dict):
            any_fb = True
            out[s["name"]] = {k: int(fb.get(k) or 0) for k in VERDICTS}
    return out if any_fb else None


# ---- scoring ---------------------------------------------------------------------------------------

def score(suite: list[Episode], lessons: dict[str, Lesson], results: list[dict], model: str,
          reflector: str) -> dict:
    from claude_autoharness.daemon import pricing
    from claude_autoharness.protocol.config import ConfigError, load

    try:
        prices = load().reflector.prices  # your price table, as the report uses it
    except ConfigError:
        prices = {}

    landed_by_lesson: dict[str, int] = {k: 0 for k in lessons}
    rows = []
    for res in results:
        ep: Episode = res["episode"]
        landings = [i for i in res["intents"] if i.get("status") == "landed"
                    and (i.get("proposal") or {}).get("action") in ("create", "update", "patch")]
        dup = unplanted = 0
        for i in landings:
            hit = [k for k, lesson in lessons.items()
                   if matches(i["proposal"].get("evidence", ""), lesson)]
            if not hit:
                unplanted += 1
            for k in hit:
                landed_by_lesson[k] += 1
                if landed_by_lesson[k] > 1:
                    dup += 1
        tokens = {"input_uncached": 0, "cache_write": 0, "cache_read": 0, "output": 0}
        usd: float | None = 0.0
        for u in res["usage"]:
            t = {"input_uncached": u.get("input_tokens", 0), "cache_write": u.get("cache_creation", 0),
                 "cache_read": u.get("cache_read", 0), "output": u.get("output_tokens", 0)}
            for k in tokens:
                tokens[k] += int(t[k])
            c = pricing.cost_usd(u.get("model") or model, t, batch=bool(u.get("batch")),
                                 table=prices, local=bool(u.get("local")))
            usd = None if c is None or usd is None else usd + c
        verdicts = None
        if res["feedback"] is not None:
            verdicts = {"planted": len(ep.verdicts), "matching": sum(
                1 for v in ep.verdicts if res["feedback"].get(v.skill, {}).get(v.verdict, 0) >= 1),
                "accepted": sum(sum(x.values()) for x in res["feedback"].values())}
        rows.append({"kind": ep.kind, "lessons": [lesson.id for lesson in ep.lessons],
                     "landings": len(landings), "duplicates": dup, "unplanted": unplanted,
                     "verdicts": verdicts, "tokens": tokens, "usd": usd})
    kinds: dict[str, dict] = {}
    for row in rows:
        k = kinds.setdefault(row["kind"], {"episodes": 0, "planted": 0, "exactly_once": 0,
                                           "duplicates": 0, "unplanted": 0, "verdicts": None,
                                           "tokens": 0, "usd": 0.0})
        k["episodes"] += 1
        k["planted"] += len(row["lessons"])
        k["exactly_once"] += sum(1 for lid in row["lessons"] if landed_by_lesson[lid] == 1)
        k["duplicates"] += row["duplicates"]
        k["unplanted"] += row["unplanted"]
        k["tokens"] += sum(row["tokens"].values())
        k["usd"] = None if k["usd"] is None or row["usd"] is None else k["usd"] + row["usd"]
        if row["verdicts"] is not None:
            v = k["verdicts"] or {"planted": 0, "matching": 0, "accepted": 0}
            k["verdicts"] = {x: v[x] + row["verdicts"][x] for x in v}
    distinct = set(landed_by_lesson)
    overall = {"episodes": len(rows), "planted": len(distinct),
               "exactly_once": sum(1 for k in distinct if landed_by_lesson[k] == 1),
               "duplicates": sum(r["duplicates"] for r in rows),
               "unplanted": sum(r["unplanted"] for r in rows),
               "verdicts": None, "tokens": sum(k["tokens"] for k in kinds.values()),
               "usd": None if any(k["usd"] is None for k in kinds.values())
               else sum(k["usd"] for k in kinds.values())}
    if all(k["verdicts"] is not None for k in kinds.values() if k["episodes"]) and any(
            k["verdicts"] for k in kinds.values()):
        overall["verdicts"] = {x: sum((k["verdicts"] or {}).get(x, 0) for k in kinds.values())
                               for x in ("planted", "matching", "accepted")}
    return {"reflector": reflector, "model": model, "feedback_supported": feedback_supported(),
            "kinds": kinds, "overall": overall, "landed_by_lesson": landed_by_lesson}


# ---- output ---------------------------------------------------------------------------------------

def _verdicts(v: dict | None) -> str:
    return "n/a" if v is None else f"{v['matching']}/{v['planted']} ({v['accepted']} acc.)"


def table(res: dict) -> str:
    lines = [f"reflector {res['reflector']}, model {res['model']}"
             + ("" if res["feedback_supported"] else " (verdicts n/a: no feedback in the tool)"),
             f"  {'kind':<12}{'eps':>4}{'planted':>8}{'once':>6}{'dups':>6}{'unplanted':>10}"
             f"  {'verdicts':<16}{'tokens/ep':>10}{'$/ep':>10}"]
    for name, k in [*res["kinds"].items(), ("overall", res["overall"])]:
        eps = max(1, k["episodes"])
        usd = "n/a" if k["usd"] is None else f"{k['usd'] / eps:.5f}"
        lines.append(f"  {name:<12}{k['episodes']:>4}{k['planted']:>8}{k['exactly_once']:>6}"
                     f"{k['duplicates']:>6}{k['unplanted']:>10}  {_verdicts(k['verdicts']):<16}"
                     f"{k['tokens'] / eps:>10.0f}{usd:>10}")
    return "\n".join(lines)


def _share(res: dict) -> float:
    o = res["overall"]
    return o["exactly_once"] / o["planted"] if o["planted"] else 0.0


def side_by_side(results: list[dict]) -> str:
    """One line per reflector: the overall figures, to compare backends at a glance."""
    lines = [f"  {'reflector':<28}{'model':<24}{'once':>9}{'dups':>6}{'unplanted':>10}"
             f"  {'verdicts':<16}{'tokens/ep':>10}{'$/ep':>10}"]
    for res in results:
        o = res["overall"]
        eps = max(1, o["episodes"])
        usd = "n/a" if o["usd"] is None else f"{o['usd'] / eps:.5f}"
        lines.append(f"  {res['reflector'][:27]:<28}{str(res['model'])[:23]:<24}"
                     f"{o['exactly_once']:>4}/{o['planted']:<4}{o['duplicates']:>6}"
                     f"{o['unplanted']:>10}  {_verdicts(o['verdicts']):<16}"
                     f"{o['tokens'] / eps:>10.0f}{usd:>10}")
    return "\n".join(lines)


def live_env(entry: str = "") -> tuple[dict, str]:
    """The reflector your configuration selects (or `entry`, `backend` or `backend:model`, with
    the rest of that backend's settings from your configuration), for a daemon on a temp home:
    backend, model, key and base URL as env overrides. The `claude` backend runs through a
    wrapper that gives the child your own Claude Code config dir (its login), never the temp
    one."""
    import msgspec

    from claude_autoharness.daemon.reflect import backends
    from claude_autoharness.daemon.reflect.backends import routing
    from claude_autoharness.protocol.config import load

    cfg = load().reflector
    if entry:
        cfg = routing.for_work(msgspec.structs.replace(cfg, routes={"reflect": entry}), "reflect")
    backend = backends.choose_backend(cfg)
    if backend == "none":
        raise SystemExit(f"--live {entry}: {backends.available(cfg)['reason']}".replace(" :", ":"))
    model = routing.model_of(cfg, backend)
    env = {"AUTOHARNESS_REFLECTOR_BACKEND": backend, "AUTOHARNESS_REFLECTOR_MODEL": cfg.model}
    if backend == "anthropic":
        if cfg.api_key:
            env["AUTOHARNESS_REFLECTOR_API_KEY"] = cfg.api_key
        if cfg.base_url:
            env["AUTOHARNESS_REFLECTOR_BASE_URL"] = cfg.base_url
    elif backend == "openai":
        env.update({"AUTOHARNESS_REFLECTOR_OPENAI_BASE_URL": cfg.openai_base_url,
                    "AUTOHARNESS_REFLECTOR_OPENAI_MODEL": cfg.openai_model,
                    "AUTOHARNESS_REFLECTOR_OPENAI_OUTPUT": cfg.openai_output})
        if cfg.openai_api_key:
            env["AUTOHARNESS_REFLECTOR_OPENAI_API_KEY"] = cfg.openai_api_key
    else:
        exe = backends.base.find_claude(cfg)
        wrapper = Path(tempfile.mkdtemp(prefix="ahb-claude-", dir="/tmp")) / "claude"
        own = os.environ.get("CLAUDE_CONFIG_DIR")
        setdir = f"export CLAUDE_CONFIG_DIR={json.dumps(own)}\n" if own else "unset CLAUDE_CONFIG_DIR\n"
        wrapper.write_text(f"#!/bin/sh\n{setdir}exec {json.dumps(exe)} \"$@\"\n")
        wrapper.chmod(0o700)
        env["AUTOHARNESS_REFLECTOR_CLAUDE_PATH"] = str(wrapper)
    return env, model


def run_live(entries: list[str], kinds: list[str] | None) -> list[dict]:
    """The suite against each configured backend of `entries` ("" = the configured one)."""
    out = []
    for entry in entries:
        env, model = live_env(entry)
        try:
            out.append(run_suite(None, kinds, live_env=env, model=model, episode_timeout=600,
                                 label=entry or env["AUTOHARNESS_REFLECTOR_BACKEND"]))
        finally:
            wrapper = env.get("AUTOHARNESS_REFLECTOR_CLAUDE_PATH")
            if wrapper:
                shutil.rmtree(os.path.dirname(wrapper), ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--live", action="store_true",
                    help="run against your configured reflector (costs real tokens)")
    ap.add_argument("--backend", default="",
                    help="with --live: comma-separated `backend` or `backend:model` entries "
                    "(anthropic, claude, openai), each run in turn and shown side by side "
                    "(default: the backend your configuration selects)")
    ap.add_argument("--fake", choices=("oracle", "noisy", "both"), default="both",
                    help="without --live: which scripted fake (default both)")
    ap.add_argument("--protocol", choices=("anthropic", "openai"), default="anthropic",
                    help="without --live: the fakes speak the Messages API (default) or "
                    "OpenAI's chat completions (the `openai` backend)")
    ap.add_argument("--kinds", help="comma-separated episode kinds (default all): "
                    + ",".join(KINDS))
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    kinds = args.kinds.split(",") if args.kinds else None
    if kinds and set(kinds) - set(KINDS):
        raise SystemExit(f"unknown kinds {sorted(set(kinds) - set(KINDS))}; known: {KINDS}")
    if args.backend and not args.live:
        ap.error("--backend needs --live (without it the scripted fakes run)")
    out: list[dict] = []
    if args.live:
        out = run_live(args.backend.split(",") if args.backend else [""], kinds)
    else:
        for fake in (("oracle", "noisy") if args.fake == "both" else (args.fake,)):
            out.append(run_suite(fake, kinds, protocol=args.protocol))
    if args.json:
        print(json.dumps(out, indent=2, default=str))
        return
    print("learning_eval: planted lessons landed exactly once (once), duplicate landings (dups),"
          "\nlandings where nothing was planted (unplanted), verdicts matching the planted ones")
    for res in out:
        print(table(res))
    if len(out) > 1:
        print("side by side:")
        print(side_by_side(out))
    if len(out) == 2 and not args.live:
        print(f"noisy/oracle: exactly-once share {_share(out[1]):.2f}/{_share(out[0]):.2f}; "
              f"unplanted {out[1]['overall']['unplanted']} vs {out[0]['overall']['unplanted']}; "
              f"duplicates {out[1]['overall']['duplicates']} vs {out[0]['overall']['duplicates']}")


if __name__ == "__main__":
    main()
