"""The one way an exporter uses the second core: a forked child running one function, under one
safety policy (docs/internals.md, "Fork and threads").

Policy: fork only when this process runs no other Python thread.  A thread that holds a lock at
the moment of the fork (logging's, the import lock, a SQLite mutex, a queue's) leaves it held
forever in the child, which then hangs; when threads run, :meth:`ForkWorker.start` refuses and
the exporter does the work itself (the files are the same either way).  Python's warning about
forking a threaded process is never silenced: under this policy it has nothing to warn about.

The child has the kernel kill it if the exporter dies (``PR_SET_PDEATHSIG``), runs its body,
reports through a pipe, and leaves with ``os._exit`` (no ``atexit`` handlers, no flush of the
parent's inherited buffers).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
from collections.abc import Callable

__all__ = ["ForkWorker", "fork_allowed"]


def fork_allowed(min_cpus: int = 2) -> bool:
    """Whether a fork may be used now: ``os.fork`` exists, ``min_cpus`` CPUs, no other thread."""
    return (hasattr(os, "fork") and (os.cpu_count() or 1) >= min_cpus
            and threading.active_count() == 1)


def _die_with(parent: int) -> None:  # pragma: no cover - runs in the child
    """Linux: have the kernel kill the child if the exporter dies, so no orphan keeps writing."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the exporter died before that took effect
        os._exit(0)


class ForkWorker:
    """A forked child running ``body(write_fd) -> exit status``; the parent reads its pipe."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid, self.fd = pid, fd

    @classmethod
    def start(cls, body: Callable[[int], int], min_cpus: int = 2) -> ForkWorker | None:
        """Fork the child; None when the policy refuses or the fork fails (the caller does the
        work itself)."""
        if not fork_allowed(min_cpus):
            return None
        r, w = os.pipe()
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError:
            os.close(r)
            os.close(w)
            return None
        if pid == 0:  # pragma: no cover - runs in the child (its results are checked by the tests)
            status = 1
            try:
                os.close(r)
                _die_with(parent)
                status = body(w)
            finally:
                os._exit(status)
        os.close(w)
        return cls(pid, r)

    def result(self) -> tuple[bytes, int]:
        """Everything the child wrote to its pipe, and its exit code (after reaping it)."""
        parts = []
        try:
            while chunk := os.read(self.fd, 1 << 22):
                parts.append(chunk)
        finally:
            os.close(self.fd)
        _pid, status = os.waitpid(self.pid, 0)
        return b"".join(parts), os.waitstatus_to_exitcode(status)

    def kill(self) -> None:
        """SIGKILL the child, reap it and close the pipe (both may be gone already)."""
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        with contextlib.suppress(OSError):
            os.close(self.fd)
