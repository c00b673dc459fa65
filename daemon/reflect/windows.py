"""The evidence windows: the text each job (or batch item) was reflected on, kept (0600) in
the state dir under its job id until no intent needs it, so the promoter can check that a
proposal's evidence really was in what the model saw."""

import os

from ...protocol import paths
from ..persist.dirs import ensure_private_dir, write_private


def window_path(job_id: str) -> str:
    return os.path.join(paths.windows_dir(), f"{job_id}.txt")


def save_window(job_id: str, text: str) -> None:
    """Keep a job's window (blocking)."""
    ensure_private_dir(paths.windows_dir())
    write_private(window_path(job_id), text.encode())


def read_window(job_id: str) -> str | None:
    """A job's kept window, or None when there is none (never kept, or pruned)."""
    try:
        with open(window_path(job_id), "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None
