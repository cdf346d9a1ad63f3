"""One background thread that does a window's file work off the training thread.

Jobs (rank-dir creation, moving the raw Kineto trace into place, profiler_info / metadata JSON)
run in submission order; a job's failure is logged, never raised.  ``flush()`` waits for all
submitted jobs; interpreter exit flushes (atexit), so a window ended just before a normal exit
is complete on disk.  A forked child starts with a fresh, empty writer.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
from collections.abc import Callable

from openmsprof.recorder import threads

log = logging.getLogger("openmsprof")
_FLUSH_TIMEOUT_S = 120.0

_q: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
_thread: threading.Thread | None = None


def _run(q: queue.SimpleQueue[Callable[[], None] | None]) -> None:
    threads.background_policy()  # a window end's hand-off does not preempt the training thread
    while True:
        job = q.get()
        if job is None:
            return
        try:
            job()
        except Exception as exc:  # a job logs its own failures; this is the last resort
            log.warning("openmsprof: background profiler write failed: %s", exc)


def submit(job: Callable[[], None]) -> None:
    """Run ``job()`` on the writer thread (started on first use)."""
    global _thread
    if _thread is None or not _thread.is_alive():
        _thread = threading.Thread(target=_run, args=(_q,), name="openmsprof-torch-writer", daemon=True)
        _thread.start()
    _q.put(job)


def flush(timeout: float = _FLUSH_TIMEOUT_S) -> bool:
    """Wait until every job submitted so far has run; False on timeout."""
    if _thread is None or not _thread.is_alive() or _thread is threading.current_thread():
        return True
    done = threading.Event()
    _q.put(done.set)
    if not done.wait(timeout):
        log.warning("openmsprof: background profiler writes still running after %.0f s", timeout)
        return False
    return True


def _after_fork() -> None:
    global _q, _thread
    _q = queue.SimpleQueue()
    _thread = None


atexit.register(flush)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
