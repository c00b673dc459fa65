"""What several verbs share: the JSON output, argument types, and the note every verb that
queues or waits for reflection jobs prints when they cannot run."""

from __future__ import annotations

import argparse
import json
import sys

from ...protocol import messages as m
from ...protocol import replies as r
from ...protocol.words import waiting_reason
from ..conn import DaemonError, DaemonUnreachable, ask

JSON_HELP = "print JSON instead of text"


def print_json(obj) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True, default=str))


def ago(ts: float | None, now: float) -> str:
    """How long before `now` a time was, for people (`5s ago`, `3m ago`, `1.5h ago`)."""
    if not ts:
        return "never"
    d = max(0.0, now - ts)
    if d < 60:
        return f"{d:.0f}s ago"
    if d < 3600:
        return f"{d / 60:.0f}m ago"
    return f"{d / 3600:.1f}h ago"


def count(text: str, flag: str = "") -> int:
    """An argparse type: a whole number >= 0 (`partial(count, flag="--x")` names its option)."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{flag} wants a whole number >= 0, not {text!r}".lstrip())
    return int(text)


def seconds(text: str) -> float:
    """An argparse type: `--timeout`'s number of seconds > 0."""
    try:
        v = float(text)
    except ValueError:
        v = 0.0
    if not v > 0:
        raise argparse.ArgumentTypeError(f"--timeout wants a number of seconds > 0, not {text!r}")
    return v


def waiting_note(st: r.Status) -> str:
    """The line every verb that queues or waits for jobs prints when they cannot run."""
    why = waiting_reason(st)
    if not why:
        return ""
    return (f"jobs wait and nothing is reflected: {why}. Then restart the daemon so it sees "
            "the change (`autoharnessctl restart`); "
            "`autoharnessctl doctor` checks it")


def warn_if_waiting() -> None:
    """A warning on stderr (the verb still succeeds) when queued jobs cannot run."""
    try:
        note = waiting_note(ask(m.Status(), r.Status, timeout=5))
    except (DaemonUnreachable, DaemonError):
        return
    if note:
        print(f"warning: {note}", file=sys.stderr)
