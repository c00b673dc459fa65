"""`autoharnessctl demo`: see the whole loop work once, with no model backend, in a
throw-away home that is deleted afterwards (client/demo.py)."""

from __future__ import annotations


def add_parser(sub) -> None:
    s = sub.add_parser(
        "demo", help="see the loop work once (a DEMONSTRATION: scripted reflector, throw-away "
        "home, nothing left behind)",
        description="Run the whole loop once on this machine without a model: a throw-away "
        "home (its own state and Claude config dirs, deleted afterwards), a real daemon whose "
        "reflector is a script standing in for a model, a recorded session driven through the "
        "real hook client, the lesson it teaches landed as a skill by the real promoter, and "
        "the context the next session gets. Your own daemon, settings and skills are not "
        "touched.")
    s.set_defaults(func=do_demo)


def do_demo(args) -> int:
    from .. import demo

    return demo.run()
