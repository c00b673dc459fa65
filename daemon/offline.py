"""The CLI's one door into the daemon's code: what runs in the CLI's own process, because no
daemon is needed or none answers.

- a capture packet for a transcript, and its human-readable form;
- a replay dry run, through the reflector pool's own job pipeline (the same packet cut, prompt,
  saved-lesson filter and intake as a real job) into a throwaway queue;
- marker reports and saves on the files themselves, and the marker rule;
- which reflector backend this environment would use;
- the skill library as `skills export` and `skills publish` read it (typed, read-only), and
  the atomic write `install` uses;
- Claude Code's skill listing as predicted from its files (`skills listing`, status, doctor).

Importing this module costs nothing beyond the standard library (and one plain constant of the
promoter's): each function imports what it needs, so the verbs that only talk to the socket
never load the daemon's dependencies.
"""

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

# The promoter's temp-file prefix (a plain constant): an export's temp dirs carry it too.
from .jobchanges import JobBook
from .promote.plan import TMP_PREFIX as TMP_PREFIX

if TYPE_CHECKING:
    from ..protocol.replies import (
        Intent,
        LearningsSaved,
        ListingSummary,
        Packet,
        SkillInfo,
        SyncInfo,
    )
    from .promote.library import ReviewBranch, SkillFile


class OfflineError(Exception):
    """What went wrong, said for the user (the CLI prints it as is)."""


# ---- capture -----------------------------------------------------------------------------------

def capture_packet(path: str, start: int = 0) -> "Packet":
    """The packet a model would receive for `path` from byte `start`, redacted with the
    configured rules. Only transcripts under the transcript roots are read."""
    from ..protocol.config import load as load_config
    from .capture.packet import build_packet
    from .capture.source import TranscriptRefused, resolve, transcript_roots
    from .live import make_redactor

    cfg = load_config()
    try:
        roots = transcript_roots(cfg.capture.transcript_roots)
        packet = build_packet(resolve(path, roots), start, cfg.capture, make_redactor(cfg),
                              roots=roots)
    except TranscriptRefused as e:
        raise OfflineError(f"not reading {path}: {e.reason}") from None
    except OSError as e:
        raise OfflineError(f"cannot read {path}: {e.strerror}") from None
    return packet


def destination() -> str:
    """Where the configured backend would send a window, in words (from here, not the daemon)."""
    from ..protocol import config
    from .reflect import backends

    try:
        cfg = config.load().reflector
    except config.ConfigError as e:
        return f"unknown: {e}"
    return backends.available(cfg)["destination"]


def format_packet(packet: "Packet") -> str:
    """A capture packet (as `capture_packet` or the daemon returns it) for reading."""
    from .capture.packet import format_packet as fmt

    return fmt(packet)


# ---- replay ------------------------------------------------------------------------------------

def valid_session_id(sid: str) -> bool:
    from .sessions import valid_session_id as valid

    return valid(sid)


def stage_transcript(path: str, sid: str) -> str:
    """A private copy of the named transcript where the daemon may read it: the daemon reads
    transcripts only under its roots, and the file named here may live anywhere."""
    import shutil

    from ..protocol import paths
    from .capture.source import open_transcript
    from .persist import dirs

    dirs.ensure_private_dir(paths.state_dir())
    dirs.ensure_private_dir(paths.replays_dir())
    dst = os.path.join(paths.replays_dir(), f"{sid}.jsonl")
    tmp = dst + ".tmp"
    with open(open_transcript(path, None), "rb") as src, \
            open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
        shutil.copyfileobj(src, out)
    os.replace(tmp, dst)
    return dst


