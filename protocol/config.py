"""The typed configuration: one TOML file, every key overridable by `AUTOHARNESS_<NAME>`.

Nested keys take the section as prefix: `reflector.backend` ↔ `AUTOHARNESS_REFLECTOR_BACKEND`.
Invalid values are an error naming the key, never a silent default.
"""

import difflib
import errno
import functools
import math
import os
import re
import stat
import tomllib
import typing
from typing import Any, Literal

import msgspec

from . import paths
from .config_strings import string_problem
from .words import printable

DEFAULT_MODEL = "claude-haiku-4-5"


class _Section(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    pass


class CaptureConfig(_Section):
    max_record_bytes: int = 4_000
    max_window_bytes: int = 200_000
    max_summary_bytes: int = 32_000
    max_tool_bytes: int = 1_500
    digest_exchanges: int = 20
    digest_max_chars: int = 200
    digest_max_bytes: int = 20_000
    digest_max_scan_bytes: int = 4 * 1024 * 1024
    # directories besides $CLAUDE_CONFIG_DIR/projects whose files may be read as transcripts
    transcript_roots: list[str] = []


class RedactionConfig(_Section):
    # extra rules: {kind = "...", pattern = "..."}; allow: regexes whose matches are kept
    extra_rules: list[dict[str, str]] = []
    allow: list[str] = []


class ReflectorConfig(_Section):
    backend: Literal["auto", "anthropic", "claude", "openai", "none"] = "auto"
    model: str = DEFAULT_MODEL
    concurrency: int = 2
    max_attempts: int = 5
    max_tokens: int = 4_096
    timeout_s: float = 120.0
    step_timeout_s: float = 300.0  # any other step of a job (reading, listing) stuck this long fails it
    daily_token_budget: int = 0  # 0 = off
    max_intents_per_job: int = 3
    api_key: str = ""
    base_url: str = ""
    claude_path: str = "claude"
    # the `openai` backend: any OpenAI-compatible chat-completions endpoint (Ollama, llama.cpp's
    # server, vLLM, LM Studio, LiteLLM, OpenRouter); `openai_output` is how it is asked for the
    # reply's JSON: a forced tool call, a JSON-schema response format, or `auto` (tools first)
    openai_base_url: str = ""
    openai_model: str = ""
    openai_api_key: str = ""
    openai_output: Literal["auto", "tools", "json_schema"] = "auto"
    # per kind of work (reflect, learn, curate, repair): "backend" or "backend:model"
    routes: dict[str, str] = {}
    # per backend: tokens a day (0 = off), beside the overall daily_token_budget
    backend_budgets: dict[str, int] = {}
    # model -> [input, output] USD per million tokens, beside Anthropic's list prices
    prices: dict[str, list[float]] = {}
    backoff_base_s: float = 2.0
    # replay --batch: Message Batches limits and polling (first poll, doubling up to the max)
    batch_max_requests: int = 100_000
    batch_max_bytes: int = 200 * 1024 * 1024
    batch_poll_s: float = 30.0
    batch_poll_max_s: float = 600.0


class PromoterConfig(_Section):
    # git: project-layer landings become commits on `git_branch` (never working-tree files)
    mode: Literal["auto", "review", "git"] = "auto"
    git_branch: str = "autoharness/skills"
    max_body_lines: int = 40
    # a learned description at most: Claude Code lists every skill's in a small shared budget
    max_description_chars: int = 250


class LearningsConfig(_Section):
    teach: bool = True
    lookback_days: int = 7


class LibraryConfig(_Section):
    """The skill library's lifecycle: probation length, per-layer capacity, curator cadence."""

    maturity_turns: int = 50  # turns a new (or restored) skill is on probation
    capacity_project: int = 20  # graduated autoharness skills kept per project
    capacity_user: int = 10  # graduated autoharness skills kept in the user layer
    curate_every: int = 25  # reflection jobs between curator runs; 0 = off
    stale_after_turns: int = 20  # turns a skill naming missing paths is kept before its archive
    max_archive_share: float = 0.25  # of a layer's autoharness skills, archived in one pass at most


class ListingConfig(_Section):
    """Claude Code's skill listing: what autoharness predicts of it and how it stays within it."""

    context_tokens: int = 200_000  # the context window Claude Code sizes the listing budget by
    budget_share: float = 0.5  # of the listing budget, what autoharness's skills may take
    bundled_chars: int = 0  # what Claude Code's own bundled skills take; 0 = as measured
    reminders: bool = True  # remind the model of a live learned skill a prompt matches
    remind_hand_written: bool = False  # and of hand-written skills
    reminder_max_chars: int = 600  # one prompt's reminders, at most


class SyncConfig(_Section):
    """The user layer's sync repository (`autoharnessctl sync init REMOTE` sets it up)."""

    every_s: float = 0.0  # the daemon runs a round this often; 0 = only `autoharnessctl sync`
    evidence: bool = True  # send the redacted evidence quotes with the skills


class Config(_Section):
    reflect_every: int = 50
    persist_interval_s: float = 2.0
    fsync_interval_s: float = 1.0  # journal appends reach the disk at least this often
    idle_flush_after_s: float = 1_800.0
    # sessions quiet this long (their count spent) are forgotten, unfinished jobs this old ended
    session_retention_days: float = 14.0
    autostart: bool = True
    max_connections: int = 256  # open client connections; fewer if the descriptor limit is low
    watch: bool = True
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    capture: CaptureConfig = msgspec.field(default_factory=CaptureConfig)
    redaction: RedactionConfig = msgspec.field(default_factory=RedactionConfig)
    reflector: ReflectorConfig = msgspec.field(default_factory=ReflectorConfig)
    promoter: PromoterConfig = msgspec.field(default_factory=PromoterConfig)
    learnings: LearningsConfig = msgspec.field(default_factory=LearningsConfig)
    library: LibraryConfig = msgspec.field(default_factory=LibraryConfig)
    sync: SyncConfig = msgspec.field(default_factory=SyncConfig)
    listing: ListingConfig = msgspec.field(default_factory=ListingConfig)


class ConfigError(Exception):
    """An invalid config: `str(e)` says what is wrong and where (the file and line, or the
    variable) and ends with the fix; `key` is the dotted key at fault ("" for a syntax error),
    `what` the message and `fix` the fix alone."""

    def __init__(self, message: str, *, key: str = "", fix: str = "") -> None:
        # what it echoes of the file or the environment never carries a control character
        message, key, fix = printable(message), printable(key), printable(fix)
        super().__init__(f"{message}; {fix}" if fix else message)
        self.what, self.key, self.fix = message, key, fix


MiB = 1024 * 1024
DAY = 86_400.0
# Every number's allowed range, inclusive (a test checks each numeric key has one). Lower bounds
# above 0 keep a typo from pinning a core (`1e-9` s) or turning a feature off (`nan`); upper
# bounds keep `inf` and absurd values out. Floats must also be finite.
RANGES: dict[str, tuple[float, float]] = {
    "reflect_every": (1, 1_000_000),
    "persist_interval_s": (0.01, 3_600),
    "fsync_interval_s": (0.01, 3_600),
    "idle_flush_after_s": (1, 30 * DAY),
    "session_retention_days": (0.001, 3_650),
    "max_connections": (1, 65_536),
    "capture.max_record_bytes": (1, 64 * MiB),
    "capture.max_window_bytes": (1, 64 * MiB),
    "capture.max_summary_bytes": (1, 64 * MiB),
    "capture.max_tool_bytes": (1, 64 * MiB),
    "capture.digest_exchanges": (0, 10_000),
    "capture.digest_max_chars": (1, 1 * MiB),
    "capture.digest_max_bytes": (1, 64 * MiB),
    "capture.digest_max_scan_bytes": (1, 1024 * MiB),
    "reflector.concurrency": (1, 64),
    "reflector.max_attempts": (1, 1_000),
    "reflector.max_tokens": (1, 1_000_000),
    "reflector.timeout_s": (0.01, DAY),
    "reflector.step_timeout_s": (0.01, DAY),
    "reflector.daily_token_budget": (0, 10**12),
    "reflector.max_intents_per_job": (1, 1_000),
    "reflector.backoff_base_s": (0.001, 3_600),
    "reflector.batch_max_requests": (1, 100_000),
    "reflector.batch_max_bytes": (1, 256 * MiB),
    "reflector.batch_poll_s": (0.01, DAY),
    "reflector.batch_poll_max_s": (0.01, DAY),
    "promoter.max_body_lines": (1, 10_000),
    "promoter.max_description_chars": (40, 1_024),  # 1,024: the skill format's own limit
    "learnings.lookback_days": (0, 3_650),
    "library.maturity_turns": (1, 1_000_000),
    "library.capacity_project": (1, 10_000),
    "library.capacity_user": (1, 10_000),
    "library.curate_every": (0, 1_000_000),
    "library.stale_after_turns": (1, 1_000_000),
    "library.max_archive_share": (0.001, 1),  # a share of a layer's autoharness skills
    "sync.every_s": (0, 30 * DAY),  # 0 = only `autoharnessctl sync`
    "listing.context_tokens": (1_000, 100_000_000),
    "listing.budget_share": (0.01, 1),
    "listing.bundled_chars": (0, 1_000_000),  # 0 = the measured width
    "listing.reminder_max_chars": (80, 10_000),
}
# A numeric key missing from RANGES (added without one) must at least be finite and >= 0.
DEFAULT_RANGE = (0, float("inf"))


@functools.cache
def _fields() -> dict[str, Any]:
    """Every dotted key of Config with its type (computed once; do not mutate)."""
    out: dict[str, Any] = {}
    for name, tp in typing.get_type_hints(Config).items():
        if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
            for sub, stp in typing.get_type_hints(tp).items():
                out[f"{name}.{sub}"] = stp
        else:
            out[name] = tp
    return out


def _num(v: float) -> str:
    return f"{v:g}" if isinstance(v, float) and not v.is_integer() else f"{int(v):,}".replace(",", "_")


def allowed(dotted: str) -> str:
    """What `dotted` accepts, in words: `an integer from 1 to 1_000_000`, `one of ...`."""
    tp = _fields().get(dotted)
    if typing.get_origin(tp) is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in typing.get_args(tp))
    if tp is bool:
        return "`true` or `false` (in a variable: 1/true/yes/on or 0/false/no/off)"
    if tp in (int, float):
        lo, hi = RANGES.get(dotted, DEFAULT_RANGE)
        kind = "an integer" if tp is int else "a finite number"
        return f"{kind} from {_num(lo)} to {_num(hi)}" if hi != float("inf") else \
            f"{kind} >= {_num(lo)}"
    if tp is str:
        return "a string"
    return "a list" if typing.get_origin(tp) is list else "a value of the documented type"


