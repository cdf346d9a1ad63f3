"""``gc_detect_threshold`` (torch_npu's GC detection): Python garbage collections that last longer
than the threshold (ms) while a window records, kept as (start, end, generation) in epoch ns,
the trace's clock; the window saves them as ``FRAMEWORK/gc_events.json`` and the analysis shows
them as ``GC`` events of a ``Python GC`` process in trace_view.json.

The callback (``gc.callbacks``) runs in whatever thread collects, with the GIL: two clock reads
and, for a long collection only, one tuple appended to a bounded list.  At most
:data:`MAX_EVENTS` are kept per window; more are counted (``dropped``)."""

from __future__ import annotations

import gc
import time
from typing import Any

__all__ = ["FILE", "MAX_EVENTS", "GcWatch"]

FILE = "gc_events.json"
MAX_EVENTS = 100_000


class GcWatch:
    """Records collections of at least ``threshold_ms`` between :meth:`start` and :meth:`stop`."""

    def __init__(self, threshold_ms: float) -> None:
        self.threshold_ns = int(threshold_ms * 1_000_000)
        self.events: list[tuple[int, int, int]] = []
        self.dropped = 0
        self._t0 = 0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        now = time.time_ns()
        if phase == "start":
            self._t0 = now
        elif self._t0 and now - self._t0 >= self.threshold_ns:
            if len(self.events) < MAX_EVENTS:
                self.events.append((self._t0, now, int(info.get("generation", -1))))
            else:
                self.dropped += 1

    def start(self) -> None:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def stop(self) -> dict[str, Any]:
        """Unregister; returns the window's document (``threshold_ms``, ``events``, ``dropped``)
        and starts a new window's list."""
        try:
            gc.callbacks.remove(self._callback)
        except ValueError:
            pass
        doc = {"threshold_ms": self.threshold_ns / 1e6, "events": [list(e) for e in self.events],
               "dropped": self.dropped}
        self.events, self.dropped, self._t0 = [], 0, 0
        return doc
