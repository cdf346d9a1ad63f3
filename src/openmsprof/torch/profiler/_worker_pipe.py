"""The training process's end of the analysis worker's pipes (``_analysis_worker`` drives it).

``Client`` starts the worker process, writes its job lines without ever blocking the caller
(``_worker_input``: what the pipe does not take at once is written by the writer thread; the lines
of windows that end in quick succession are written together), and takes its answers:
``saved|unsaved <dir>`` (the window's files; an unsaved one goes to ``on_unsaved``: this process
saves it), ``ok|fail|taken <dir>`` (its analysis; ``taken``: the training process analysed it). The
answers are read where they are needed, never on a thread woken per answer (each wake-up would take
the GIL from the training thread): a hand-off that finds ``PUMP_AT`` windows pending drains what
arrived (one non-blocking read), and whoever waits for the worker or looks at its windows reads them
as they come (``pump``, ``wait_for``). A watcher thread sleeps in ``poll`` for the pipe's hang-up
(and, while lines are held, for their time to be written): when the worker is gone, it reads the
last answers and hands what the worker did not do to ``on_gone`` (the writer thread, via
``_analysis_worker``). ``cpu_s`` and ``end`` let ``profile.stop()`` tell a worker that makes no
progress and end it.
"""

from __future__ import annotations

import itertools
import math
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import psutil

from openmsprof.recorder import threads
from openmsprof.torch.profiler import _worker_cpu, _writer
from openmsprof.torch.profiler._window_files import WORKER_MODULE
from openmsprof.torch.profiler._worker_input import WorkerInput

#: a hand-off reads the answers once this many windows are pending (they stay in the pipe until
#: then: ~150 bytes a window, so even a one-page pipe never fills; read together, warm, they cost a
#: few microseconds each, where one read per window costs tens, its code cold)
PUMP_AT = 8
#: the profilers' static file parts a ``Client`` keeps as sent (then it forgets them all)
MAX_STATICS = 64
_static_keys = itertools.count()
#: the longest a waiting thread sleeps without reading the answers or looking at the others' news
#: (a take-over by another thread, the worker's end); an answer wakes it at once
_SLICE_S = 0.01


class Job:
    """A dir handed to the worker: whether a sync handler waits for its analysis, whether it is
    analysed, the save to do here if the worker does not (None: already saved), the profile's
    ``saved`` list (and the dir's path, appended to it once saved)."""

    __slots__ = ("analyse", "out", "path", "save", "saved", "sync")

    def __init__(self, sync: bool, analyse: bool, save: Callable[[], None] | None, out: list[Path] | None,
                 path: Path | None = None) -> None:
        self.sync, self.analyse, self.save, self.out, self.path = sync, analyse, save, out, path
        self.saved = save is None


