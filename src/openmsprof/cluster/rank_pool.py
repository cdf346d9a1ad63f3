"""The local pool that parses ranks in worker processes and watches them (:mod:`.rank_worker` is
a worker's side).

Up to N workers (multiprocessing's default start method, as ProcessPoolExecutor used, no
initializer), each handed one rank at a time over its own pipe.  The parent waits on every
worker's pipe and every worker's sentinel together (``multiprocessing.connection.wait``, with a
timeout as well), so a worker that dies, by any signal and at any moment, wakes it: the dead
worker is reaped, its rank goes to a replacement worker up to ``RETRIES`` more times and is then
reported as failed in one line naming the rank and what killed its workers.  A worker starts
with a rank already in its pipe, so every death is charged to a rank and a storm of kills ends
after at most ranks x (RETRIES + 1) workers.  On return, on an error and on KeyboardInterrupt
every worker is ended (asked to leave, then SIGKILL) and reaped: no child outlives the pool.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from openmsprof.cluster.discover import RankSource
from openmsprof.cluster.rank_worker import worker_main

__all__ = ["RETRIES", "RankPool", "failed_partial"]

RETRIES = 2
#: Seconds of one wait for a pipe or a sentinel (a bound, not a poll: every event wakes it sooner).
WAIT_S = 5.0
#: Seconds a worker gets to leave when asked (then SIGKILL), and to be reaped after SIGKILL.
LEAVE_S = 10.0


def failed_partial(src: RankSource, why: str) -> dict[str, Any]:
    """The partial of a rank that could not be analysed: its one problem line, ``failed``."""
    return {"rank": src.rank, "path": str(src.path), "kind": src.kind, "host": src.host, "counts": {},
            "problems": [f"rank {src.rank}: {why}"], "failed": True}


def death_cause(exitcode: int | None) -> str:
    """``SIGKILL`` for a worker killed by a signal, ``exit status N`` for one that exited."""
    if exitcode is None:
        return "unknown end"
    if exitcode < 0:
        try:
            return signal.Signals(-exitcode).name
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit status {exitcode}"


@dataclass
class _Worker:
    proc: BaseProcess
    conn: Connection
    job: RankSource | None = None
    leaving: bool = False  # told to leave (``None`` sent): never handed a rank again, only reaped


class RankPool:
    """``run(todo)`` parses every rank of ``todo`` in at most ``n`` watched worker processes."""

    def __init__(self, n: int, store: Path, kernels: bool, on_done: Callable[[], None] | None = None) -> None:
        self.n, self.store, self.kernels, self.on_done = max(1, n), store, kernels, on_done
        self.ctx = multiprocessing.get_context()
        self.workers: list[_Worker] = []
        self.queue: deque[RankSource] = deque()
        self.deaths: dict[int, list[str]] = {}
        self.done: dict[int, dict[str, Any]] = {}

    def run(self, todo: list[RankSource]) -> dict[int, dict[str, Any]]:
        """Every rank's partial (or its failure), by rank; a worker's exception is raised here."""
        self.queue.extend(todo)
        ok = False
        try:
            while self.queue or any(w.job is not None for w in self.workers):
                while self.queue and sum(not w.leaving for w in self.workers) < self.n:
                    self._spawn(self.queue.popleft())
                ready = set(wait([x for w in self.workers for x in (w.conn, w.proc.sentinel)], timeout=WAIT_S))
                for w in list(self.workers):
                    if w.conn in ready or w.proc.sentinel in ready or w.proc.exitcode is not None:
                        self._service(w)
            ok = True
        finally:
            self._close(gently=ok)
        return self.done

    def _spawn(self, job: RankSource) -> None:
        """Start a worker with ``job`` already in its pipe (a death before it reads it is charged)."""
        mine, theirs = self.ctx.Pipe()
        inherited = [mine, *(w.conn for w in self.workers)] if self.ctx.get_start_method() == "fork" else []
        proc = self.ctx.Process(target=worker_main, args=(theirs, os.getpid(), inherited),
                                name=f"openmsprof-rank-worker-{job.rank}")
        try:
            proc.start()
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()  # the worker's end lives only in the worker: its death is end of file here
        w = _Worker(proc, mine)
        self.workers.append(w)
        self._hand(w, job)

    def _hand(self, w: _Worker, job: RankSource) -> None:
        w.job = job
        with contextlib.suppress(OSError):  # already dead: its sentinel tells, the job is charged
            w.conn.send((job, self.store, self.kernels))

    def _service(self, w: _Worker) -> None:
        """Take ``w``'s answer if one came; reap it if it ended; else give it the next rank or let it go."""
        answer: tuple[str, int, Any] | None = None
        ended = False
        try:
            if w.conn.poll(0):
                answer = w.conn.recv()
        except (EOFError, OSError):  # end of file (or a torn answer): the worker is gone
            ended = True
        if answer is not None:
            kind, rank, payload = answer
            if kind == "error":  # the parse raised: so does the run (its workers ended by run())
                raise payload
            self.done[rank] = payload
            w.job = None
            if self.on_done:
                self.on_done()
        if ended or w.proc.exitcode is not None:
            self._reap(w)
        elif w.leaving:
            return  # its end is near: reaped when its sentinel or end of file says so
        elif self.queue and w.job is None:
            self._hand(w, self.queue.popleft())
        elif w.job is None:
            w.leaving = True  # (a rank queued again later goes to a new worker, not to this one)
            with contextlib.suppress(OSError):
                w.conn.send(None)

    def _reap(self, w: _Worker) -> None:
        """Collect a worker that ended (SIGKILL if it closed its pipe but lingers); charge its rank."""
        w.proc.join(LEAVE_S)
        if w.proc.exitcode is None:
            w.proc.kill()
            w.proc.join(LEAVE_S)
        cause = death_cause(w.proc.exitcode)
        self._forget(w)
        src = w.job
        if src is None:
            return
        causes = self.deaths.setdefault(src.rank, [])
        causes.append(cause)
        if len(causes) <= RETRIES:
            self.queue.append(src)
            return
        told = ", ".join(f"{c} x{k}" if k > 1 else c for c, k in Counter(causes).items())
        self.done[src.rank] = failed_partial(src, f"its worker process died {len(causes)} times ({told}); "
                                                  "not analysed")
        if self.on_done:
            self.on_done()

    def _forget(self, w: _Worker) -> None:
        if w in self.workers:
            self.workers.remove(w)
        w.conn.close()
        if w.proc.exitcode is not None:
            w.proc.close()

    def _close(self, gently: bool) -> None:
        """End and reap every worker: asked to leave (``gently``), else or then SIGKILL."""
        if gently:
            for w in self.workers:
                with contextlib.suppress(OSError):
                    w.conn.send(None)
            deadline = time.monotonic() + LEAVE_S
            for w in self.workers:
                w.proc.join(max(0.0, deadline - time.monotonic()))
        for w in self.workers:
            if w.proc.exitcode is None:
                with contextlib.suppress(OSError, ValueError):
                    w.proc.kill()
        for w in list(self.workers):
            w.proc.join(LEAVE_S)
            self._forget(w)
