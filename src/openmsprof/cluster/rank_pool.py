"""The local pool that parses ranks in worker processes and watches them (:mod:`.rank_worker` is
a worker's side).

Up to N workers (multiprocessing's default start method, as ProcessPoolExecutor used, no
initializer), each handed one rank at a time over its own pipe.  The parent sleeps until an
event: an answer or end of file on a worker's pipe, a worker's end (its pidfd, readable once the
process can be reaped; its sentinel where Linux has no pidfd), or the nearest deadline.  A
worker that closed its pipe is awaited on its end alone (its end of file, its sentinel and its
exit status do not come together: waiting on them all spun ~150 times as a worker left).  A
worker that dies, by any signal and at any moment, is reaped, and its rank goes to a replacement
worker up to ``RETRIES`` more times and is then reported as failed in one line naming the rank
and what ended its workers.  A worker that has not answered its rank by the rank's deadline
(:mod:`.rank_deadline`) is hung: it is killed (SIGKILL) and charged the same way, as ``timed out
after N s``.  A worker starts with a rank already in its pipe, so every death is charged to a
rank and a storm of kills ends after at most ranks x (RETRIES + 1) workers.  On return, on an
error and on KeyboardInterrupt every worker is ended (asked to leave, then SIGKILL) and reaped:
no child outlives the pool.
"""

from __future__ import annotations

import contextlib
import math
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
from openmsprof.cluster.rank_deadline import RankDeadline, seconds_text
from openmsprof.cluster.rank_worker import worker_main

__all__ = ["RETRIES", "RankPool", "failed_partial"]

RETRIES = 2
#: Longest sleep of the parent's wait (a bound only: every event and every deadline wakes it sooner).
WAIT_S = 30.0
#: Seconds a worker gets to leave when asked or after its pipe closed (then SIGKILL), and to end after SIGKILL.
LEAVE_S = 10.0
TIMED_OUT = "timed out after "


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


def failure_text(causes: list[str]) -> str:
    """The problem line's text for a rank whose workers all ended without its answer."""
    told = Counter(causes)
    if len(told) == 1 and causes[0].startswith(TIMED_OUT):
        return f"{causes[0]}, {len(causes)} times (its worker process killed each time); not analysed"
    listed = ", ".join(f"{c} x{k}" if k > 1 else c for c, k in told.items())
    return f"its worker process died {len(causes)} times ({listed}); not analysed"


