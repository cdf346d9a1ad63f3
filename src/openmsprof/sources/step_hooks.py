"""Step boundaries for listeners above the sources (the flight recorder): framework facades call
:func:`notify` at each step end (``torch_npu.profiler``'s ``step()``); with no listener it is one
list test."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["add", "listeners", "notify", "remove"]

listeners: list[Callable[[], None]] = []


def add(fn: Callable[[], None]) -> None:
    if fn not in listeners:
        listeners.append(fn)


def remove(fn: Callable[[], None]) -> None:
    if fn in listeners:
        listeners.remove(fn)


def notify() -> None:
    """A step ended; a failing listener never reaches the caller."""
    for fn in list(listeners):
        try:
            fn()
        except Exception:
            pass
