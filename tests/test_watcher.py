"""The transcript watcher (daemon/watcher.py): incremental tailing, rewrites, state, async."""

import os

import anyio
import msgspec
import pytest

from claude_autoharness.daemon.persist import state as st
from claude_autoharness.daemon.watcher import TranscriptIndex, TranscriptWatcher
from conftest import REAL

BIG = "spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"


class Recorder:
    """An indexer that keeps everything it is given."""

    def __init__(self):
        self.fed: dict[str, list[tuple[int, bytes]]] = {}
        self.resets: list[str] = []
        self.order: list[str] = []

    def feed(self, path, offset, data):
        self.fed.setdefault(path, []).append((offset, data))
        if path not in self.order:
            self.order.append(path)

    def reset(self, path):
        self.resets.append(path)
        self.fed.pop(path, None)

    def data(self, path) -> bytes:
        chunks = self.fed.get(path, [])
        for (o1, d1), (o2, _) in zip(chunks, chunks[1:], strict=False):
            assert o1 + len(d1) == o2  # contiguous, no overlap
        return b"".join(d for _, d in chunks)


class Clock:
    def __init__(self, t=1_000_000.0):
        self.t = t

    def __call__(self):
        return self.t


def _lines(name):
    return (REAL / name).read_bytes().splitlines(keepends=True)


def _append(path, data):
    with open(path, "ab") as f:
        f.write(data)


def _setup(short_tmp, **kw):
    projects = short_tmp / "projects"
    (projects / "-home-u-proj").mkdir(parents=True)
    index, rec = TranscriptIndex(clock=kw.pop("clock", Clock())), Recorder()
    w = TranscriptWatcher(projects, [index, rec], clock=index.clock, **kw)
    return projects, index, rec, w


def test_appends_are_indexed_incrementally(short_tmp):
    """Each scan reads only what was appended since the last one: bytes read equal bytes
    appended, indexers get exactly the file's lines once, in order, and the index knows the
    transcript's session, project, size and inode."""
    projects, index, rec, w = _setup(short_tmp)
    path = projects / "-home-u-proj" / "55604662-cf2a-4331-851a-ec234028f8ca.jsonl"
    path.write_bytes(b"")
    lines, appended = _lines("spotter/subagent.jsonl"), 0
    for i in range(0, len(lines), 7):
        chunk = b"".join(lines[i : i + 7])
        _append(path, chunk)
        appended += len(chunk)
        before = w.bytes_read
        w.scan_until_done(path)
        assert w.bytes_read - before == len(chunk)
        assert w.offset(str(path)) == appended
    assert w.bytes_read == appended == path.stat().st_size
    assert rec.data(str(path)) == path.read_bytes()
    e = index.get(str(path))
    assert e.size == appended and e.inode == path.stat().st_ino
    assert index.stats()["transcripts"] == 1 and index.stats()["bytes_indexed"] == appended


def test_partial_lines_wait_for_their_newline(short_tmp):
    """A half-written record is not fed; once its newline arrives it is fed whole. Bytes read
    stay about the bytes appended (the partial tail is read again, nothing else)."""
    projects, _, rec, w = _setup(short_tmp)
    path = projects / "-home-u-proj" / "s.jsonl"
    lines = _lines("spotter/short.jsonl")
    path.write_bytes(lines[0] + lines[1][:50])
    w.scan_path(path)
    assert rec.data(str(path)) == lines[0]
    _append(path, lines[1][50:])
    w.scan_path(path)
    assert rec.data(str(path)) == lines[0] + lines[1]
    assert w.bytes_read == len(lines[0]) + len(lines[1]) + 50


@pytest.mark.parametrize("per_pass", [256 * 1024, 3 * 1024 * 1024 - 1])
def test_big_appends_are_read_in_bounded_passes(short_tmp, per_pass):
    """A 3 MB append is read in passes of at most max_bytes_per_pass (each pass in 1 MiB
    reads, lines crossing read boundaries); what is fed is exactly the file."""
    projects, _, rec, w = _setup(short_tmp, max_bytes_per_pass=per_pass)
    path = projects / "-home-u-proj" / "big.jsonl"
    path.write_bytes((REAL / BIG).read_bytes())
    passes = 0
    while True:
        before = w.bytes_read
        more = w.scan_path(path)
        assert w.bytes_read - before <= per_pass
        passes += 1
        if not more:
            break
    assert passes >= 2
    assert rec.data(str(path)) == path.read_bytes()


