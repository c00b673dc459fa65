"""Small wording helpers both sides use in their messages (the CLI, and the daemon's own
lines such as the SessionStart report): counts, times and promoter findings in words."""

from __future__ import annotations

import time

from .replies import CheckAdherence, Finding, Learned, Status


def printable(text: str) -> str:
    """`text` with every control or other unprintable character escaped as Python writes it
    (`\\n`, `\\x1b`): what a message echoes of its input (a key, a path, a value) can then
    never start a new line in a log or a shell file, nor move a terminal's cursor."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


# Where the user documentation is online: an installed package (pipx, a wheel) has no docs/
# folder, so messages name pages by this address (the `Documentation` URL of pyproject.toml).
DOCS_URL = "https://github.com/claude-autoharness/claude-autoharness/blob/main/docs"


def doc(page: str) -> str:
    """The online address of a page of the docs (`doc("privacy.md#sync")`)."""
    return f"{DOCS_URL}/{page}"


def plural(n: int, word: str, many: str | None = None) -> str:
    """`1 event`, `2 events`, `0 events`; `many` spells an irregular plural."""
    if n == 1:
        return f"{n} {word}"
    return f"{n} {many or word + 's'}"


def day(ts: float | None) -> str:
    """A Unix time's local date (`2026-12-01`); "-" if none."""
    return time.strftime("%Y-%m-%d", time.localtime(ts)) if ts else "-"


def when(ts: float | None, unknown: str = "at an unknown time") -> str:
    """A Unix time as local date and time for people (`2026-12-01 10:04`); `unknown` if none."""
    if not isinstance(ts, int | float) or ts <= 0:
        return unknown
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def finding_text(f: Finding) -> str:
    """One promoter finding as a sentence with its code after it: the words say what happened,
    the code is what to search the docs for (`no version 3 of x (promote/no_version)`)."""
    code = f"{f.family}/{f.code}"
    msg = f.message.strip()
    return f"{msg} ({code})" if msg else code.replace("_", " ").replace("/", ": ", 1)


def findings_text(findings: list[Finding] | None, limit: int = 3) -> str:
    """Several findings joined with `; `, at most `limit` of them (the rest counted)."""
    findings = list(findings or [])
    out = "; ".join(finding_text(f) for f in findings[:limit])
    if len(findings) > limit:
        out += f"; and {plural(len(findings) - limit, 'more finding')}"
    return out


def indent(text: str) -> str:
    """Text indented four spaces a line, for a block under a label."""
    return "\n".join("    " + line for line in text.rstrip("\n").splitlines())


def adherence_line(a: CheckAdherence) -> str:
    """One project's figures for a check: "before: 7 violations in 40 `Bash` calls (3
    sessions); since landing: 1 in 52 (reminded 1)"."""
    done = [f"{k} {getattr(a, k)}" for k in ("reminded", "asked", "approved", "declined",
                                             "denied", "complied", "repeated") if getattr(a, k)]
    return (f"before: {plural(a.before_violations, 'violation')} in "
            f"{plural(a.before_calls, f'`{a.tool}` call')} "
            f"({plural(a.before_sessions, 'session')}); "
            f"since landing: {a.violations} in {plural(a.calls, 'call')}"
            + (f" ({', '.join(done)})" if done else ""))
def waiting_reason(st: Status) -> str:
    """Why reflection jobs cannot start ("" when they can): no backend, or the token budget."""
    if st.jobs.waiting:
        return st.jobs.waiting
    if st.reflector.backend == "none":
        return st.reflector.reason or "no reflector backend"
    return ""


def learned_words(x: Learned | None) -> str:
    """`learned by the reflector from session s1, 2026-12-01 10:02` ("" when unknown)."""
    if x is None:
        return ""
    who = {"reflector": "the reflector", "learn": "/learn", "marker": "a learning marker",
           "curator": "the curator", "operator": "you", "sync": "sync"}.get(x.source,
                                                                           x.source or "?")
    frm = " and ".join(f"{k} {v}" for k, v in (("session", x.session), ("machine", x.machine))
                       if v)
    out = f"learned by {who}" + (f" from {frm}" if frm else "")
    out += f", {when(x.at)}" if x.at else ""
    if x.adopted_at:
        out += f" in another home (managed here since {when(x.adopted_at)})"
    elif not x.here:
        out += " (in another home: not managed here)"
    return out