def replay_dry_run(events: list[dict], path: str) -> "list[Intent]":
    """Play hook events through the session state machine and run every job they create
    through the reflector pool's own pipeline, in this process: the packet is cut and
    redacted, the prompt carries the project's live skills and the window's fresh markers,
    lessons already queued from markers are left out, and proposals are judged at intake —
    into a throwaway queue. Nothing reaches the daemon, its state or the skill tree.

    `path` (the transcript the events name) is read where it is: the user named it."""
    import tempfile
    import time

    import anyio
    import msgspec

    from ..protocol.config import load as load_config
    from . import sessions as sm
    from .events import Events
    from .intents import IntentQueue
    from .live import Live, new_id
    from .projects import ProjectSwitches
    from .reflect import backends
    from .reflect.pipeline import Reflection
    from .reflect.pool import ReflectorPool

    _log_warnings_to_stderr()  # stdout carries the intents
    cfg = load_config()
    here = os.path.dirname(os.path.abspath(path))
    cfg = msgspec.structs.replace(cfg, capture=msgspec.structs.replace(
        cfg.capture, transcript_roots=[*cfg.capture.transcript_roots, here]))
    backend = backends.choose_backend(cfg.reflector)
    if backend == "none":
        raise OfflineError(f"{backends.available(cfg.reflector)['reason']} in this shell's "
                           "environment (a dry run reflects here, not in the daemon, whose "
                           "environment `autoharnessctl status` shows under `reflector`)")
    print(f"dry run: reflecting in this process with the {backend} backend of this shell's "
          "environment, not the daemon's", file=sys.stderr)
    live = Live.build(cfg)
    decoder = msgspec.json.Decoder(sm.HookEvent)
    sessions: dict[str, sm.Session] = {}
    jobs: list[sm.Job] = []
    for ev in events:
        jobs += sm.apply_event(sessions, decoder.decode(msgspec.json.encode(ev)),
                               now=time.time(), reflect_every=cfg.reflect_every, make_id=new_id)
    book = _Book(sessions)
    projects = ProjectSwitches()
    with tempfile.TemporaryDirectory(prefix="ah-replay-") as tmp:
        queue = IntentQueue(os.path.join(tmp, "intents.jsonl"))
        queue.load()
        counters = _NoCounters()
        reflection = Reflection(counters, queue, live, ledger=counters,
                                save_window=lambda job_id, text: None)
        pool = ReflectorPool(book, counters, reflection, projects=projects, events=Events())

        async def run_all() -> None:
            for job in jobs:
                book.table[job.id] = job
                await pool.run_job(job)
                if job.status != "done":
                    raise OfflineError(f"the reflection failed: {job.last_error}")

        anyio.run(run_all)
        return queue.list()


def _log_warnings_to_stderr() -> None:
    import logging
    import sys

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
                        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr))


class _Book(JobBook):
    """The pool's job book for a dry run: in memory, nothing journaled."""

    def __init__(self, sessions):
        self.sessions = sessions
        self.table: dict = {}

    def jobs(self):
        return list(self.table.values())

    def session(self, session_id):
        return self.sessions.get(session_id)

    async def record_jobs(self, jobs, session=None) -> None:
        for j in jobs:
            self.table[j.id] = j

    def watch(self):
        import anyio

        return anyio.Event()

    def changed(self) -> None:
        pass


class _NoCounters:
    """A dry run counts nothing and records nothing in the ledger."""

    def job_finished(self, ok) -> None:
        pass

    def tokens_on(self, day, backend="") -> int:
        return 0

    def add_tokens(self, day, n, backend="") -> None:
        pass

    def captured(self, packet, session_id: str = "") -> None:
        pass

    def refused(self, path, reason) -> None:
        pass

    def record_usage(self, **call) -> None:
        pass

    def record_calls(self, s) -> None:
        pass


# ---- learnings ---------------------------------------------------------------------------------

def lookback_days() -> int:
    """The configured marker lookback (7 when the config cannot be read)."""
    from ..protocol.config import load as load_config

    try:
        return load_config().learnings.lookback_days
    except Exception:
        return 7


def markers_of_transcript(path: str) -> list:
    """Unprocessed markers of one transcript (processed ids are its project's)."""
    from .learnings.markers import scan_file, slug_for
    from .learnings.save import pending
    from .learnings.state import load

    return pending(scan_file(path), load(slug_for(path)).processed_ids)


def slug_of_transcript(path: str) -> str:
    from .learnings.markers import slug_for

    return slug_for(path)


def slug_of_project(project_root: str) -> str:
    from .learnings import service

    return service.slug_of(project_root)


def project_markers(slug: str) -> list:
    """Unprocessed markers of a project's recent transcripts, scanned from the files."""
    from .learnings import service

    return service.project_markers(slug, None, lookback_days=lookback_days())


def print_report(markers: list, *, as_json: bool, listing: bool, silent_if_empty: bool,
                 plugin: bool = False) -> None:
    """`plugin`: the plugin's commands are in effect (`/autoharness:save-learnings`)."""
    from .learnings import report as rp

    if as_json:
        import json

        print(json.dumps(rp.report_json(markers), indent=2))
        return
    if not markers:
        if not silent_if_empty:
            print(rp.NO_MARKERS)
        return
    print(rp.transcript_listing(markers, plugin=plugin) if listing
          else rp.session_start_report(markers, plugin=plugin))


def save_learnings(project: str, transcripts: list[str], *,
                   dry_run: bool) -> "LearningsSaved":
    """The save on the files themselves (no daemon), with the configured redactor: a
    redaction config that cannot be loaded fails the save (never weaker redaction)."""
    from ..protocol.config import load as load_config
    from .intents import IntentQueue
    from .learnings import service
    from .live import make_redactor

    try:
        redactor = make_redactor(load_config())
    except Exception as e:  # fail closed
        raise OfflineError(f"cannot load the redaction config: {e}") from None
    queue = None
    if not dry_run:
        queue = IntentQueue()
        queue.load()
    return service.save_project(
        project, None, queue, lookback_days=lookback_days(), transcripts=transcripts,
        dry_run=dry_run, redactor=redactor)


def rule_text() -> str:
    from .learnings.context import rule_text as text

    return text()


# ---- the reflector -----------------------------------------------------------------------------

def reflector_available(cfg, env: Mapping[str, str]) -> dict:
    """Which backend this environment would use, and why (never the key itself)."""
    from .reflect.backends.base import available

    return available(cfg, env)


# ---- files and the library ---------------------------------------------------------------------

def write_atomic(path: str, data: bytes, mode: int = 0o600) -> None:
    from .persist.files import write_atomic as write

    write(path, data, mode)


def list_skills(project_root: str | None) -> "list[SkillInfo]":
    """The configured library's skills, live then archived, as `skills list` shows them."""
    from ..protocol.config import load as load_config
    from .promote import library

    return library.list_skills(load_config().promoter, project_root)


def listing_summary(cfg, project_root: str | None) -> "ListingSummary":
    """Claude Code's skill listing for a session in `project_root`, predicted from files."""
    from .listing.view import project_summary

    return project_summary(cfg, project_root)


def skill_files(skill_dir: str) -> "list[SkillFile]":
    """A skill's files, autoharness's own included and each marked as which, read without
    following a symlink: what an export copies."""
    from .promote import library

    return library.skill_files(skill_dir)


def review_branch(project: str) -> "ReviewBranch":
    """The project's git-mode review branch with the configured promoter settings."""
    from ..protocol.config import load as load_config
    from .promote import library

    return library.review_branch(load_config().promoter, project)


def sync_init(remote: str) -> "SyncInfo":
    """`sync init REMOTE`: set the sync repository up; ValueError says why it could not be."""
    from .skillsync import rounds
    from .skillsync.gitrepo import GitError

    try:
        return rounds.init(remote)
    except GitError as e:
        raise ValueError(f"the remote does not answer: {e.reason}") from None
    except rounds.Busy as e:
        raise ValueError(str(e)) from None


def sync_round() -> "SyncInfo":
    """One sync round in this process (no daemon runs): skills travel, counts do not (the
    daemon counts the turns). ValueError: not set up, or a round is already running."""
    from ..protocol.config import load as load_config
    from .promote.land import Promoter
    from .skillsync import rounds

    cfg = load_config()
    pr = Promoter(cfg.promoter, library=cfg.library)
    pr.recover()
    try:
        return rounds.run(pr, cfg.sync, counts=False)
    except (rounds.NotSetUp, rounds.Busy) as e:
        raise ValueError(str(e)) from None


def project_switch(project: str) -> tuple[bool, str, str]:
    """(enabled, problem, path) of a project's off switch file, read as the daemon reads it
    (a malformed one is off, with the problem)."""
    from .projects import SWITCH_FILE, read_switch

    path = os.path.join(project, SWITCH_FILE)
    return (*read_switch(path), path)
