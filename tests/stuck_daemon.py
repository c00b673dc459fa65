"""`autoharnessd` with one step made to block on a FIFO read (for tests of stuck workers).

    python stuck_daemon.py FIFO prune       # the persist loop's window pruning blocks
    python stuck_daemon.py FIFO cut SESSION  # the job of SESSION blocks reading its transcript
    python stuck_daemon.py FIFO answered     # a job blocks after the model's answer, before intake
    python stuck_daemon.py FIFO grounding    # the promoter blocks before grounding a verdict
    python stuck_daemon.py FIFO batchsave    # the batch journal's first write blocks

The rest is the real daemon. Nothing ever writes to the FIFO, so the worker thread stays in
its read until the process ends: the blocking read a hung mount or a stray pipe would cause
(or until the test closes the writer it holds open: then the step goes on).
"""

import sys

from claude_autoharness.daemon import app
from claude_autoharness.daemon.handlers import review
from claude_autoharness.daemon.promote import land
from claude_autoharness.daemon.reflect import batchstore, pool, windows


def _block(fifo: str) -> bytes:
    with open(fifo, "rb") as f:  # blocks in open() until a writer comes, then in read()
        return f.read()


def main() -> None:
    fifo, where = sys.argv[1], sys.argv[2]
    if where == "prune":
        review.Review.prune_windows = lambda self: _block(fifo)
    elif where == "cut":
        stuck_session, real_cut = sys.argv[3], pool.ReflectorPool.cut

        def cut(self, job, *rest):
            if job.session_id == stuck_session:
                _block(fifo)
            return real_cut(self, job, *rest)

        pool.ReflectorPool.cut = cut
    elif where == "answered":  # the window is saved right after the answer, before intake
        windows.save_window = lambda job_id, text: _block(fifo)
    elif where == "grounding":
        land.Promoter.ground_feedback = lambda self, rec, window: _block(fifo)
    elif where == "batchsave":  # a slow disk: the write and its fsyncs take until released
        real_save, held = batchstore.save, []

        def save(j):
            if not held:
                held.append(_block(fifo))
            real_save(j)

        batchstore.save = save
    else:
        raise SystemExit(f"unknown step {where!r}")
    app.main([])


if __name__ == "__main__":
    main()
