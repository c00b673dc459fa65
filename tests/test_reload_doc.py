"""Which settings a config reload applies: the daemon's list of those read once at start is
the list docs/configuration.md gives, and a reload names exactly the ones it changed."""

import re

from claude_autoharness.daemon.live import FIXED_AT_START, fixed_changes
from claude_autoharness.protocol.config import Config, LearningsConfig
from conftest import REPO


def _documented() -> list[str]:
    doc = (REPO / "docs" / "configuration.md").read_text()
    section = doc.split("## What a reload applies", 1)[1].split("\n#", 1)[0]
    return re.findall(r"^- `([a-z_.]+)`: ", section, re.M)


def test_the_doc_lists_exactly_the_settings_fixed_at_start():
    """docs/configuration.md's list is the daemon's FIXED_AT_START, key for key, in order."""
    assert _documented() == list(FIXED_AT_START)


def test_every_fixed_key_is_a_setting_and_a_reload_names_those_it_changed():
    """Each listed key names a real setting; a reload that changes some of them and other keys
    names exactly the listed ones it changed."""
    old = Config()
    assert fixed_changes(old, Config()) == []
    new = Config(reflect_every=7, log_level="debug", max_connections=9,
                 learnings=LearningsConfig(lookback_days=old.learnings.lookback_days + 1))
    assert fixed_changes(old, new) == ["max_connections", "log_level", "learnings.lookback_days"]
