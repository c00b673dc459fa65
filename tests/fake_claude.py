"""A fake `claude` executable for the claude backend's tests.

`install(bin_dir, state_dir, scenarios)` writes an executable named `claude` into `bin_dir`.
Each run takes the next scenario (the last one repeats), records what it saw (argv, cwd, stdin,
the environment variables that matter, pid/pgid/sid) to `state_dir/seen-N.json`, checks the
isolation flags and environment, and then acts out the scenario:

- `{"result": {...}}`       print a JSON result object (`structured_output`, `usage`, ...)
- `{"stdout": s, "stderr": s, "rc": n}`   print raw text and exit with `rc`
- `{"hang": True, "ignore_term": bool}`   start a grandchild in the same process group, write
  its pid, then sleep forever (optionally ignoring SIGTERM, so only SIGKILL ends it)
- `{"signal": n}`           kill itself with signal `n` (a crash)

A failed check prints `fake claude: ...` to stderr and exits 3, so misuse cannot pass silently.
"""

import json
import os
import stat
import sys
from pathlib import Path

SCRIPT = r'''#!{python}
import json, os, signal, subprocess, sys, time
STATE = {state!r}
scenarios = json.load(open(os.path.join(STATE, "scenarios.json")))
n = 0
while True:  # claim a run number atomically (concurrent runs must not share one)
    try:
        os.close(os.open(os.path.join(STATE, f"run-{{n}}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        break
    except FileExistsError:
        n += 1
sc = scenarios[min(n, len(scenarios) - 1)]
argv = sys.argv[1:]
stdin = sys.stdin.read()

def opt(name):
    return argv[argv.index(name) + 1] if name in argv and argv.index(name) + 1 < len(argv) else None

problems = []
if "-p" not in argv and "--print" not in argv:
    problems.append("not in print mode (-p)")
if opt("--output-format") != "json":
    problems.append("--output-format json missing")
try:
    schema = json.loads(opt("--json-schema") or "")
    if "proposals" not in schema.get("properties", {{}}):
        problems.append("--json-schema lacks `proposals`")
except ValueError:
    problems.append("--json-schema missing or not JSON")
try:
    if json.loads(opt("--settings") or "").get("disableAllHooks") is not True:
        problems.append("--settings does not disable all hooks")
except ValueError:
    problems.append("--settings missing or not JSON")
if "--no-session-persistence" not in argv:
    problems.append("--no-session-persistence missing")
if opt("--tools") != "":
    problems.append('--tools "" (no tools) missing')
if os.environ.get("AUTOHARNESS_CHILD_SESSION") != "1":
    problems.append("AUTOHARNESS_CHILD_SESSION=1 not set")
for var in ("CLAUDE_CODE_SESSION_ID", "CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT"):
    if var in os.environ:
        problems.append(f"parent variable {{var}} leaked")
spf = opt("--system-prompt-file")
system = open(spf).read() if spf and os.path.exists(spf) else None
if system is None:
    problems.append("--system-prompt-file missing")
if not stdin.strip():
    problems.append("no packet on stdin")

seen = {{"n": n, "argv": argv, "cwd": os.getcwd(), "stdin": stdin, "system": system,
        "env": {{k: os.environ.get(k) for k in ("AUTOHARNESS_CHILD_SESSION", "CLAUDE_CODE_SESSION_ID",
                 "CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "ANTHROPIC_API_KEY")}},
        "pid": os.getpid(), "pgid": os.getpgid(0), "sid": os.getsid(0), "problems": problems}}

def record():
    tmp = os.path.join(STATE, f"seen-{{n}}.json.tmp")
    with open(tmp, "w") as f:
        json.dump(seen, f)
    os.replace(tmp, os.path.join(STATE, f"seen-{{n}}.json"))

if problems:
    record()
    sys.stderr.write("fake claude: " + "; ".join(problems) + "\n")
    sys.exit(3)
if sc.get("hang"):
    if sc.get("ignore_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    kid = subprocess.Popen([sys.executable, "-c",
        "import signal, time\n"
        + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if sc.get("ignore_term") else "")
        + "time.sleep(600)"])
    seen["grandchild"] = kid.pid
    record()
    while True:
        time.sleep(1)
record()
if "signal" in sc:
    os.kill(os.getpid(), sc["signal"])
    time.sleep(5)
if "result" in sc:
    sys.stdout.write(json.dumps(sc["result"]))
    sys.exit(0)
sys.stdout.write(sc.get("stdout", ""))
sys.stderr.write(sc.get("stderr", ""))
sys.exit(sc.get("rc", 0))
'''


def result(structured=None, *, result_text="Done.", usage=None, is_error=False,
           subtype="success", model="claude-haiku-4-5") -> dict:
    """A `claude -p --output-format json` result object like the real CLI prints."""
    out = {"type": "result", "subtype": subtype, "is_error": is_error, "num_turns": 2,
           "result": result_text, "session_id": "00000000-0000-0000-0000-000000000000",
           "usage": usage or {"input_tokens": 10, "output_tokens": 50,
                              "cache_creation_input_tokens": 300, "cache_read_input_tokens": 2000},
           "modelUsage": {model: {"inputTokens": 10, "outputTokens": 50}}}
    if structured is not None:
        out["structured_output"] = structured
    return out


class FakeClaude:
    def __init__(self, bin_dir: Path, state_dir: Path):
        self.bin_dir = Path(bin_dir)
        self.state = Path(state_dir)
        self.exe = self.bin_dir / "claude"

    def path_env(self, base: dict | None = None) -> dict:
        """An environment with the fake first on PATH (start from `base`, default os.environ)."""
        env = dict(os.environ if base is None else base)
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', os.defpath)}"
        return env

    def seen(self) -> list[dict]:
        """What each run recorded, in run order."""
        runs = sorted(self.state.glob("seen-*.json"), key=lambda p: int(p.stem.split("-")[1]))
        return [json.loads(p.read_text()) for p in runs]

    def runs(self) -> int:
        return len(list(self.state.glob("run-*")))


def install(bin_dir: Path, state_dir: Path, scenarios: list[dict]) -> FakeClaude:
    bin_dir, state_dir = Path(bin_dir), Path(state_dir)
    bin_dir.mkdir(parents=True, exist_ok=True)
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "scenarios.json").write_text(json.dumps(scenarios))
    exe = bin_dir / "claude"
    exe.write_text(SCRIPT.format(python=sys.executable, state=str(state_dir)))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return FakeClaude(bin_dir, state_dir)