class Client:
    """The training process's side: the child, its pending dirs, its answers, a watcher of its end."""

    def __init__(self, on_gone: Callable[[dict[str, Job]], None],
                 on_unsaved: Callable[[str, Job], None] | None = None) -> None:
        self.on_gone, self.on_unsaved = on_gone, on_unsaved
        self.ended = False  # ended by ``end`` (a stalled worker), not broken
        pkg_parent = str(Path(__file__).resolve().parents[3])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH", "")) if p)
        # the training process's pid in its argv: offline ``analyse`` leaves alone what it may still save
        self.proc = subprocess.Popen([sys.executable, "-c", f"import {WORKER_MODULE} as w; w.main()", str(os.getpid())],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True)
        assert self.proc.stdin is not None
        self.input = WorkerInput(self.proc.stdin.fileno(), lambda: _writer.submit(self._drain))
        self.cond = threading.Condition()
        self.pending: dict[str, Job] = {}
        self.failed: list[str] = []
        self.answered = 0
        assert self.proc.stdout is not None
        self.out_fd = self.proc.stdout.fileno()
        os.set_blocking(self.out_fd, False)  # answers are drained, never waited for in a read
        self._part = b""  # an answer's first bytes, until its newline arrives
        self.eof = False  # the worker closed its answers: the watcher re-routes what is left
        #: the static file parts this worker has been sent (``static_key``): id -> (the dict, its key)
        self.statics: dict[int, tuple[dict[str, Any], int]] = {}
        self.reader = threading.Thread(target=self._watch, name="openmsprof-analysis-watch", daemon=True)
        self.reader.start()

    def static_key(self, static: dict[str, Any]) -> tuple[int, bytes]:
        """The key of a profiler's static file part for this worker, and the line that sends it
        (b"" when this worker has it already: a new worker is sent it again).  Raises TypeError
        when it cannot be carried in JSON."""
        known = self.statics.get(id(static))
        if known is not None and known[0] is static:
            return known[1], b""
        key = next(_static_keys)
        return key, orjson.dumps({"static": key, "files": static}) + b"\n"

    def sent_static(self, static: dict[str, Any], key: int) -> None:
        """The worker was sent ``static`` under ``key`` (kept: the dict cannot be freed and its id reused)."""
        if len(self.statics) >= MAX_STATICS:  # (a process making many profilers: the oldest go, sent again if used)
            self.statics.clear()
        self.statics[id(static)] = (static, key)

    def _watch(self) -> None:
        """Sleep until the answer pipe hangs up (the worker is gone: no wake-up per answer), then
        read the last answers and hand what the worker did not do to ``on_gone``; meanwhile write
        held lines when they are due (``_worker_input``; a first held line wakes it)."""
        threads.background_policy()
        watch = select.poll()
        watch.register(self.out_fd, 0)  # POLLHUP / POLLERR / POLLNVAL only: data does not wake it
        watch.register(self.input.wake_fd, select.POLLIN)
        while True:
            with self.cond:
                due = self.input.due()
            events = watch.poll(None if due is None else max(1, math.ceil(due * 1000)))
            if any(fd == self.out_fd for fd, _ in events):
                break
            if events:
                self.input.woken()
        with self.cond:
            self._pump()  # the last answers (no writer is left: it reads to the end)
            self.eof = True
            left, self.pending = dict(self.pending), {}
            self.input.drop()
            self.on_gone(left)
            self.cond.notify_all()

    def pump(self) -> None:
        """Take the answers that have arrived (never blocks)."""
        with self.cond:
            self._pump()

    def _pump(self) -> None:
        """``pump`` under ``cond``."""
        while not self.eof:
            try:
                data = os.read(self.out_fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self.eof = True
                return
            *lines, self._part = (self._part + data).split(b"\n")
            for raw in lines:
                self._answer(raw)
            self.cond.notify_all()

    def _answer(self, raw: bytes) -> None:
        """One answer line (under ``cond``)."""
        status, _, path = raw.decode("utf-8", "surrogateescape").partition(" ")
        self.answered += 1
        job = self.pending.get(path)
        if job is None:
            return
        if status in ("saved", "unsaved"):
            if status == "unsaved" and not job.saved and job.save is not None and self.on_unsaved is not None:
                del self.pending[path]  # (the worker said why on stderr: this process saves it instead)
                self.on_unsaved(path, job)
                return
            if status == "saved" and not job.saved and job.out is not None:
                job.out.append(job.path if job.path is not None else Path(path))
            job.saved = True
            if status == "unsaved" or not job.analyse:
                del self.pending[path]
        else:
            del self.pending[path]
            if status == "fail":
                self.failed.append(path)

    def wait_for(self, done: Callable[[], bool], timeout: float) -> bool:
        """Wait up to ``timeout`` s until ``done()`` (called under ``cond``), reading the answers
        as they arrive; whether it came true."""
        deadline = time.monotonic() + timeout
        waiter = select.poll()
        waiter.register(self.out_fd, select.POLLIN)
        self.flush()  # (held lines: what is waited for is sent)
        while True:
            with self.cond:
                self._pump()
                if done():
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                if self.eof:  # the watcher re-routes what is left, then notifies
                    self.cond.wait(min(left, _SLICE_S))
                    continue
            waiter.poll(max(1, int(min(left, _SLICE_S) * 1000)))

    def alive(self) -> bool:
        return self.proc.poll() is None and self.reader.is_alive()

    def send(self, path: str, job: Job, line: bytes) -> bool:
        """Queue ``line`` for the worker without ever blocking (``WorkerInput.put``); False if the
        worker is gone."""
        with self.cond:
            if not self.reader.is_alive():
                return False
            if len(self.pending) >= PUMP_AT:
                self._pump()  # (what the worker answered since: the pipe never fills)
            if not self.input.put(line):
                return False
            self.pending[path] = job
        return True

    def flush(self) -> None:
        """Write the held lines now (whoever waits for the worker: what it waits for is sent)."""
        with self.cond:
            self.input.flush()

    def _drain(self) -> None:
        """Writer thread: write the backlog as the worker reads (ends when it is gone)."""
        backlog = self.input.backlog
        while True:
            with self.cond:
                if not backlog:
                    return
            select.select([], [self.input.fd], [], 1.0)
            if self.proc.poll() is not None:
                return  # the watcher re-routes the pending jobs
            with self.cond:
                self._pump()  # (a worker blocked on a full answer pipe would not read its input)
                if not backlog:
                    return
                try:
                    n = os.write(self.input.fd, backlog[0])
                except BlockingIOError:
                    continue
                except OSError:
                    return
                if n == len(backlog[0]):
                    backlog.popleft()
                else:
                    backlog[0] = backlog[0][n:]

    def wait(self, timeout: float, sync_only: bool = False) -> bool:
        def idle() -> bool:
            return not any(j.sync for j in self.pending.values()) if sync_only else not self.pending

        return self.wait_for(idle, timeout)

    def cpu_s(self, analysis_only: bool = False) -> float | None:
        """The worker's CPU time so far, its children's included, live or waited for (None once it
        is gone); ``analysis_only``: its children's alone (``_worker_cpu.tree_cpu_s``)."""
        return _worker_cpu.tree_cpu_s(self.proc.pid, analysis_only)

    def stopped(self) -> bool:
        """The worker is stopped (SIGSTOP, a debugger): it does nothing until continued."""
        try:
            return psutil.Process(self.proc.pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)
        except psutil.Error:
            return False

    def end(self) -> None:
        """End a stalled (starved, stopped or wedged) worker and the children it forked, at once:
        SIGKILL works on a stopped process, and frees the dir lock it holds."""
        self.ended = True
        try:
            procs = [*psutil.Process(self.proc.pid).children(recursive=True)]
        except psutil.Error:
            procs = []
        for p in [self.proc, *procs]:
            try:
                p.kill()
            except (OSError, psutil.Error):
                pass
        self.proc.wait()

    def close(self) -> None:
        self.flush()
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