def test_rewritten_files_reset_their_offsets(short_tmp):
    """A file that shrank, or was replaced by another inode, resets its indexers and is read
    again from a bounded tail (the first, partial line of that tail skipped)."""
    projects, index, rec, w = _setup(short_tmp, rewrite_tail_bytes=20_000)
    path = projects / "-home-u-proj" / "s.jsonl"
    lines = _lines("spotter/subagent.jsonl")
    path.write_bytes(b"".join(lines))
    w.scan_until_done(path)
    small = b"".join(lines[:3])
    path.write_bytes(small)  # compaction-style rewrite, shorter
    w.scan_until_done(path)
    assert rec.resets == [str(path)] and index.get(str(path)).bytes_indexed == len(small)
    assert rec.data(str(path)) == small
    new = short_tmp / "new.jsonl"
    new.write_bytes(b"".join(lines))
    os.replace(new, path)  # replaced: new inode, larger than the offset
    w.scan_until_done(path)
    assert len(rec.resets) == 2 and w.resets == 2
    got = rec.data(str(path))
    assert len(got) <= 20_000 and path.read_bytes().endswith(got)
    assert got.startswith(b'{"')  # whole lines only


def test_a_line_longer_than_a_pass_is_skipped(short_tmp):
    """A single line longer than max_bytes_per_pass is skipped in bounded passes (never
    buffered whole); the lines after it are fed."""
    projects, _, rec, w = _setup(short_tmp, max_bytes_per_pass=64 * 1024)
    path = projects / "-home-u-proj" / "s.jsonl"
    huge = b'{"x":"' + b"a" * 500_000 + b'"}\n'
    tail = b'{"type":"user"}\n'
    path.write_bytes(b'{"first":1}\n' + huge + tail)
    w.scan_until_done(path)
    assert rec.fed[str(path)] == [(0, b'{"first":1}\n'), (12 + len(huge), tail)]
    assert w.bytes_skipped == len(huge)


def test_state_round_trip_means_a_restart_reads_only_new_bytes(short_tmp):
    """Offsets and the index survive to_state/from_state through the snapshot's encoding (its
    typed `Watcher` table): after a restart only bytes appended since are read."""
    projects, index, _, w = _setup(short_tmp)
    path = projects / "-home-u-proj" / "s.jsonl"
    lines = _lines("spotter/tool_heavy.jsonl")
    path.write_bytes(b"".join(lines[:20]))
    w.scan_until_done(path)
    table = msgspec.json.decode(msgspec.json.encode(st.Watcher(w.to_state(), index.to_state())),
                                type=st.Watcher)
    wstate, istate = table.tails, table.index
    index2, rec2 = TranscriptIndex(), Recorder()
    index2.from_state(istate)
    w2 = TranscriptWatcher(projects, [index2, rec2])
    w2.from_state(wstate)
    tail = b"".join(lines[20:])
    _append(path, tail)
    for p in w2.transcripts():
        w2.scan_until_done(p)
    assert w2.bytes_read == len(tail)
    assert rec2.fed[str(path)] == [(len(b"".join(lines[:20])), tail)]
    assert index2.get(str(path)).bytes_indexed == path.stat().st_size
    for junk in ({"tails": {"files": {"x": "garbage"}}},  # ill-typed: never half-loaded
                 {"index": {"entries": {"y": [1, "no"]}}}, {"index": {"bytes_indexed": "no"}}):
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(junk, st.Watcher)


def test_catch_up_lists_newest_first_within_the_lookback(short_tmp):
    """The catch-up's list of transcripts holds those modified within the look-back, newest
    first, and leaves older ones alone."""
    clock = Clock(2_000_000.0)
    projects, _, rec, w = _setup(short_tmp, clock=clock)
    ages = {"old.jsonl": 10 * 86400, "mid.jsonl": 3600, "new.jsonl": 60}
    for name, age in ages.items():
        p = projects / "-home-u-proj" / name
        p.write_bytes(b'{"a":1}\n')
        os.utime(p, (clock.t - age, clock.t - age))
    for p in w.transcripts(lookback_s=7 * 86400):
        w.scan_until_done(p)
    assert [os.path.basename(p) for p in rec.order] == ["new.jsonl", "mid.jsonl"]


def test_a_failing_indexer_does_not_stop_the_others(short_tmp):
    """An indexer that raises is counted and skipped; the other indexers still get the data."""

    class Broken:
        def feed(self, path, offset, data):
            raise RuntimeError("boom")

        def reset(self, path):
            raise RuntimeError("boom")

    projects = short_tmp / "projects"
    (projects / "p").mkdir(parents=True)
    rec = Recorder()
    w = TranscriptWatcher(projects, [Broken(), rec])
    path = projects / "p" / "s.jsonl"
    path.write_bytes(b'{"a":1}\n')
    w.scan_path(path)
    assert rec.data(str(path)) == b'{"a":1}\n' and w.indexer_errors == 1


