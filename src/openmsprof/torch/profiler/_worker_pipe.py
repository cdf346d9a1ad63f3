"""The training process's end of the analysis worker's pipes (``_analysis_worker`` drives it).

``_Client`` starts the worker process, writes its job lines without ever blocking the caller (what
the pipe does not take at once is written by the writer thread), and reads its answers on a
reader thread: ``saved|unsaved <dir>`` (the window's files), ``ok|fail <dir>`` (its analysis).
When the worker is gone, the reader hands what it did not do to the writer thread.
"""

from __future__ import annotations

import collections
import functools
import os
import select
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from openmsprof.recorder import threads

MODULE = "openmsprof.torch.profiler._worker_process"


class Job:
    """A dir handed to the worker: whether a sync handler waits for its analysis, whether it is
    analysed, the save to do here if the worker does not (None: already saved), the profile's
    ``saved`` list."""

    __slots__ = ("analyse", "out", "save", "saved", "sync")

    def __init__(self, sync: bool, analyse: bool, save: Callable[[], None] | None, out: list[Path] | None) -> None:
        self.sync, self.analyse, self.save, self.out = sync, analyse, save, out
        self.saved = save is None


class Client:
    """The training process's side: the child, its pending dirs, a reader of its answers."""

    def __init__(self) -> None:
        pkg_parent = str(Path(__file__).resolve().parents[3])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen([sys.executable, "-c", f"import {MODULE} as w; w.main()"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True)
        assert self.proc.stdin is not None
        self.fd = self.proc.stdin.fileno()
        os.set_blocking(self.fd, False)  # a stalled worker never blocks the training thread
        self.backlog: collections.deque[bytes] = collections.deque()  # written by the writer thread
        self.cond = threading.Condition()
        self.pending: dict[str, Job] = {}
        self.failed: list[str] = []
        self.answered = 0
        self.reader = threading.Thread(target=self._read, name="openmsprof-analysis-reader", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        threads.background_policy()  # the worker's answers do not preempt the training thread
        out = self.proc.stdout
        assert out is not None
        for raw in out:
            status, _, path = raw.decode("utf-8", "surrogateescape").rstrip("\n").partition(" ")
            with self.cond:
                self.answered += 1
                job = self.pending.get(path)
                if job is None:
                    continue
                if status in ("saved", "unsaved"):
                    if status == "saved" and not job.saved and job.out is not None:
                        job.out.append(Path(path))
                    job.saved = True
                    if status == "unsaved" or not job.analyse:
                        del self.pending[path]
                else:
                    del self.pending[path]
                    if status != "ok":
                        self.failed.append(path)
                self.cond.notify_all()
        from openmsprof.torch.profiler import _analysis_worker, _writer

        with self.cond:  # the worker is gone: what it did not do is done on the writer thread
            left, self.pending = dict(self.pending), {}
            self.backlog.clear()
            for path, job in left.items():
                if not job.saved and job.save is not None:
                    job.saved = True
                    _writer.submit(job.save)
                if job.analyse:
                    _writer.submit(functools.partial(_analysis_worker.submit, Path(path), job.sync))
            self.cond.notify_all()

    def alive(self) -> bool:
        return self.proc.poll() is None and self.reader.is_alive()

    def send(self, path: str, job: Job, line: bytes) -> bool:
        """Queue ``line`` for the worker without ever blocking (what the pipe does not take now is
        written by the writer thread); False if the worker is gone."""
        with self.cond:
            if not self.reader.is_alive():
                return False
            if self.backlog:
                self.pending[path] = job
                self.backlog.append(line)
                return True
            try:
                n = os.write(self.fd, line)
            except BlockingIOError:
                n = 0
            except OSError:
                return False
            self.pending[path] = job
            if n < len(line):
                self.backlog.append(line[n:])
                from openmsprof.torch.profiler import _writer

                _writer.submit(self._drain)
        return True

    def _drain(self) -> None:
        """Writer thread: write the backlog as the worker reads (ends when it is gone)."""
        while True:
            with self.cond:
                if not self.backlog:
                    return
            select.select([], [self.fd], [], 1.0)
            if self.proc.poll() is not None:
                return  # the reader's end of input re-routes the pending jobs
            with self.cond:
                if not self.backlog:
                    return
                try:
                    n = os.write(self.fd, self.backlog[0])
                except BlockingIOError:
                    continue
                except OSError:
                    return
                if n == len(self.backlog[0]):
                    self.backlog.popleft()
                else:
                    self.backlog[0] = self.backlog[0][n:]

    def wait(self, timeout: float, sync_only: bool = False) -> bool:
        def idle() -> bool:
            return not any(j.sync for j in self.pending.values()) if sync_only else not self.pending

        with self.cond:
            return self.cond.wait_for(idle, timeout)

    def close(self) -> None:
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
