"""The one error type of `autoharnessctl`.

The rule every verb follows: a verb prints its answer on stdout and returns its exit code, 0,
or non-zero only for a negative answer it has printed in full (a held intent re-validation
refused, a failed doctor check, an inactive service, a failed sync round). Anything that keeps
it from answering (wrong arguments, a missing file, a refused change, the daemon down) it
raises: a `CtlError`, or one of the errors `ctl.main` words the same way (the daemon's, the
config's, an `OSError`). `main` prints `autoharnessctl[ VERB]: MESSAGE` on stderr, without a
traceback, and exits with the error's code.
"""


class CtlError(Exception):
    """A problem the operator can fix. `code` is the exit status (1; 2 for a usage error; 0
    where a failure must not fail the caller, as for a hook); `verb` names the command in the
    printed line when the message needs it (`autoharnessctl replay: ...`)."""

    def __init__(self, message: str, *, code: int = 1, verb: str = ""):
        super().__init__(message)
        self.message = message
        self.code = code
        self.verb = verb

    def line(self) -> str:
        """The line `main` prints on stderr."""
        who = f"autoharnessctl {self.verb}" if self.verb else "autoharnessctl"
        return f"{who}: {self.message}"
