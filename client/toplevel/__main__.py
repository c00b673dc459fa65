"""`python -m claude_autoharness ...` is `autoharnessctl ...` (for when the scripts are not on PATH)."""

from claude_autoharness.client.ctl import main

if __name__ == "__main__":
    main()
