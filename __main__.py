"""`python -m claude_autoharness ...` is `autoharnessctl ...`, with the Python of the venv the
package is installed in (pipx's and uv's venvs are their own: there, run the programs)."""

from .client.ctl import main

if __name__ == "__main__":
    main()
