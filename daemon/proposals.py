"""The proposal schema shared by the reflector backends, `/learn`, markers and the promoter.

A proposal is what a model (or a marker) suggests; it becomes an intent in the durable queue.
Per-action fields are optional here and checked by `check_shape`, so that a malformed proposal
can still be recorded as a rejected intent.
"""

import msgspec

# The shapes the queue replies carry live with the replies; these names are the daemon's.
from ..protocol.replies import Check as Check
from ..protocol.replies import Finding as Finding
from ..protocol.replies import Intent as Intent
from ..protocol.replies import Proposal as Proposal
from ..protocol.replies import Verdict as Verdict
from ..protocol.replies import VerdictRecord as VerdictRecord

ACTIONS = ("create", "update", "patch", "add_file", "remove_file", "archive")
LAYERS = ("project", "user")

CHECK_ACTIONS = ("create", "update")  # the proposals that may carry a check
CHECK_MODES = ("remind", "ask", "deny")  # what a check does about a call once confirmed

REQUIRED = {
    "create": ("description", "body"),
    "update": ("description", "body"),
    "patch": ("old", "new"),
    "add_file": ("path", "content"),
    "remove_file": ("path",),
    "archive": (),
}


def check_shape(p: Proposal) -> list[str]:
    """Return schema problems (empty when the proposal is well-shaped)."""
    problems = []
    if p.action not in ACTIONS:
        problems.append(f"action must be one of {', '.join(ACTIONS)} (got {p.action!r})")
        return problems
    if p.layer not in LAYERS:
        problems.append(f"layer must be project or user (got {p.layer!r})")
    if not p.skill:
        problems.append("skill is required")
    for f in REQUIRED[p.action]:
        if getattr(p, f) is None:
            problems.append(f"{p.action} needs `{f}`")
    if p.check is not None and p.action not in CHECK_ACTIONS:
        problems.append(f"only {' and '.join(CHECK_ACTIONS)} carry a `check` (set it to null)")
    return problems


def proposal_from_obj(obj: object) -> tuple[Proposal | None, list[str]]:
    """Convert an untrusted decoded JSON object into a Proposal, or say why not."""
    try:
        p = msgspec.convert(obj, Proposal)
    except msgspec.ValidationError as e:
        return None, [f"schema: {e}"]
    return p, check_shape(p)


SOURCES = ("reflector", "learn", "marker", "curator", "lifecycle")
CURATOR_SESSION = "curate-"  # a curator job's session id names its layer: curate-<layer>


def curator_session(layer: str) -> str:
    return CURATOR_SESSION + layer


def curator_layer(session_id: str | None) -> str | None:
    """The layer a curator job (known by its session id) was shown."""
    if session_id and session_id.startswith(CURATOR_SESSION):
        return session_id[len(CURATOR_SESSION):]
    return None


STATUSES = ("queued", "landed", "rejected", "held")


# ---- feedback: the reflector's verdicts on skills a window touched ------------------------------

VERDICTS = ("helped", "ignored", "harmful", "missed")
LOADED_VERDICTS = ("helped", "ignored", "harmful")  # need the window to show the skill loaded
VERDICT_STATUSES = ("queued", "accepted", "rejected")


def verdict_from_obj(obj: object) -> tuple[Verdict | None, list[str]]:
    """Convert an untrusted decoded JSON object into a Verdict, or say why not."""
    try:
        v = msgspec.convert(obj, Verdict)
    except msgspec.ValidationError as e:
        return None, [f"schema: {e}"]
    problems = []
    if v.verdict not in VERDICTS:
        problems.append(f"verdict must be one of {', '.join(VERDICTS)} (got {v.verdict!r})")
    if v.layer not in LAYERS:
        problems.append(f"layer must be project or user (got {v.layer!r})")
    if not v.skill:
        problems.append("skill is required")
    return v, problems