def _blame(dotted: str, path: str, env_vars: dict[str, str], env: dict[str, str]) -> tuple[str, str]:
    """(where the bad value came from, the fix): the variable if it set `dotted`, else the file."""
    var = env_vars.get(dotted)
    if var:
        return (f"{var}={env[var]!r}", f"fix or unset {var} where it is set (your shell, Claude "
                "Code's environment, or the service's)")
    default = repr(_get(Config(), dotted))
    return path, f"fix it in {path}, or remove that line for the default ({default})"


def _get(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


_TYPE_WORDS = {"str": "a string", "int": "an integer", "float": "a number", "bool": "a boolean",
               "array": "a list", "object": "a table"}


def _unknown(dotted: str) -> str:
    close = difflib.get_close_matches(dotted, list(_fields()), n=1)
    return f" (did you mean `{close[0]}`?)" if close else ""


def _env_overrides(env: dict[str, str], names: dict[str, str] | None = None) -> dict:
    """Map AUTOHARNESS_<NAME> / AUTOHARNESS_<SECTION>_<NAME> onto the config tree; `names`
    collects which variable set which dotted key (for messages)."""
    names = {} if names is None else names
    out: dict = {}
    for field in Config.__struct_fields__:
        default = getattr(Config(), field)
        if isinstance(default, msgspec.Struct):
            for sub in default.__struct_fields__:
                key = f"AUTOHARNESS_{field}_{sub}".upper()
                if key in env and f"{field}.{sub}" not in FILE_ONLY:
                    out.setdefault(field, {})[sub] = _env_value(env[key], getattr(default, sub))
                    names[f"{field}.{sub}"] = key
        else:
            key = f"AUTOHARNESS_{field}".upper()
            if key in env:
                out[field] = _env_value(env[key], default)
                names[field] = key
    return out


# Lists of tables and tables have no sensible one-line form: they are set in the file only.
FILE_ONLY = {"redaction.extra_rules", "reflector.routes", "reflector.backend_budgets",
             "reflector.prices"}


def _env_value(raw: str, default):
    if isinstance(default, bool):
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        return raw  # left for validation to reject with the key's name
    if isinstance(default, int | float):  # bool is handled above
        try:
            return type(default)(raw)
        except ValueError:
            return raw
    if isinstance(default, list):
        return [s for s in raw.split(",") if s]
    return raw


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def _open_regular(path: str) -> int:
    """An fd for `path` if it is a regular file; the open never blocks (a FIFO would freeze a
    SIGHUP reload, which runs on the daemon's event loop)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    return fd


AUTOSTARTED = ("AUTOHARNESS_STARTED_BY", "autostart")  # set by the hook that spawns a daemon


def settings_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment whose AUTOHARNESS_<KEY> variables may configure this process: none
    for a daemon a hook autostarted (its environment was a session's, which a repository can
    set; the hook passes no such variable either, this holds even if one slipped through)."""
    env = dict(os.environ) if env is None else env
    return {} if autostarted(env) else env


def autostarted(env=None) -> bool:
    """Whether this process is a daemon a hook's autostart spawned."""
    return (os.environ if env is None else env).get(AUTOSTARTED[0]) == AUTOSTARTED[1]


def load(path: str | None = None, env: dict[str, str] | None = None,
         sources: dict[str, str] | None = None) -> Config:
    """Read the config file (missing is fine) and the environment; raise ConfigError if invalid,
    naming the key, where its value came from (the file and line, or the variable), what it
    accepts, and the fix. `sources`, when given, is filled with where each key set came from:
    the file's path or the variable's name (keys left at their default are absent)."""
    path = path or paths.config_file()
    env = dict(os.environ) if env is None else env
    data: dict = {}
    try:
        with open(_open_regular(path), "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        pass
    except tomllib.TOMLDecodeError as e:
        at = re.search(r"line (\d+)", str(e))
        where = f" on line {at.group(1)}" if at else ""
        raise ConfigError(f"{path}: not valid TOML{where}: {e}",
                          fix=f"fix the syntax{where} of {path} (TOML: `key = value`, strings "
                          "in quotes, `[section]` headers)") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})",
                          fix=f"save {path} as UTF-8") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e}",
                          fix=f"make {path} a readable regular file, or remove it") from None
    names: dict[str, str] = {}
    found = _file_keys(data, path)
    data = _merge(data, _env_overrides(env, names))
    found.update(names)
    try:
        cfg = msgspec.convert(data, Config)
    except msgspec.ValidationError as e:
        raise _decode_error(str(e), path, names, env) from None
    for dotted, tp in _fields().items():
        if tp not in (int, float):
            continue
        obj = _get(cfg, dotted)
        lo, hi = RANGES.get(dotted, DEFAULT_RANGE)
        if not (math.isfinite(obj) and lo <= obj <= hi):
            where, fix = _blame(dotted, path, names, env)
            raise ConfigError(f"{where}: invalid config: `{dotted}` must be {allowed(dotted)} "
                              f"(got {obj!r})", key=dotted, fix=fix)
    bad = string_problem(cfg)
    if bad:
        dotted, wants, value = bad
        where, fix = _blame(dotted, path, names, env)
        raise ConfigError(f"{where}: invalid config: `{dotted}` must be {wants} (got {value!r})",
                          key=dotted, fix=fix)
    _check_routing(cfg.reflector, path)
    if sources is not None:  # only for a config that is valid: every key is then known
        sources.update(found)
    return cfg


