"""claude_autoharness: a per-user daemon that lets a Claude Code agent learn from its own work.

The import package's top level. Its code lives in three subpackages, mapped from the
repository's top-level folders: `claude_autoharness.protocol`, `.client` and `.daemon`. This
folder only holds the top level itself, so `python -m claude_autoharness` runs the CLI.
"""

from claude_autoharness.protocol import VERSION as __version__

__all__ = ["__version__"]
