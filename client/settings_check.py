"""Doctor's `settings` check: where each effective setting came from, and whether this
environment's locations would stop a hook's autostart."""

from __future__ import annotations

import json

from ..protocol import replies as r
from .checks import Check


def check_settings(cfg, sources: dict[str, str], status: r.Status | None,
                   untrusted: str = "") -> Check:
    """Where each setting that is not at its default comes from (the config file, or a
    variable of this environment, which only an explicit start uses), where the running
    daemon's came from, and whether this environment's locations would stop an autostart."""
    def value(key: str) -> str:
        obj = cfg
        for part in key.split("."):
            obj = getattr(obj, part)
        if key == "reflector.api_key":
            return "(set)"
        if key == "reflector.base_url":  # never the credentials a URL may carry
            from urllib.parse import urlsplit

            u = urlsplit(obj)
            host = f"[{u.hostname}]" if ":" in (u.hostname or "") else u.hostname or ""
            obj = u._replace(netloc=host + (f":{u.port}" if u.port else "")).geturl()
        return json.dumps(obj)

    def origin(src: str) -> str:
        if not src.startswith("AUTOHARNESS_"):
            return src
        return (f"{src} in this environment: used by an explicit start (`autoharnessctl "
                "start`, the service), not by a hook's autostart")

    here = "; ".join(f"{k} = {value(k)} (from {origin(src)})" for k, src in sorted(sources.items()))
    detail = here or "every setting at its default"
    if status is not None:
        daemon = status.settings
        theirs = ", ".join(f"{k} (from {src})" for k, src in sorted(daemon.sources.items()))
        how = "by a hook's autostart" if daemon.started_by == "autostart" else "explicitly"
        detail += (f"; the running daemon was started {how} and has "
                   f"{theirs or 'every setting at its default'}")
    if untrusted:
        return Check("settings", True, detail + f"; a hook here would not start the daemon: "
                     f"{untrusted}", "set that variable to an absolute path of yours outside "
                     "the project, or start the daemon yourself (`autoharnessctl start`)",
                     warning=True)
    return Check("settings", True, detail)
