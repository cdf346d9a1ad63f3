"""Marker hot path (msproftx / mstx) on the recorder core of :mod:`openmsprof.recorder.core`.

Native core: ``mark``/``push``/``pop``/``range_start``/``range_end`` *are* the C functions of
``_ring`` (one flag test when off; one ring write when on).  Python fallback
(``OPENMSPROF_RECORDER=python`` or no compiler): one flag test when off; when on, one tuple
append to the calling thread's own list, or a counted drop when that list holds
:data:`~openmsprof.recorder.core.RING_RECORDS` records the flusher has not yet taken.
"""

from __future__ import annotations

import time
from typing import Any

from openmsprof.recorder import buffers, core, session
from openmsprof.recorder.buffers import TLS, next_range_id, register_current_thread

__all__ = ["BACKEND", "Range", "is_on", "mark", "pop", "push", "range_end", "range_start"]

_now = time.perf_counter_ns
_on = False
_tls = TLS
_CAP = core.PY_LIST_RECORDS
_wake = buffers.WAKE
BACKEND = core.BACKEND


def _on_start(s: session.Session) -> None:
    global _on
    _on = bool(s.config.msproftx)
    if core.ring is not None and s.backend == "native":
        core.ring.set_enabled(_on)


def _on_stop(s: session.Session) -> None:
    global _on
    _on = False
    if core.ring is not None:
        core.ring.set_enabled(False)


session.add_listener(_on_start, _on_stop)


def is_on() -> bool:
    return _on


def _full(kind: int) -> None:
    """The calling thread's list is full: count the drop, wake the flusher."""
    _tls.drops[kind] += 1
    if not _wake.is_set():
        _wake.set()


def _first(record: tuple[Any, ...]) -> None:
    items = register_current_thread()
    if len(items) < _CAP:
        items.append(record)


def py_mark(message: str, domain: str | None = None) -> None:
    """Instant marker."""
    if _on:
        try:
            items = _tls.items
        except AttributeError:
            return _first((1, _now(), message, domain))
        if len(items) < _CAP:
            items.append((1, _now(), message, domain))
        else:
            _full(1)


def py_push(message: str, domain: str | None = None) -> None:
    """Open a same-thread range."""
    if _on:
        try:
            items = _tls.items
        except AttributeError:
            return _first((2, _now(), message, domain))
        if len(items) < _CAP:
            items.append((2, _now(), message, domain))
        else:
            _full(2)


def py_pop() -> None:
    """Close the innermost same-thread range."""
    if _on:
        try:
            items = _tls.items
        except AttributeError:
            return _first((3, _now(), None, None))
        if len(items) < _CAP:
            items.append((3, _now(), None, None))
        else:
            _full(3)


def py_range_start(message: str, domain: str | None = None) -> int:
    """Open a range that may end on another thread; returns its id (0 when off)."""
    if not _on:
        return 0
    rid = next_range_id()
    if buffers.length() < _CAP:
        buffers.append((4, _now(), message, domain, rid))
    else:
        _full(4)
    return rid


def py_range_end(range_id: int) -> None:
    """Close a range opened by :func:`range_start`."""
    if _on and isinstance(range_id, int) and range_id > 0:
        if buffers.length() < _CAP:
            buffers.append((5, _now(), range_id))
        else:
            _full(5)


if core.ring is not None and BACKEND == "native":
    mark, push, pop = core.ring.mark, core.ring.push, core.ring.pop
    range_start, range_end = core.ring.range_start, core.ring.range_end
else:
    mark, push, pop = py_mark, py_push, py_pop
    range_start, range_end = py_range_start, py_range_end


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
