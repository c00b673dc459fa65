"""A user's own redaction rule cannot stall the daemon: rules from config run on a
linear-time engine, and what that engine cannot run is a config error that names the fix."""

import json
import threading

import pytest

from claude_autoharness.daemon.capture.redact import Redactor
from harness import Daemon, ctl

# catastrophic on a backtracking engine: 2^n ways to split a run of `a`s that does not end
# the text
NESTED = '(a+)+$'


def test_a_nested_quantifier_in_a_user_rule_does_not_stall_a_real_daemon(home):
    """`(a+)+$` in `extra_rules`, with and without needles, and a transcript holding a long run
    of `a` not at the end: the daemon's `capture` finishes, `status` answers while it runs,
    and `stop` stops it."""
    (home["home"] / "config.toml").write_text(
        "[[redaction.extra_rules]]\n"
        f"kind = \"evil\"\npattern = '{NESTED}'\n\n"
        "[[redaction.extra_rules]]\n"
        f"kind = \"evil_needle\"\npattern = '{NESTED}'\nneedles = \"aaaa\"\n")
    proj = home["claude"] / "projects" / "-p"
    proj.mkdir()
    transcript = proj / "s-evil.jsonl"
    rec = {"type": "user", "message": {"role": "user", "content": "a" * 6000 + "!"}}
    transcript.write_text(json.dumps(rec) + "\n")
    d = Daemon(home["home"])
    try:
        done: dict = {}

        def capture():
            done["capture"] = ctl("capture", "--transcript", str(transcript), "--json")

        t = threading.Thread(target=capture)
        t.start()
        status = [ctl("status", "--json") for _ in range(3)]
        t.join(120)
        assert not t.is_alive(), "capture did not finish"
        assert all(s.returncode == 0 for s in status), [s.stderr for s in status]
        assert done["capture"].returncode == 0, done["capture"].stderr
        assert "aaaaaaaa" in done["capture"].stdout  # nothing matched: the text is kept
        assert ctl("stop").returncode == 0
        assert d.proc.wait(30) == 0
    finally:
        d.stop()


@pytest.mark.parametrize("pattern", [r"(?<=x)secret", r"(?!a)b", r"(\w+)\1"])
def test_a_user_rule_the_linear_engine_cannot_run_is_an_error_naming_the_fix(pattern):
    """Lookaround and backreferences have no linear-time matching: refused, naming the rule,
    the construct and what to do instead."""
    with pytest.raises(ValueError) as e:
        Redactor([{"kind": "mine", "pattern": pattern}])
    msg = str(e.value)
    assert "'mine'" in msg and "linear-time" in msg and "lookbehind" in msg


def test_user_rules_still_redact_and_allow_patterns_still_keep():
    """A user rule with and without needles redacts; a nested quantifier is accepted (it is
    harmless on RE2) and matches what it says."""
    r = Redactor([{"kind": "ticket", "pattern": r"TICKET-\d{4}"},
                  {"kind": "run", "pattern": NESTED, "needles": "aaaa"}], allow=[r"^TICKET-0000$"])
    out, counts = r.redact("TICKET-1234 TICKET-0000 xaaaa")
    assert out == "[REDACTED:ticket] TICKET-0000 x[REDACTED:run]" and counts == {"ticket": 1, "run": 1}
