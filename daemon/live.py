"""What a config reload replaces: the config, its redactor and the promoter built on both.

Parts hold the one `Live` and read its fields when they need them, so a SIGHUP reaches every
part at once and nothing keeps a stale promoter or redactor.
"""

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from claude_autoharness.daemon.capture.redact import Redactor, redactor_for
from claude_autoharness.daemon.promote.land import Promoter
from claude_autoharness.protocol.config import Config, ConfigError


@dataclass
class Live:
    cfg: Config
    redactor: Redactor
    promoter: Promoter

    @classmethod
    def build(cls, cfg: Config, turns: Callable[[str, str | None], int] | None = None) -> "Live":
        """The parts a config implies; a bad redaction rule is a ConfigError naming it.

        `turns(layer, project_root)` is the layer's turn count, which the promoter's library
        lifecycle judges skills by.
        """
        redactor = make_redactor(cfg)
        return cls(cfg, redactor, Promoter(cfg.promoter, redactor=redactor, library=cfg.library,
                                           turns=turns))

    def replace(self, other: "Live") -> None:
        self.cfg, self.redactor, self.promoter = other.cfg, other.redactor, other.promoter


def make_redactor(cfg: Config) -> Redactor:
    """The configured redactor; a bad extra rule is a config error naming it."""
    try:
        return redactor_for(cfg.redaction)
    except ValueError as e:
        raise ConfigError(f"invalid config: redaction: {e}") from None


def new_id() -> str:
    return uuid.uuid4().hex[:16]
