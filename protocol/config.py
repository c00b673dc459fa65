"""The typed configuration: one TOML file, every key overridable by `AUTOHARNESS_<NAME>`.

Nested keys take the section as prefix: `reflector.backend` ↔ `AUTOHARNESS_REFLECTOR_BACKEND`.
Invalid values are an error naming the key, never a silent default.
"""

import errno
import os
import stat
import tomllib
from typing import Any, Literal

import msgspec

from claude_autoharness.protocol import paths

DEFAULT_MODEL = "claude-haiku-4-5"


class _Section(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    pass


class CaptureConfig(_Section):
    max_record_bytes: int = 4_000
    max_window_bytes: int = 200_000
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
    backend: Literal["auto", "anthropic", "claude", "none"] = "auto"
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


class ConfigError(Exception):
    pass


_POSITIVE = {
    "reflect_every", "persist_interval_s", "fsync_interval_s", "idle_flush_after_s",
    "session_retention_days",
    "max_connections",
    "capture.max_record_bytes", "capture.max_window_bytes", "capture.digest_max_bytes",
    "reflector.concurrency", "reflector.max_attempts", "reflector.max_tokens",
    "reflector.timeout_s", "reflector.step_timeout_s", "promoter.max_body_lines",
    "library.maturity_turns", "library.capacity_project", "library.capacity_user",
    "reflector.batch_max_requests", "reflector.batch_max_bytes", "reflector.batch_poll_s",
    "reflector.batch_poll_max_s", "library.stale_after_turns", "library.max_archive_share",
}
_NON_NEGATIVE = {"library.curate_every", "sync.every_s"}


def _env_overrides(env: dict[str, str]) -> dict:
    """Map AUTOHARNESS_<NAME> / AUTOHARNESS_<SECTION>_<NAME> onto the config tree."""
    out: dict = {}
    for field in Config.__struct_fields__:
        default = getattr(Config(), field)
        if isinstance(default, msgspec.Struct):
            for sub in default.__struct_fields__:
                key = f"AUTOHARNESS_{field}_{sub}".upper()
                if key in env and f"{field}.{sub}" not in FILE_ONLY:
                    out.setdefault(field, {})[sub] = _env_value(env[key], getattr(default, sub))
        else:
            key = f"AUTOHARNESS_{field}".upper()
            if key in env:
                out[field] = _env_value(env[key], default)
    return out


# Lists of tables have no sensible one-line form: they are set in the file only.
FILE_ONLY = {"redaction.extra_rules"}


def _env_value(raw: str, default):
    if isinstance(default, bool):
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        return raw  # left for validation to reject with the key's name
    if isinstance(default, int):
        try:
            return int(raw)
        except ValueError:
            return raw
    if isinstance(default, float):
        try:
            return float(raw)
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


def load(path: str | None = None, env: dict[str, str] | None = None) -> Config:
    """Read the config file (missing is fine) and the environment; raise ConfigError if invalid."""
    path = path or paths.config_file()
    env = dict(os.environ) if env is None else env
    data: dict = {}
    try:
        with open(_open_regular(path), "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        pass
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e}") from None
    data = _merge(data, _env_overrides(env))
    try:
        cfg = msgspec.convert(data, Config)
    except msgspec.ValidationError as e:
        raise ConfigError(f"{path} (or an AUTOHARNESS_* variable): invalid config: {e}") from None
    for dotted in sorted(_POSITIVE):
        obj: Any = cfg
        for part in dotted.split("."):
            obj = getattr(obj, part)
        if obj <= 0:
            raise ConfigError(f"{path}: invalid config: `{dotted}` must be > 0 (got {obj})")
    for dotted in sorted(_NON_NEGATIVE):
        section, key = dotted.split(".")
        obj = getattr(getattr(cfg, section), key)
        if obj < 0:
            raise ConfigError(f"{path}: invalid config: `{dotted}` must be >= 0 (got {obj})")
    if cfg.library.max_archive_share > 1:
        raise ConfigError(f"{path}: invalid config: `library.max_archive_share` is a share of "
                          f"a layer, at most 1 (got {cfg.library.max_archive_share})")
    return cfg
