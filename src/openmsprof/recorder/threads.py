"""Scheduling of openmsprof's own background threads (Linux; a no-op elsewhere).

A background thread woken by the application (a window-end hand-off, a periodic harvest or
flush) would, as a normal thread, preempt the application's thread on its core at once; on a
loaded machine the preempted thread then waits behind other tasks for a time slice, so each such
wake costs the application milliseconds.  Under ``SCHED_BATCH`` a thread keeps a normal thread's
CPU share (so it never starves while it holds the GIL, as ``SCHED_IDLE`` could), but its wake-ups
do not preempt the running thread: it runs on an idle core, or at the next scheduling point.
"""

from __future__ import annotations

import os

__all__ = ["background_policy", "idle_policy", "policy_name"]


def _set_policy(name: str) -> bool:
    """Put the calling thread (or a single-threaded process) under policy ``name``; False where
    the OS has no such policy or refuses it."""
    policy = getattr(os, name, None)
    if policy is None or not hasattr(os, "sched_setscheduler"):
        return False
    try:
        os.sched_setscheduler(0, policy, os.sched_param(0))  # 0: the calling thread (Linux)
        return True
    except OSError:
        return False


def background_policy() -> bool:
    """Put the calling thread under ``SCHED_BATCH``; False where the OS has no such policy."""
    return _set_policy("SCHED_BATCH")


def idle_policy() -> bool:
    """Put the calling thread under ``SCHED_IDLE`` (it runs only when a core would otherwise idle;
    for a process whose work may wait, such as the torch analysis worker)."""
    return _set_policy("SCHED_IDLE")


def policy_name(native_id: int) -> str:
    """The scheduling policy of a thread (``threading.Thread.native_id``) or process, by name."""
    if not hasattr(os, "sched_getscheduler"):
        return "unknown"
    try:
        policy = os.sched_getscheduler(native_id)
    except OSError:
        return "unknown"
    names = {getattr(os, n): n for n in ("SCHED_OTHER", "SCHED_BATCH", "SCHED_IDLE", "SCHED_FIFO", "SCHED_RR")
             if hasattr(os, n)}
    return names.get(policy, str(policy))
