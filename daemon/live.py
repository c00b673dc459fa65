"""What a config reload replaces: the config, its redactor and the promoter built on both.

Parts hold the one `Live` and read its fields when they need them, so a SIGHUP reaches every
part at once and nothing keeps a stale promoter or redactor. The few settings read once at
start are `FIXED_AT_START` (docs/configuration.md lists the same, checked by a test).
"""

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from ..protocol.config import Config, ConfigError
from .capture.redact import Redactor, redactor_for
from .promote.land import Promoter
from .promote.statedir import StateDir, promote_state_dir

# Keys a reload does not change in a running daemon (they apply at its next start), and which
# part read them once. Every other key applies the next time a part reads `Live.cfg`.
FIXED_AT_START: dict[str, str] = {
    "max_connections": "the connection cap, set when the socket opens",
    "log_level": "logging, configured once",
    "watch": "whether the transcript watcher runs",
    "capture.transcript_roots": "the transcript watcher's roots (jobs, capture and marker "
                                "reports read the new roots at once)",
    "learnings.lookback_days": "how far back the watcher's first scan reads (marker reports and "
                               "saves read the new value at once)",
}


@dataclass
class Live:
    cfg: Config
    redactor: Redactor
    promoter: Promoter
    sources: dict[str, str] = field(default_factory=dict)  # key set -> the file or variable

    @classmethod
    def build(cls, cfg: Config, turns: Callable[[str, str | None], int] | None = None,
              sources: dict[str, str] | None = None) -> "Live":
        """The parts a config implies; a bad redaction rule is a ConfigError naming it.

        `turns(layer, project_root)` is the layer's turn count, which the promoter's library
        lifecycle judges skills by; `sources` says where each key of `cfg` that is set came from.
        """
        redactor = make_redactor(cfg)
        promoter = Promoter(cfg.promoter, redactor=redactor, library=cfg.library,
                            listing=cfg.listing, turns=turns,
                            statedir=StateDir(promote_state_dir()))
        return cls(cfg, redactor, promoter, dict(sources or {}))

    def replace(self, other: "Live") -> None:
        self.cfg, self.redactor, self.promoter = other.cfg, other.redactor, other.promoter
        self.sources = other.sources


def fixed_changes(old: Config, new: Config) -> list[str]:
    """The `FIXED_AT_START` keys whose value a reload changed: they wait for the next start."""
    def value(cfg: Config, key: str) -> object:
        obj: object = cfg
        for part in key.split("."):
            obj = getattr(obj, part)
        return obj

    return [k for k in FIXED_AT_START if value(old, k) != value(new, k)]


def make_redactor(cfg: Config) -> Redactor:
    """The configured redactor; a bad extra rule is a config error naming it."""
    try:
        return redactor_for(cfg.redaction)
    except ValueError as e:
        raise ConfigError(f"invalid config: redaction: {e}") from None


def new_id() -> str:
    return uuid.uuid4().hex[:16]
