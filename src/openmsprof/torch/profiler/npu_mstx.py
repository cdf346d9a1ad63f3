"""torch_npu ``mstx`` markers: each lands in the job's PROF_ raw data (openmsprof markers, when
``msprof_tx`` is on) and, while Kineto records, in the trace as a ``record_function`` range.

With no collection running each call is two flag tests.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from openmsprof.sources import markers

_recording = False
_ids = itertools.count(1)
_tls = threading.local()
_open: dict[int, tuple[Any, int]] = {}


_include: frozenset[str] = frozenset()
_exclude: frozenset[str] = frozenset()


def set_recording(on: bool, include: Any = (), exclude: Any = ()) -> None:
    """Called by the profiler when Kineto starts/stops recording; ``include`` / ``exclude``:
    experimental_config's mstx domain filters (include wins), applied to the trace's ranges as
    the recorder applies them to the PROF_ job's markers."""
    global _recording, _include, _exclude
    _recording = on
    _include, _exclude = frozenset(include or ()), frozenset(() if include else exclude or ())


def _traced(domain: str) -> bool:
    """Whether a marker of ``domain`` goes into the trace (recording, and not filtered out)."""
    if not _recording:
        return False
    if _include:
        return domain in _include
    return domain not in _exclude


def _rf(message: str) -> Any:
    from torch.autograd.profiler import record_function

    rf = record_function(message)
    rf.__enter__()
    return rf


class mstx:
    """``mstx.mark``, ``range_push``/``range_pop`` (same thread), ``range_start`` → id /
    ``range_end(id)`` (any thread), ``mstx_range`` decorator."""

    @staticmethod
    def mark(message: str, stream: Any = None, domain: str = "default") -> None:
        markers.mark(message, domain)
        if _traced(domain):
            _rf(message).__exit__(None, None, None)

    @staticmethod
    def range_push(message: str, stream: Any = None, domain: str = "default") -> int:
        markers.push(message, domain)
        if _recording:
            stack = getattr(_tls, "stack", None)
            if stack is None:
                stack = _tls.stack = []
            stack.append(_rf(message) if _traced(domain) else None)  # None: a filtered domain
        return 0

    @staticmethod
    def range_pop(domain: str = "default") -> int:
        markers.pop()
        stack = getattr(_tls, "stack", None)
        if stack:
            rf = stack.pop()
            if rf is not None:
                rf.__exit__(None, None, None)
        return 0

    @staticmethod
    def range_start(message: str, stream: Any = None, domain: str = "default") -> int:
        rid = next(_ids)
        mid = markers.range_start(message, domain)
        traced = _traced(domain)
        if traced or mid:
            _open[rid] = (_rf(message) if traced else None, mid)
        return rid

    @staticmethod
    def range_end(range_id: int, domain: str = "default") -> None:
        entry = _open.pop(range_id, None)
        if entry is None:
            return
        rf, mid = entry
        markers.range_end(mid)
        if rf is not None:
            try:
                rf.__exit__(None, None, None)
            except Exception:
                pass

    @staticmethod
    def mstx_range(message: str, stream: Any = None, domain: str = "default") -> Callable[[Any], Any]:
        def deco(func: Any) -> Any:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                mstx.range_push(message, stream, domain)
                try:
                    return func(*args, **kwargs)
                finally:
                    mstx.range_pop(domain)

            wrapper.__name__ = getattr(func, "__name__", "wrapper")
            wrapper.__wrapped__ = func  # type: ignore[attr-defined]
            return wrapper

        return deco


mark = mstx.mark
range_push = mstx.range_push
range_pop = mstx.range_pop
range_start = mstx.range_start
range_end = mstx.range_end
mstx_range = mstx.mstx_range
