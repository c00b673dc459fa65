"""The checks of the config's strings: each key a URL, a model, a key, a program, a branch or
a path is used as, with what it must be in words. Pure; `config.load` raises the error, naming
where the value came from."""

import os
import typing


def _url(v: str) -> str:
    from urllib.parse import urlsplit

    if not v:
        return ""
    try:
        u = urlsplit(v)
        ok = u.scheme in ("http", "https") and bool(u.hostname) and _one_word(v) == ""
    except ValueError:
        ok = False
    return "" if ok else ("an http:// or https:// URL with a host (such as "
                          "`https://api.anthropic.com`, or `http://127.0.0.1:11434/v1` for "
                          "Ollama), or empty for the default")


def _one_word(v: str) -> str:
    return "" if v and v.isprintable() and not any(c.isspace() for c in v) else \
        "one word with no spaces or control characters"


def _name(v: str) -> str:
    return "" if not _one_word(v) else "a model name, one word with no spaces"


def _branch(v: str) -> str:
    bad = (_one_word(v) or v.startswith(("-", "/")) or v.endswith(("/", ".", ".lock"))
           or ".." in v or "@{" in v or "//" in v or any(c in v for c in "~^:?*[\\"))
    return "a git branch name such as `autoharness/skills`" if bad else ""


def _secret(v: str) -> str:
    return "" if not v or not _one_word(v) else \
        "one line with no spaces (the key as the console shows it), or empty"


def _program(v: str) -> str:
    return "" if v and v.isprintable() else "a program name or path such as `claude`"


def _absolute(v: str) -> str:
    return "" if v.isprintable() and os.path.isabs(v) else "a list of absolute directory paths"


# Every string key's check: what it must be in words, "" when the value is fine.
STRINGS: dict[str, typing.Callable[[str], str]] = {
    "reflector.base_url": _url,
    "reflector.model": _name,
    "reflector.api_key": _secret,
    "reflector.openai_base_url": _url,
    "reflector.openai_api_key": _secret,
    "reflector.claude_path": _program,
    "promoter.git_branch": _branch,
    "capture.transcript_roots": _absolute,
}


def string_problem(cfg) -> tuple[str, str, str] | None:
    """(dotted key, what it must be, the value) of the first string that fails its check."""
    for dotted, check in STRINGS.items():
        obj = cfg
        for part in dotted.split("."):
            obj = getattr(obj, part)
        for value in obj if isinstance(obj, list) else [obj]:
            wants = check(value)
            if wants:
                return dotted, wants, value
    return None