def _exit_fd(pid: int) -> int | None:
    """A pidfd of ``pid`` (readable once it can be reaped), or None where Linux has none (< 5.3)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


@dataclass
class _Worker:
    proc: BaseProcess
    conn: Connection
    exit_fd: int | None  # pidfd: readable once the process has ended (None: its sentinel tells)
    job: RankSource | None = None
    leaving: bool = False  # told to leave (``None`` sent): never handed a rank again, only reaped
    closed: bool = False  # its pipe is at end of file: only its end is awaited
    due: float = math.inf  # (monotonic) its answer, or its end once leaving or closed, is due by then
    killed: str | None = None  # why the pool SIGKILLed it: the cause charged to its rank

    def waitables(self) -> list[Any]:
        end = self.exit_fd if self.exit_fd is not None else self.proc.sentinel
        return [end] if self.closed else [self.conn, end]


class RankPool:
    """``run(todo)`` parses every rank of ``todo`` in at most ``n`` watched worker processes;
    ``deadline`` says how long one may take over a rank (default: by the rank's size)."""

    def __init__(self, n: int, store: Path, kernels: bool, on_done: Callable[[], None] | None = None,
                 deadline: RankDeadline | None = None) -> None:
        self.n, self.store, self.kernels, self.on_done = max(1, n), store, kernels, on_done
        self.deadline = deadline if deadline is not None else RankDeadline()
        self.ctx = multiprocessing.get_context()
        self.workers: list[_Worker] = []
        self.queue: deque[RankSource] = deque()
        self.deaths: dict[int, list[str]] = {}
        self.done: dict[int, dict[str, Any]] = {}
        self.limits: dict[int, float | None] = {}  # each rank's deadline in seconds, taken once
        self.wakeups = 0  # returns of the parent's wait (every one an event or a deadline)

    def run(self, todo: list[RankSource]) -> dict[int, dict[str, Any]]:
        """Every rank's partial (or its failure), by rank; a worker's exception is raised here."""
        self.queue.extend(todo)
        ok = False
        try:
            while self.queue or any(w.job is not None for w in self.workers):
                while self.queue and sum(not w.leaving for w in self.workers) < self.n:
                    self._spawn(self.queue.popleft())
                due = min((w.due for w in self.workers), default=math.inf)
                timeout = min(max(0.0, due - time.monotonic()), WAIT_S)
                ready = set(wait([x for w in self.workers for x in w.waitables()], timeout=timeout))
                self.wakeups += 1
                for w in list(self.workers):
                    if not ready.isdisjoint(w.waitables()):
                        self._service(w, ready)
                    if w in self.workers and time.monotonic() >= w.due:
                        self._overdue(w)
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
        w = _Worker(proc, mine, _exit_fd(proc.pid) if proc.pid else None)
        self.workers.append(w)
        self._hand(w, job)

    def _hand(self, w: _Worker, job: RankSource) -> None:
        if job.rank not in self.limits:
            self.limits[job.rank] = self.deadline.seconds(job)
        limit = self.limits[job.rank]
        w.job, w.due = job, time.monotonic() + limit if limit is not None else math.inf
        with contextlib.suppress(OSError):  # already dead: its end tells, the job is charged
            w.conn.send((job, self.store, self.kernels))

    def _service(self, w: _Worker, ready: set[Any]) -> None:
        """Take ``w``'s answer if one came; reap it if it ended; else give it the next rank or let it go."""
        answer: tuple[str, int, Any] | None = None
        try:
            if not w.closed and w.conn.poll(0):
                answer = w.conn.recv()
        except (EOFError, OSError):  # end of file (or a torn answer): the worker is gone or going
            w.closed = True
            w.due = min(w.due, time.monotonic() + LEAVE_S)
        if answer is not None:
            kind, rank, payload = answer
            if kind == "error":  # the parse raised: so does the run (its workers ended by run())
                raise payload
            self.done[rank] = payload
            w.job, w.due = None, math.inf
            if self.on_done:
                self.on_done()
        if w.proc.exitcode is not None:
            self._reap(w)
        elif w.exit_fd is None and w.proc.sentinel in ready:
            self._reap(w, ending=True)  # (no pidfd: its sentinel comes a moment before its exit status)
        elif w.closed or w.leaving or w.killed is not None:
            return  # its end is near: reaped when its pidfd says so (or at its due time)
        elif self.queue and w.job is None:
            self._hand(w, self.queue.popleft())
        elif w.job is None:
            w.leaving, w.due = True, time.monotonic() + LEAVE_S  # (a rank queued again later goes to a new worker)
            with contextlib.suppress(OSError):
                w.conn.send(None)

    def _overdue(self, w: _Worker) -> None:
        """``w`` missed its due time: SIGKILL it (a rank's deadline is charged as a time-out); one
        that does not end ``LEAVE_S`` after SIGKILL (uninterruptible I/O) is given up on."""
        if w.killed is not None:
            self._reap(w)
            return
        limit = self.limits.get(w.job.rank) if w.job is not None else None
        hung = w.job is not None and limit is not None and not w.closed  # (closed: it is ending, slowly)
        w.killed = TIMED_OUT + seconds_text(limit) if hung and limit is not None else "SIGKILL"
        with contextlib.suppress(OSError, ValueError):
            w.proc.kill()
        w.due = time.monotonic() + LEAVE_S

    def _reap(self, w: _Worker, ending: bool = False) -> None:
        """Collect a worker that ended (``ending``: about to; else given up on); charge its rank."""
        if ending:
            w.proc.join(LEAVE_S)
            if w.proc.exitcode is None:
                w.proc.kill()
                w.proc.join(LEAVE_S)
        cause = w.killed or death_cause(w.proc.exitcode)
        self._forget(w)
        src = w.job
        if src is None:
            return
        causes = self.deaths.setdefault(src.rank, [])
        causes.append(cause)
        if len(causes) <= RETRIES:
            self.queue.append(src)
            return
        self.done[src.rank] = failed_partial(src, failure_text(causes))
        if self.on_done:
            self.on_done()

    def _forget(self, w: _Worker) -> None:
        if w in self.workers:
            self.workers.remove(w)
        w.conn.close()
        if w.exit_fd is not None:
            os.close(w.exit_fd)
            w.exit_fd = None
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