def _file_keys(data: dict, path: str) -> dict[str, str]:
    """Each dotted key the file sets, mapped to the file."""
    out = {}
    for k, v in data.items():
        if isinstance(v, dict) and isinstance(getattr(Config(), str(k), None), msgspec.Struct):
            out.update({f"{k}.{sub}": path for sub in v})
        else:
            out[str(k)] = path
    return out


ROUTE_KINDS = ("reflect", "learn", "curate", "repair")
ROUTE_BACKENDS = ("anthropic", "claude", "openai")


def _check_routing(r: ReflectorConfig, path: str) -> None:
    """The reflector's tables: known kinds and backends, prices as two finite numbers >= 0."""
    def bad(key: str, what: str, fix: str) -> ConfigError:
        return ConfigError(f"{path}: invalid config: `reflector.{key}` {what}", key=f"reflector.{key}",
                           fix=f"{fix} in {path}")
    for kind, route in r.routes.items():
        if kind not in ROUTE_KINDS:
            raise bad("routes", f"names an unknown kind of work {kind!r}",
                      "use " + ", ".join(f"`{k}`" for k in ROUTE_KINDS))
        backend, _, model = route.partition(":")
        if backend not in ROUTE_BACKENDS or (_ and not model.strip()):
            raise bad("routes", f"routes {kind} to {route!r}",
                      'give "backend" or "backend:model" with a backend among '
                      + ", ".join(f"`{b}`" for b in ROUTE_BACKENDS))
    for backend, n in r.backend_budgets.items():
        if backend not in ROUTE_BACKENDS or not 0 <= n <= 10**12:
            raise bad("backend_budgets", f"has {backend!r} = {n!r}",
                      "give a backend among " + ", ".join(f"`{b}`" for b in ROUTE_BACKENDS)
                      + " and tokens a day from 0 (off) to 10**12")
    for model, pair in r.prices.items():
        if len(pair) != 2 or not all(math.isfinite(v) and 0 <= v <= 10_000 for v in pair):
            raise bad("prices", f"prices {model!r} as {pair!r}",
                      "give [input, output] USD per million tokens, each from 0 to 10_000")


