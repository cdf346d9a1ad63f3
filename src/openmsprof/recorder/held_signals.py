"""Signals whose Python handlers raise (Ctrl-C's ``KeyboardInterrupt``, a user's timer) held back
while profiling changes state, then handled at once.

A Python signal handler runs at the next bytecode boundary, wherever that is.  Inside
``session.stop()`` its exception left the session half-stopped: records not yet flushed were lost
and the job had no end_info.  Inside a torch window's transition it could land right after one of
Kineto's calls returned and before torch stored what it returned (an exception raised after
``_disable_profiler()`` inside ``stop_trace`` loses the window's results; exporting what a stop
of no session gives crashes the process with SIGSEGV).  ``held()`` swaps the callable handlers of
``SIGNALS`` for one that only notes the signal, and once the block is through restores them and
calls the original handler of each noted signal (with the frame where the block ends), so its
exception is raised there, the state whole.  Only the main thread runs Python signal handlers:
elsewhere ``held()`` does nothing.  Handlers that are not Python callables (SIG_DFL, SIG_IGN) are
left alone: a default SIGTERM still ends the process at once.
"""

from __future__ import annotations

import _signal  # the C functions under ``signal`` (no enum conversions: held() runs at every window change)
import signal
import sys
import threading
from types import FrameType, TracebackType
from typing import Any

__all__ = ["SIGNALS", "held"]

#: the signals a Python program commonly gives a raising handler (``SIGINT``'s default is one)
SIGNALS = tuple(int(getattr(signal, name)) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGALRM", "SIGVTALRM",
                                                        "SIGUSR1", "SIGUSR2") if hasattr(signal, name))


class held:  # (lower case: used as ``with held():``, a function to its callers)
    """Run the ``with`` block with ``SIGNALS``' Python handlers held back; call them afterwards."""

    __slots__ = ("noted", "saved")

    def __init__(self) -> None:
        self.saved: dict[int, Any] = {}
        self.noted: list[int] = []

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self.noted.append(signum)  # (not the frame: it would keep the block's locals, a buffer's view, alive)

    def __enter__(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        get, put, saved = _signal.getsignal, _signal.signal, self.saved
        note = self._note
        for s in SIGNALS:
            handler = get(s)
            if callable(handler):
                saved[s] = handler
                put(s, note)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        saved = self.saved
        if not saved:
            return
        put = _signal.signal
        for s, handler in saved.items():
            put(s, handler)
        for signum in self.noted:  # (only signals of ``saved`` are noted; a handler that raises ends the loop)
            saved[signum](signum, sys._getframe(0))
