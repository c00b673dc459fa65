"""Marker reports and saves for a project. The daemon owns marker state: saves go through here
so nothing is reported again."""

from typing import assert_never

import anyio

from ...protocol import messages as m
from ..book import Book
from ..capture.source import transcript_roots
from ..events import Events, IntentsQueued
from ..intents import IntentQueue
from ..learnings import report as lreport
from ..learnings import service as lservice
from ..learnings.markers import MarkerIndexer
from ..live import Live


class Learnings:
    def __init__(self, book: Book, live: Live, markers: MarkerIndexer, intents: IntentQueue, *,
                 events: Events):
        """`events` hears `IntentsQueued` after a save (it wakes the promoter)."""
        self.book = book
        self.live = live
        self.markers = markers
        self.intents = intents
        self.events = events

    async def cmd_learnings(self, req: m.Learnings) -> m.Reply:
        if not req.project:
            return m.Error(code="bad_request", message="name the project directory")
        project = req.project
        lookback = self.live.cfg.learnings.lookback_days
        roots = transcript_roots(self.live.cfg.capture.transcript_roots)
        match req.op:
            case "report":
                ms = await anyio.to_thread.run_sync(
                    lambda: lservice.project_markers(lservice.slug_of(project), self.markers,
                                                     lookback_days=lookback,
                                                     transcripts=req.transcripts, roots=roots))
                return m.Ok(data=lreport.report(ms))
            case "save":
                redactor = self.live.redactor
                res = await anyio.to_thread.run_sync(
                    lambda: lservice.save_project(project, self.markers, self.intents,
                                                  lookback_days=lookback,
                                                  transcripts=req.transcripts,
                                                  dry_run=req.dry_run, redactor=redactor,
                                                  roots=roots))
                self.book.tables_changed()  # the marker index forgot what was saved
                self.events.publish(IntentsQueued(source="markers"))
                return m.Ok(data=res)
            case _:
                assert_never(req.op)
