"""Marker hot path (msproftx / mstx) on the recorder core of :mod:`openmsprof.recorder.core`.

Native core: ``mark``/``push``/``pop``/``range_start``/``range_end`` *are* the C functions of
``_ring`` (one flag test when off; one ring write when on).  Python fallback
(``OPENMSPROF_RECORDER=python`` or no compiler): the functions of
:mod:`openmsprof.recorder.pymarkers` (one flag test when off; when on, one int append to the
calling thread's own list, or a counted drop when the thread's marks are full).
"""

from __future__ import annotations

from typing import Any

from openmsprof.recorder import core, pymarkers, session

__all__ = ["BACKEND", "Range", "is_on", "mark", "pop", "push", "range_end", "range_start"]

_on = False
BACKEND = core.BACKEND


def _on_start(s: session.Session) -> None:
    global _on
    _on = bool(s.config.msproftx)
    if core.ring is not None and s.backend == "native":
        core.ring.set_enabled(_on)
    else:
        pymarkers.set_enabled(_on)


def _on_stop(s: session.Session) -> None:
    global _on
    _on = False
    pymarkers.set_enabled(False)
    if core.ring is not None:
        core.ring.set_enabled(False)


session.add_listener(_on_start, _on_stop)


def is_on() -> bool:
    return _on


py_mark, py_push, py_pop = pymarkers.mark, pymarkers.push, pymarkers.pop
py_range_start, py_range_end = pymarkers.range_start, pymarkers.range_end

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
