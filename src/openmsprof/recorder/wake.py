"""The flusher's lock-free wake-up: a flag and a byte in a non-blocking pipe.

The pure-Python recorder's instance is ``buffers.WAKE`` (a forked child closes its copy of the
parent's pipe and makes its own in ``buffers.after_fork_child``).
"""

from __future__ import annotations

import os
import select

__all__ = ["Wake"]


class Wake:
    """The flusher's wake-up, set by a producer whose list is full: a flag and a byte in a
    non-blocking pipe, with no lock.  (A ``threading.Event`` takes a lock in ``set()``: a signal
    handler that raises there leaves it held, and the flusher and ``stop()`` wait forever.)"""

    def __init__(self) -> None:
        self._r, self._w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._flag = False

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        if not self._flag:
            self._flag = True
            try:
                os.write(self._w, b"w")
            except OSError:  # full: a wake is pending anyway
                pass

    def clear(self) -> None:
        self._flag = False
        try:
            while os.read(self._r, 4096):
                pass
        except OSError:
            pass

    def wait(self, timeout: float) -> bool:
        """Until set or ``timeout`` seconds; returns whether it was set."""
        if not self._flag:
            try:
                select.select([self._r], [], [], max(timeout, 0.0))
            except (OSError, ValueError):
                pass
        return self._flag

    def close(self) -> None:
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass
