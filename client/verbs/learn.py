"""`autoharnessctl learn TEXT...` (`/learn`): a priority reflection job on a session, with the
user's lesson as guidance and evidence."""

from __future__ import annotations

import sys

from ...protocol import messages as m
from ...protocol import replies as r
from ..conn import ask
from ..errors import CtlError
from .common import warn_if_waiting


def add_parser(sub) -> None:
    s = sub.add_parser("learn", help="/learn: reflect now on this session with your guidance")
    s.add_argument("text", nargs="+", metavar="TEXT", help="the lesson; `-` reads it from stdin")
    s.add_argument("--session", metavar="ID", help="default: the most recently active session")
    s.add_argument("--layer", choices=("project", "user"),
                   help="the skill layer the lesson is for (default: the reflector chooses)")
    s.set_defaults(func=do_learn)


def do_learn(args) -> int:
    # `-` reads the lesson from stdin: /learn passes it through a quoted heredoc, the one
    # spelling that keeps quotes, backticks, `$` and newlines verbatim and that Claude Code's
    # Bash permission checker lets through (it refuses any `$VAR` or `$(...)` expansion)
    if args.text == ["-"] and sys.stdin.isatty():
        print("type the lesson, then Ctrl-D on a line of its own:", file=sys.stderr)
    text = sys.stdin.read() if args.text == ["-"] else " ".join(args.text)
    text = text.strip()
    if not text:
        raise CtlError("say what to learn: autoharnessctl learn \"always run make check before committing\"",
                       code=2)
    out = ask(m.Learn(text=text, session_id=args.session or None, layer=args.layer), r.LearnQueued)
    where = f"session {out.session_id}" + ("" if out.transcript_path else
                                            ", whose transcript the daemon has not seen")
    print(f"queued learn job {out.job} ({where}); "
          "see `autoharnessctl queue list` once it has run")
    warn_if_waiting()
    return 0
