"""The analysis worker's input pipe, as the training process writes it (``_worker_pipe.Client``).

Writes never block: what the pipe does not take at once waits in ``backlog`` for the writer
thread.  Window lines that come in quick succession are written together: a line that comes
within ``COALESCE_S`` of the last write is held, and the held lines go in one write at
``COALESCE_MAX`` lines, ``COALESCE_S`` after the first was held (``due``: the client's watcher
thread, woken through ``wake_fd`` when a first line is held), or at once when anyone waits for the
worker (``flush``).  Each write wakes the worker and then its analysing child on a core that was
idle, and a process woken after a gap runs cold: a window's analysis costs 1.3 ms of CPU back to
back and 2.2 ms 12 ms apart (``benchmarks/bench_torch_windows.py``, benchmarks/README.md).  So
dense windows (a schedule of a few short steps) are saved and analysed in runs, sparse ones as
they end.  Every method runs under the client's lock.
"""

from __future__ import annotations

import collections
import math
import os
import time
from collections.abc import Callable

__all__ = ["COALESCE_MAX", "COALESCE_S", "WorkerInput"]

#: a line that comes within this long of the last write is held and written with those that follow
COALESCE_S = 0.1
#: held lines are written once there are this many
COALESCE_MAX = 8


class WorkerInput:
    """The worker's stdin (non-blocking ``fd``), its backlog, the held lines and the watcher's wake pipe."""

    def __init__(self, fd: int, on_backlog: Callable[[], None]) -> None:
        self.fd, self.on_backlog = fd, on_backlog  # (on_backlog: the writer thread drains ``backlog``)
        os.set_blocking(fd, False)  # a stalled worker never blocks the training thread
        self.backlog: collections.deque[bytes] = collections.deque()
        self.held: list[bytes] = []
        self.held_at = self.sent_at = -math.inf  # when the first held line came; the last write
        self.writes = 0  # writes to the worker (lines held together go in one)
        self.wake_fd, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)

    def put(self, line: bytes) -> bool:
        """Write ``line`` now, or hold it, or queue it behind the backlog; False if the worker is gone
        (a line written now failed; held lines that fail later: the worker's end re-routes them)."""
        if self.backlog:
            self.backlog.append(line)
            return True
        now = time.monotonic()
        if not self.held and now - self.sent_at >= COALESCE_S:
            return self._write(line)
        self.held.append(line)
        if len(self.held) >= COALESCE_MAX:
            self.flush()
        elif len(self.held) == 1:
            self.held_at = now
            if self._wake_w >= 0:
                try:
                    os.write(self._wake_w, b"\0")  # the watcher writes them in time
                except OSError:
                    pass
        return True

    def due(self) -> float | None:
        """Seconds until the held lines are due (they are written here when due now); None: none held."""
        if not self.held:
            return None
        left = self.held_at + COALESCE_S - time.monotonic()
        if left > 0:
            return left
        self.flush()
        return None

    def woken(self) -> None:
        """The watcher took the wake-up (its bytes are read)."""
        try:
            os.read(self.wake_fd, 1 << 12)
        except OSError:
            pass

    def flush(self) -> bool:
        """The held lines, in one write."""
        if not self.held:
            return True
        data = b"".join(self.held)
        self.held.clear()
        if self.backlog:
            self.backlog.append(data)
            return True
        return self._write(data)

    def _write(self, data: bytes) -> bool:
        try:
            n = os.write(self.fd, data)
        except BlockingIOError:
            n = 0
        except OSError:
            return False
        self.writes += 1
        self.sent_at = time.monotonic()
        if n < len(data):
            self.backlog.append(data[n:])
            self.on_backlog()
        return True

    def drop(self) -> None:
        """The worker is gone: nothing more is written; the wake pipe is closed."""
        self.backlog.clear()
        self.held.clear()
        self.close_wake()

    def close_wake(self) -> None:
        """Close the wake pipe (``drop``; a forked child drops its copies of it, and writes nothing)."""
        for fd in (self.wake_fd, self._wake_w):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.wake_fd = self._wake_w = -1
