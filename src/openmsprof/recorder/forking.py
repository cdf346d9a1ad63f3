"""Processes forked while a session runs (docs/internals.md "Fork and threads").

A child forked during a session keeps recording into the same job as its own process, as
Nsight Systems follows a fork: the session's at-fork hook (``os.register_at_fork``) calls
:func:`reset_child` (the parent's buffered records stay the parent's: the child drops its copy
and every lock another thread may have held), then the session starts the child's own stream
(files named ``*.pid{pid}.slice_*`` beside the parent's).  The child's stream ends when it stops
the session, exits normally (atexit), or calls ``os._exit`` or ``os.exec*`` (wrapped here, as
``multiprocessing`` ends its fork workers with ``os._exit``); the job ends only when the
session's own process stops.  ``OPENMSPROF_FOLLOW_FORK=0`` makes children record nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from openmsprof.recorder import buffers, core, pymarkers

__all__ = ["EXIT_WAIT_S", "follow", "hook_exits", "quiet", "reset_child", "why_text"]

#: Longest wait of a child's exit for the session lock another of its threads holds (seconds).
EXIT_WAIT_S = 5.0

#: Drop reasons as the drop report words them.
_WHY = {"ring_full": "ring full: the flusher fell behind", "no_memory": "memory budget spent",
        "string_memory_full": "string memory full", "bad_arguments": "impossible arguments",
        "collection_halted": "buffered when collection halted",
        "python_buffers_full": "Python buffers full or over budget"}


def follow() -> bool:
    """Whether forked children record (``OPENMSPROF_FOLLOW_FORK``, on unless 0/off/no/false)."""
    return os.environ.get("OPENMSPROF_FOLLOW_FORK", "1").strip().lower() not in ("0", "off", "no", "false")


def reset_child() -> None:
    """In a forked child, before anything else: the parent's buffers, files and locks are let
    go without writing anything (both backends); recording is off until the child's stream starts."""
    buffers.after_fork_child()
    pymarkers.after_fork_child()
    if core.ring is not None:
        core.ring.child_reset()


def quiet() -> None:
    """Nothing more is recorded in this process (a child that does not follow, or halted)."""
    pymarkers.set_enabled(False)
    if core.ring is not None:
        core.ring.set_enabled(False)
    buffers.set_open(False)


def why_text(reasons: dict[str, int]) -> str:
    """The drop report's reasons, e.g. ``"ring full: the flusher fell behind 120"``."""
    return ", ".join(f"{_WHY.get(k, k)} {n}" for k, n in sorted(reasons.items())) or "reason not recorded"


def hook_exits(stop: Callable[[], None]) -> None:
    """Run ``stop`` before ``os._exit`` and ``os.execv``/``execve`` (and the ``exec*`` built on
    them) of this process: a child that leaves that way loses nothing.  Installed once."""
    for name in ("_exit", "execv", "execve"):
        real = getattr(os, name)
        real = getattr(real, "__openmsprof_real__", real)
        setattr(os, name, _wrap(real, stop))


def _wrap(real: Callable[..., Any], stop: Callable[[], None]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            stop()
        except BaseException:  # never keep the process from leaving
            pass
        return real(*args, **kwargs)

    wrapper.__openmsprof_real__ = real  # type: ignore[attr-defined]
    wrapper.__name__ = getattr(real, "__name__", "wrapper")
    wrapper.__doc__ = getattr(real, "__doc__", None)
    return wrapper
