"""Marker taps: while armed, the mstx entry points (``openmsprof.mstx``, ``sources.markers`` and
through it ``torch_npu``'s ``mstx``) also append to the flight history.

The tap rebinds the module attributes and calls the originals first, so a profiling session
running at the same time records as before; :meth:`MarkerTap.remove` puts the originals back.
Ranges named ``step_range`` end a step (push/pop on one thread, or start/end by id).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import openmsprof.mstx as mstx_facade
from openmsprof.flight.history import History, mono_ns
from openmsprof.recorder import session
from openmsprof.sources import markers

__all__ = ["MarkerTap"]

_NAMES = ("mark", "push", "pop", "range_start", "range_end")
_FACADE_ALIASES = {"range_push": "push", "range_pop": "pop"}
#: Range ids the tap hands out while no session gives one (never collide with the recorder's).
_ids = itertools.count(1 << 48)


class MarkerTap:
    """Rebinds the marker entry points to recording wrappers while installed."""

    def __init__(self, history: History, step_range: str | None,
                 on_step_range: Callable[[int, int], None]) -> None:
        self.history, self.step_range, self.on_step_range = history, step_range, on_step_range
        self.orig = {n: getattr(markers, n) for n in _NAMES}
        self.wrapped = self._wrappers()
        self._open: dict[int, int] = {}
        self._stacks: dict[int, list[int]] = {}
        self._saved_on = markers._on

    def _wrappers(self) -> dict[str, Callable[..., Any]]:
        o_mark, o_push, o_pop = self.orig["mark"], self.orig["push"], self.orig["pop"]
        o_start, o_end = self.orig["range_start"], self.orig["range_end"]
        add, tid_of, now = self.history.add_mark, threading.get_native_id, mono_ns
        step_name, stacks, open_ = self.step_range, self._stacks_ref, self._open_ref

        def mark(message: str, domain: str | None = None) -> None:
            o_mark(message, domain)
            add((now(), 1, tid_of(), message, domain, 0))

        def push(message: str, domain: str | None = None) -> None:
            o_push(message, domain)
            t, tid = now(), tid_of()
            add((t, 2, tid, message, domain, 0))
            st = stacks().setdefault(tid, [])
            if len(st) < 1024:  # pushes never popped must not grow it without bound
                st.append(t if message == step_name else -1)

        def pop() -> None:
            o_pop()
            t, tid = now(), tid_of()
            add((t, 3, tid, None, None, 0))
            st = stacks().get(tid)
            if st:
                t0 = st.pop()
                if t0 >= 0:
                    self.on_step_range(t0, t)

        def range_start(message: str, domain: str | None = None) -> int:
            rid = o_start(message, domain) or next(_ids)
            t = now()
            add((t, 4, tid_of(), message, domain, rid))
            if message == step_name:
                open_()[rid] = t
            return int(rid)

        def range_end(range_id: int) -> None:
            o_end(range_id)
            t = now()
            add((t, 5, tid_of(), None, None, range_id))
            t0 = open_().pop(range_id, None)
            if t0 is not None:
                self.on_step_range(t0, t)

        return {"mark": mark, "push": push, "pop": pop, "range_start": range_start, "range_end": range_end}

    def _stacks_ref(self) -> dict[int, list[int]]:
        return self._stacks

    def _open_ref(self) -> dict[int, int]:
        return self._open

    def _targets(self) -> list[tuple[ModuleType, str, str]]:
        out = [(markers, n, n) for n in _NAMES]
        out += [(mstx_facade, n, n) for n in _NAMES if hasattr(mstx_facade, n)]
        out += [(mstx_facade, alias, n) for alias, n in _FACADE_ALIASES.items()]
        return out

    def install(self) -> None:
        for module, attr, name in self._targets():
            if getattr(module, attr, None) is self.orig[name]:
                setattr(module, attr, self.wrapped[name])
        self._saved_on = markers._on
        markers._on = True  # mstx_range (markers.Range) tests this flag before calling push/pop

    def remove(self) -> None:
        for module, attr, name in self._targets():
            if getattr(module, attr, None) is self.wrapped[name]:
                setattr(module, attr, self.orig[name])
        s = session.current()
        markers._on = bool(s is not None and s.collecting and s.config.msproftx)
