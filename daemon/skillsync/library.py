"""The user layer as a sync round sees it, and every change a round makes to it.

Only autoharness-owned skills are read (live ones by the promoter's own ownership test,
archived ones from its archive); a hand-written skill is never read, sent or touched — a
remote skill of the same name is refused here. Every change goes through the promoter as a
landing of this machine: shaped, checked (well-formed, safe, contained, owned, the duplicate
guard against this library), journaled and recorded in history, with provenance naming the
machine the change came from.
"""

import os
import re
from dataclasses import dataclass

from ...protocol.replies import Finding, Outcome
from ..promote import guard, records, validate
from ..promote.land import Promoter
from ..promote.plan import PROVENANCE, PROVENANCE_DIR, SKILL_MD
from ..promote.skilltree import read_nofollow, read_provenance, scan_tree
from .model import ARCHIVED, LIVE, Copy

EVIDENCE_PREFIX = f"{PROVENANCE_DIR}/evidence/"
_EVIDENCE = re.compile(re.escape(EVIDENCE_PREFIX) + r"[0-9a-f]{64}\.txt")


@dataclass
class Local:
    copies: dict[str, Copy]  # autoharness's user-layer skills by name, live or archived
    hand_written: set[str]  # names of live user-layer skills that are not ours
    targets: dict[str, str]  # name -> the skill directory it lives (or lived) at


def _split(files: dict[str, bytes]) -> tuple[dict[str, bytes], dict[str, bytes]]:
    content = {r: b for r, b in files.items() if not r.startswith(PROVENANCE_DIR + "/")}
    extra = {r: b for r, b in files.items() if r.startswith(PROVENANCE_DIR + "/")}
    return content, extra


def _read_all(d: str) -> dict[str, bytes] | None:
    out = {}
    live, links = scan_tree(d)
    if links:
        return None  # not ours to send
    for rel in live:
        data = read_nofollow(d, rel)
        if data is None:
            return None
        out[rel] = data
    prov = read_nofollow(d, PROVENANCE)
    if prov is not None:
        out[PROVENANCE] = prov
    ev_dir = os.path.join(d, PROVENANCE_DIR, "evidence")
    if os.path.isdir(ev_dir) and not os.path.islink(ev_dir):
        for fn in sorted(os.listdir(ev_dir)):
            data = read_nofollow(d, EVIDENCE_PREFIX + fn)
            if data is not None:
                out[EVIDENCE_PREFIX + fn] = data
    return out


def _origin(landings: list[dict], machine: str) -> tuple[float, str]:
    """(when, by which machine) the copy's version was made: a landing taken in from another
    machine keeps that machine's time and id, so both sides judge a conflict alike."""
    if not landings:
        return 0.0, machine
    last = landings[-1]
    if last.get("source") == "sync" and isinstance(last.get("machine"), str):
        at = last.get("origin_at")
        return (float(at) if isinstance(at, int | float) else float(last["at"])), last["machine"]
    return float(last["at"]), machine


def _live_copy(d: str, machine: str) -> Copy | None:
    files = _read_all(d)
    if files is None:
        return None
    content, extra = _split(files)
    prov = read_provenance(d) or {}
    at, by = _origin(prov.get("landings") or [], machine)
    return Copy(status=LIVE, files=content, extra=extra, changed_at=at, changed_by=by)


def _archived_copy(meta: dict, machine: str) -> Copy | None:
    src = os.path.join(meta["path"], "skill")
    files = _read_all(src)
    if not files or SKILL_MD not in files:
        return None
    content, extra = _split(files)
    by, at = meta.get("machine"), meta.get("origin_at")
    return Copy(status=ARCHIVED, files=content, extra=extra,
                changed_at=float(at if isinstance(at, int | float) else meta["archived_at"]),
                changed_by=by if isinstance(by, str) else machine,
                reason=str(meta.get("reason") or ""))


def _unchanged(a: Copy | None, b: Copy | None) -> bool:
    return (a is None and b is None) or (a is not None and a.same(b))


