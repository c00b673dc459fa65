"""Claude Code's own files as the listing reads them: its settings files in the order it
merges them, and a bounded JSON read that follows no link and takes anything malformed as
empty (the listing is advice: a file it cannot read counts as absent)."""

import json
import os

from ...protocol import paths
from ..promote.skilltree import read_nofollow


def settings_files(project_root: str | None) -> list[str]:
    """User, then project, then local settings: a later file wins."""
    files = [paths.user_settings_file()]
    if project_root:
        files += [paths.project_settings_file(project_root),
                  paths.project_settings_file(project_root, local=True)]
    return files


def read_json(path: str, limit: int) -> dict:
    data = read_nofollow(os.path.dirname(path) or ".", os.path.basename(path), limit=limit)
    if data is None:
        return {}
    try:
        v = json.loads(data)
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}