def _decode_error(text: str, path: str, names: dict[str, str], env: dict[str, str]) -> ConfigError:
    """msgspec's `Expected int, got str - at $.a.b` as a ConfigError naming the key's source."""
    at = re.search(r"at `\$\.([\w.]+)`", text)
    dotted = at.group(1) if at else ""
    unknown = re.search(r"unknown field `([^`]+)`", text)
    if unknown:
        from .words import doc
        key = f"{dotted}.{unknown.group(1)}" if dotted else unknown.group(1)
        return ConfigError(f"{path}: invalid config: unknown key `{key}`{_unknown(key)}", key=key,
                           fix=f"remove or correct it in {path} ({doc('configuration.md')} "
                           "lists every key)")
    if dotted in _fields():
        where, fix = _blame(dotted, path, names, env)
        got = re.search(r"got `(\w+)`|value (.+) - at", text)
        seen = ""
        if got:
            seen = f" (got {_TYPE_WORDS.get(got.group(1), got.group(1)) if got.group(1) else got.group(2)})"
        return ConfigError(f"{where}: invalid config: `{dotted}` must be {allowed(dotted)}{seen}",
                           key=dotted, fix=fix)
    return ConfigError(f"{path}: invalid config: {text}", key=dotted,
                       fix=f"`[{dotted}]` is a section: give it `key = value` lines"
                       if dotted else f"correct it in {path}")