class UserLayer:
    """The user layer of one machine as a sync round reads and changes it, through the
    promoter's API (every change a landing of this machine)."""

    def __init__(self, promoter: Promoter, machine: str):
        self.promoter, self.machine = promoter, machine
        root, _ = promoter.layer_root("user", None)
        assert root is not None  # the user layer always resolves
        self.root = root

    def read(self, only: str | None = None) -> Local:
        """The user layer as it is now; `only`: just that skill (a take-in re-reads one name
        under the round, not the whole library)."""
        copies: dict[str, Copy] = {}
        mine: set[str] = set()
        targets: dict[str, str] = {}
        try:
            names = [only] if only is not None else sorted(os.listdir(self.root))
        except OSError:
            names = []
        for name in names:
            d = os.path.join(self.root, name)
            if not validate.name_is_contained(name) or not os.path.isfile(os.path.join(d, SKILL_MD)):
                continue
            targets[name] = d
            if not self.promoter.owned(d):
                mine.add(name)
                continue
            copy = _live_copy(d, self.machine)
            if copy is not None:
                copies[name] = copy
        latest: dict[str, dict] = {}
        for meta in self.promoter.archives():
            if meta["layer"] != "user" or meta["name"] in copies or meta["name"] in mine \
                    or (only is not None and meta["name"] != only):
                continue
            if meta["name"] not in latest or meta["landing"] > latest[meta["name"]]["landing"]:
                latest[meta["name"]] = meta
        for name, meta in latest.items():
            copy = _archived_copy(meta, self.machine)
            if copy is not None:
                copies[name] = copy
                targets.setdefault(name, meta["target"])
        return Local(copies=copies, hand_written=mine, targets=targets)

    # ---- changes: each one a landing of the promoter -----------------------------------------

    def take(self, name: str, remote: Copy, expected: Copy | None) -> Outcome:
        """Make the local copy of `name` equal `remote`, unless the library moved since the
        round read it (then nothing is done: the next round sees the new state)."""
        now = self.read(name)
        if name in now.hand_written:
            return Outcome.rejected(Finding(family="owned", code="not_owned",
                                            message=f"{name} is a hand-written skill on this machine"))
        current = now.copies.get(name)
        if not _unchanged(current, expected):
            return Outcome.rejected(Finding(family="landing", code="moved",
                                            message="the skill changed here during the round"))
        origin = {"source": "sync", "machine": remote.changed_by, "origin_at": remote.changed_at,
                  "reason": f"synced from machine {remote.changed_by}"
                            + (f" ({remote.reason})" if remote.reason else "")}
        if remote.status == ARCHIVED:
            if current is None or current.status == ARCHIVED:
                return Outcome(status="landed")  # nothing here to archive
            return self.promoter.archive_owned(
                "user", name, None, origin, reason=remote.reason or "synced",
                meta={"machine": origin["machine"], "origin_at": origin["origin_at"]})
        if current is not None and current.status == ARCHIVED:
            out = self.promoter.restore(name, layer="user")
            if out.status != "landed":
                return out
            current = self.read(name).copies.get(name)
            if current is not None and current.same(remote):
                return out
        return self._write(name, remote, origin, create=current is None)

    def keep_in_history(self, name: str, loser: Copy, winner: Copy) -> Outcome:
        """A conflict's losing version goes into the skill's history (restorable with
        `skills revert`), and the winning one is landed back on top of it."""
        origin = {"source": "sync", "machine": loser.changed_by, "origin_at": loser.changed_at,
                  "reason": f"sync conflict: the version of machine {loser.changed_by}, kept in "
                            f"history (machine {winner.changed_by}'s version won)"}
        current = self.read(name).copies.get(name)
        if loser.status == LIVE and current is not None and current.status == LIVE:
            out = self._write(name, loser, origin, create=False)
            if out.status != "landed":
                return out
            win_origin = {"source": "sync", "machine": winner.changed_by,
                          "origin_at": winner.changed_at,
                          "reason": f"sync conflict: machine {winner.changed_by}'s version won"}
            return self._write(name, winner, win_origin, create=False)
        return Outcome(status="landed")

    def _write(self, name: str, copy: Copy, origin: dict, *, create: bool) -> Outcome:
        try:
            texts = {rel: data.decode("utf-8") for rel, data in copy.files.items()}
        except UnicodeDecodeError:
            return Outcome.rejected(Finding(family="well_formed", code="binary",
                                            message=f"{name} holds a file that is not UTF-8 text"))
        if SKILL_MD not in texts:
            return Outcome.rejected(Finding(family="well_formed", code="schema",
                                            message=f"{name} has no SKILL.md"))
        try:
            beside = {rel: data.decode("utf-8") for rel, data in copy.extra.items()}
        except UnicodeDecodeError:
            return Outcome.rejected(Finding(family="well_formed", code="binary",
                                            message=f"{name}: provenance that is not text"))
        base = records.parse_provenance(copy.extra.get(PROVENANCE, b"")) or {}
        base.pop("target", None)
        return self.promoter.land_user_skill(
            name, texts, origin, create=create, base_prov=base,
            extra={rel: data for rel, data in copy.extra.items() if _EVIDENCE.fullmatch(rel)},
            # what travels beside the skill is checked like it: no secret lands in a quote either
            also=guard.scan(beside, self.promoter.redactor))