def test_last_growth_time_follows_the_injected_clock(short_tmp):
    """The index's last growth time (what idle flush looks at) moves only when the transcript
    grows, on the injected clock."""
    clock = Clock(100.0)
    projects, index, _, w = _setup(short_tmp, clock=clock)
    path = projects / "-home-u-proj" / "s.jsonl"
    path.write_bytes(b'{"a":1}\n')
    w.scan_path(path)
    assert index.get(str(path)).last_growth_at == 100.0
    clock.t = 2000.0
    w.scan_path(path)  # no growth
    assert index.get(str(path)).last_growth_at == 100.0
    _append(path, b'{"b":2}\n')
    w.scan_path(path)
    assert index.get(str(path)).last_growth_at == 2000.0


def test_deleted_transcripts_are_forgotten(short_tmp):
    """A transcript that disappears is dropped from the offsets and the index."""
    projects, index, _, w = _setup(short_tmp)
    path = projects / "-home-u-proj" / "s.jsonl"
    path.write_bytes(b'{"a":1}\n')
    w.scan_path(path)
    path.unlink()
    w.scan_path(path)
    assert index.get(str(path)) is None and w.offset(str(path)) == 0


def test_the_daemons_indexers_take_a_forgotten_transcript_without_error(short_tmp):
    """The indexers the daemon runs (transcript index, markers, the tool-call witness) all
    take the watcher's `forget(path)` of a deleted transcript: no indexer error."""
    from claude_autoharness.daemon.learnings.markers import MarkerIndexer
    from claude_autoharness.daemon.witness import ToolUseWitness

    projects = short_tmp / "projects"
    (projects / "-home-u-proj").mkdir(parents=True)
    index = TranscriptIndex(clock=Clock())
    w = TranscriptWatcher(projects, [index, MarkerIndexer(), ToolUseWitness()], clock=index.clock)
    path = projects / "-home-u-proj" / "s.jsonl"
    path.write_bytes(b'{"type":"user","message":{"role":"user","content":"hi"}}\n')
    w.scan_path(path)
    path.unlink()
    w.scan_path(path)
    assert w.indexer_errors == 0


async def _until(cond, *, poke=None, timeout=90.0):
    """Wait for `cond()`; `poke()` (e.g. another append) runs every half second meanwhile."""
    with anyio.fail_after(timeout):
        n = 0
        while not cond():
            await anyio.sleep(0.05)
            n += 1
            if poke and n % 10 == 0:
                poke()


def _fast(projects, indexers, **kw):
    return TranscriptWatcher(projects, indexers, debounce_ms=50, step_ms=10,
                             rust_timeout_ms=200, dir_poll_s=0.05, **kw)


@pytest.mark.anyio
async def test_new_project_dir_after_start_is_picked_up(short_tmp):
    """With the watcher running, a project directory created afterwards (with a transcript in
    it) is indexed, and later appends to it are indexed too."""
    projects = short_tmp / "projects"
    projects.mkdir()
    index, rec = TranscriptIndex(), Recorder()
    w = _fast(projects, [index, rec])
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(w.run, stop)
        await _until(lambda: w.watching)
        path = projects / "-home-u-new" / "abc.jsonl"
        path.parent.mkdir()
        path.write_bytes(b'{"n":0}\n')
        await _until(lambda: index.get(str(path)) is not None)
        for i in range(1, 4):
            _append(path, b'{"n":%d}\n' % i)
        await _until(lambda: rec.data(str(path)).count(b"\n") == 4)
        stop.set()
    assert not w.watching


@pytest.mark.anyio
async def test_projects_dir_created_late_is_watched(short_tmp):
    """If the projects directory does not exist yet, the watcher waits for it (polling with an
    injectable sleep) and starts watching once it appears."""
    projects = short_tmp / "claude" / "projects"
    index = TranscriptIndex()
    sleeps = []

    async def sleep(s):
        sleeps.append(s)
        await anyio.sleep(0.01)

    w = _fast(projects, [index], sleep=sleep)
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(w.run, stop)
        await _until(lambda: len(sleeps) >= 3)
        assert not w.watching
        path = projects / "-p" / "s.jsonl"
        path.parent.mkdir(parents=True)
        path.write_bytes(b'{"a":1}\n')
        await _until(lambda: index.get(str(path)) is not None,
                     poke=lambda: _append(path, b'{"a":2}\n'))
        assert w.watching
        stop.set()
