"""claude_autoharness: a per-user daemon that lets a Claude Code agent learn from its own work.

The checkout's top level is the package's: `protocol/`, `client/` and `daemon/` are its
subpackages, which import each other relatively, so the code reads the same in the checkout
and installed. `__main__.py` beside this file makes `python -m claude_autoharness` the CLI.
"""

from .protocol import VERSION as __version__

__all__ = ["__version__"]
