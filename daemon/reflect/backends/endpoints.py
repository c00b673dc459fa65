"""What the `openai` backend knows of an endpoint beyond one call: whether it is on this
machine, and which output mode `auto` found it answers (remembered for the daemon's life, read
by status on the event loop while worker threads write it: guarded by a lock)."""

import threading
import urllib.parse

_detected: dict[tuple[str, str], str] = {}  # (base_url, model) -> the mode that worked
_lock = threading.Lock()


def is_loopback(base_url: str) -> bool:
    """Whether `base_url` names this machine (127.0.0.0/8, ::1, localhost)."""
    host = (urllib.parse.urlsplit(base_url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    import ipaddress  # only when the backend is configured: the idle daemon does without

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def mode_in_use(cfg) -> str:
    """The output mode status shows: the configured one, or what `auto` found (or `auto`)."""
    if cfg.openai_output != "auto":
        return cfg.openai_output
    with _lock:
        return _detected.get((cfg.openai_base_url, cfg.openai_model), "auto")


def remember(cfg, mode: str) -> None:
    """The mode that answered, for `auto` to start with next time."""
    if cfg.openai_output == "auto":
        with _lock:
            _detected[(cfg.openai_base_url, cfg.openai_model)] = mode
