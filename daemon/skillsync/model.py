"""What a sync round decides for one skill, from three copies of it (pure: no files, no git).

`base` is the skill as the last completed round left the repository, `local` as this machine's
library has it now, `remote` as the repository's tip has it now. A copy is compared by its
status and its content files only: provenance and evidence travel with a skill but differ by
machine (each machine records its own landing), so they never make a change on their own.

- the same on both sides: nothing to do;
- changed only here: push; changed only there: take it in (through the promoter);
- changed on both: a clean three-way merge of every file lands on both sides; otherwise the
  copy changed last (by its recorded time, then machine id) wins on both machines and the other
  is kept in the skill's history, so nothing is lost and both machines agree without talking.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

LIVE = "live"
ARCHIVED = "archived"


@dataclass(frozen=True)
class Copy:
    status: str  # live | archived
    files: Mapping[str, bytes]  # SKILL.md and supporting files: what is compared and merged
    changed_at: float  # when the machine that made this version made it
    changed_by: str  # that machine's id
    reason: str = ""  # why it was archived
    extra: Mapping[str, bytes] = field(default_factory=dict)  # .autoharness/: travels, not compared

    def same(self, other: "Copy | None") -> bool:
        return other is not None and self.status == other.status and dict(self.files) == dict(
            other.files)


@dataclass(frozen=True)
class Step:
    kind: str  # none | push | take | merge | conflict
    files: Mapping[str, bytes] | None = None  # merge: the merged content
    winner: str = ""  # conflict: local | remote


Merge = Callable[[str, str, str], str | None]


def decide(base: Copy | None, local: Copy | None, remote: Copy | None, merge: Merge) -> Step:
    if remote is None:
        return Step("push") if local is not None else Step("none")
    if local is None:
        return Step("take")  # new there (or refused here before: offered again)
    if local.same(remote):
        return Step("none")
    if local.same(base):
        return Step("take")
    if remote.same(base):
        return Step("push")
    if local.status == remote.status == LIVE:
        merged = merge_files(base.files if base and base.status == LIVE else {},
                             local.files, remote.files, merge)
        if merged is not None:
            return Step("merge", files=merged)
    return Step("conflict", winner=winner(local, remote))


def winner(local: Copy, remote: Copy) -> str:
    """The deterministic rule both machines apply to the same two copies: the later change
    wins; equal times fall to the higher machine id."""
    return "local" if (local.changed_at, local.changed_by) > (remote.changed_at,
                                                              remote.changed_by) else "remote"


def merge_files(base: Mapping[str, bytes], ours: Mapping[str, bytes],
                theirs: Mapping[str, bytes], merge: Merge) -> dict[str, bytes] | None:
    """Every file merged three ways, or None when any one cannot be: a file changed on one
    side only takes that side; changed on both, its texts are merged line by line."""
    out: dict[str, bytes] = {}
    for rel in sorted(set(base) | set(ours) | set(theirs)):
        b, o, t = base.get(rel), ours.get(rel), theirs.get(rel)
        if o == t:
            pick = o
        elif o == b:
            pick = t
        elif t == b:
            pick = o
        elif o is None or t is None:
            return None  # removed on one side, changed on the other
        else:
            try:
                text = merge((b or b"").decode(), o.decode(), t.decode())
            except UnicodeDecodeError:
                return None
            if text is None:
                return None
            pick = text.encode()
        if pick is not None:
            out[rel] = pick
    return out
