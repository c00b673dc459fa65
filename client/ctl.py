"""`autoharnessctl`: the operator CLI. Each verb is a module of client/verbs/ (its parser and
its `do_<verb>`); this builds the parser from them, calls the verb, and words every error one
way (client/errors.py): `autoharnessctl[ VERB]: MESSAGE` on stderr, no traceback."""

import argparse
import os
import sys

from ..protocol import VERSION
from ..protocol.config import ConfigError
from ..protocol.words import printable
from . import conn
from .conn import DaemonError, DaemonUnreachable
from .errors import CtlError
from .verbs import (
    capture,
    curate,
    demo,
    doctor,
    flush,
    install,
    learn,
    learnings,
    pause,
    queue,
    replay,
    report,
    restart,
    resume,
    service,
    skills,
    start,
    status,
    stop,
    sync,
)
from .verbs.common import seconds

# In the order `autoharnessctl --help` lists them.
VERBS = (status, flush, start, stop, restart, pause, resume, capture, learn, queue, skills,
         curate, replay, report, learnings, sync, install, service, doctor, demo)

FIRST_STEPS = """first steps:
  autoharnessctl start      start the daemon in the background
  autoharnessctl install    wire the hooks into Claude Code
  autoharnessctl doctor     check everything; each failure says its fix
  autoharnessctl status     see sessions being counted
  autoharnessctl demo       see the whole loop once (no model needed; nothing left behind)

`autoharnessctl COMMAND --help` shows a command's options."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="autoharnessctl",
        description="Operate the autoharness daemon: see what it counted, flush sessions, "
        "inspect what it learned.",
        epilog=FIRST_STEPS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"autoharnessctl {VERSION}")
    p.add_argument("--timeout", type=seconds, default=conn.DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help="how long to wait for the daemon's answer (default "
                   f"{conn.DEFAULT_TIMEOUT_S:g})")
    sub = p.add_subparsers(dest="verb", metavar="COMMAND")
    for verb in VERBS:
        verb.add_parser(sub)
    return p


def _quiet_broken_pipe() -> int:
    """The reader went away (`autoharnessctl status | head -2`): stop without a traceback.
    stdout is pointed at /dev/null so the interpreter's final flush cannot raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141  # what a shell reports for a command ended by SIGPIPE


def _timeout_everywhere(parser: argparse.ArgumentParser) -> None:
    """`--timeout` is accepted after any verb too (`autoharnessctl status --timeout 30`)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sp in set(action.choices.values()):
                if "--timeout" not in sp._option_string_actions:
                    sp.add_argument("--timeout", type=seconds, default=argparse.SUPPRESS,
                                    metavar="SECONDS", help="how long to wait for the daemon")
                _timeout_everywhere(sp)


def _help_when_bare(parser: argparse.ArgumentParser) -> None:
    """A verb that takes a subcommand (`queue`, `skills`, `learnings`, `service`...) given none
    prints its own help, as bare `autoharnessctl` does, instead of an argparse error."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sp in set(action.choices.values()):
                for a in sp._actions:
                    if a.choices and not a.option_strings:  # the subcommand positional
                        a.required = False
                        if not isinstance(a, argparse._SubParsersAction):
                            a.nargs = "?"
                        sp.set_defaults(bare_help=(sp, a.dest))


def _run(args) -> int:
    """The verb's exit code; every error it raises as one line on stderr and its code."""
    try:
        code = args.func(args)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except CtlError as e:
        sys.stdout.flush()  # what the verb printed before the error comes first
        print(printable(e.line()), file=sys.stderr)
        return e.code
    except (DaemonUnreachable, DaemonError, ConfigError) as e:  # config: a verb reads it itself
        print(printable(f"autoharnessctl: {e}"), file=sys.stderr)
        # the daemon refused the request's arguments: a usage error, as argparse's are
        return 2 if isinstance(e, DaemonError) and e.code == "bad_request" else 1
    except OSError as e:  # a file in the way, a full or read-only disk: one line, no traceback
        where = f"{e.filename}: " if e.filename else ""
        print(printable(f"autoharnessctl: {where}{e.strerror or e}"), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    _timeout_everywhere(parser)
    _help_when_bare(parser)
    args = parser.parse_args(argv)
    bare = getattr(args, "bare_help", None)
    if bare and getattr(args, bare[1], None) is None:  # `autoharnessctl queue`: its help
        bare[0].print_help()
        sys.exit(0)
    if not getattr(args, "func", None):  # bare `autoharnessctl`: say what it can do
        parser.print_help()
        sys.exit(0)
    conn.set_timeout(args.timeout)
    sys.exit(_run(args))
