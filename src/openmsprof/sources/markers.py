"""Marker hot path (msproftx / mstx).  Each call is one flag test when profiling is off and one
tuple append to the calling thread's own buffer when it is on: no lock, no context manager.
"""

from __future__ import annotations

import time
from typing import Any

from openmsprof.recorder import buffers, session
from openmsprof.recorder.buffers import TLS, append_slow, next_range_id

_now = time.perf_counter_ns
_on = False
_tls = TLS


def _on_start(s: session.Session) -> None:
    global _on
    _on = bool(s.config.msproftx)


def _on_stop(s: session.Session) -> None:
    global _on
    _on = False


session.add_listener(_on_start, _on_stop)


def is_on() -> bool:
    return _on


def mark(message: str, domain: str | None = None) -> None:
    """Instant marker."""
    if _on:
        try:
            _tls.append((1, _now(), message, domain))
        except AttributeError:
            append_slow((1, _now(), message, domain))


def push(message: str, domain: str | None = None) -> None:
    """Open a same-thread range."""
    if _on:
        try:
            _tls.append((2, _now(), message, domain))
        except AttributeError:
            append_slow((2, _now(), message, domain))


def pop() -> None:
    """Close the innermost same-thread range."""
    if _on:
        try:
            _tls.append((3, _now(), None, None))
        except AttributeError:
            append_slow((3, _now(), None, None))


def range_start(message: str, domain: str | None = None) -> int:
    """Open a range that may end on another thread; returns its id (0 when off)."""
    if not _on:
        return 0
    rid = next_range_id()
    buffers.append((4, _now(), message, domain, rid))
    return rid


def range_end(range_id: int) -> None:
    """Close a range opened by :func:`range_start`."""
    if _on and range_id:
        buffers.append((5, _now(), range_id))


class Range:
    """Reusable decorator and context manager: ``with Range("load"):`` or ``@Range("step")``.

    Implemented with ``__enter__``/``__exit__`` methods (not ``contextlib.contextmanager``)."""

    __slots__ = ("domain", "message")

    def __init__(self, message: str, domain: str | None = None) -> None:
        self.message = message
        self.domain = domain

    def __enter__(self) -> Range:
        if _on:
            push(self.message, self.domain)
        return self

    def __exit__(self, *exc: Any) -> None:
        if _on:
            pop()

    def __call__(self, func: Any) -> Any:
        message, domain = self.message, self.domain

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            push(message, domain)
            try:
                return func(*args, **kwargs)
            finally:
                pop()

        wrapper.__name__ = getattr(func, "__name__", "wrapper")
        wrapper.__qualname__ = getattr(func, "__qualname__", "wrapper")
        wrapper.__doc__ = getattr(func, "__doc__", None)
        wrapper.__wrapped__ = func  # type: ignore[attr-defined]
        return wrapper
