"""``gc_detect_threshold`` (torch_npu's GC detection): Python garbage collections that last at
least the threshold (ms) while profiling, kept as (start, end, generation) in epoch ns.

:class:`GcWatch` is the recorder: the callback (``gc.callbacks``) runs in whatever thread
collects, with the GIL: two clock reads and, for a long collection only, one tuple appended to
a bounded list; at most :data:`MAX_EVENTS` are kept per window, more are counted (``dropped``).

Two users: the torch facade's window saves the document as ``FRAMEWORK/gc_events.json`` (shown
as ``GC`` events of a ``Python GC`` process in trace_view.json), and every other session (the
listener below: ``openmsprof.profile``, acl.json, msprof collect) saves it as
``host/gc_events.json`` of its PROF_ job (the same events in the msprof timeline).  Epoch times
are the recorder's monotonic clock plus the session's start offset, the clock of the job's
database and timeline."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

import orjson

from openmsprof.recorder import session
from openmsprof.recorder.clock import now_ns

__all__ = ["FILE", "MAX_EVENTS", "GcWatch"]

FILE = "gc_events.json"
MAX_EVENTS = 100_000


class GcWatch:
    """Records collections of at least ``threshold_ms`` between :meth:`start` and :meth:`stop`
    (``clock``: epoch ns; ``time.time_ns`` unless given)."""

    def __init__(self, threshold_ms: float, clock: Callable[[], int] = time.time_ns) -> None:
        self.threshold_ns = int(threshold_ms * 1_000_000)
        self.clock = clock
        self.events: list[tuple[int, int, int]] = []
        self.dropped = 0
        self._t0 = 0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        now = self.clock()
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


_watch: GcWatch | None = None


def _on_start(s: session.Session) -> None:
    global _watch
    threshold = s.config.gc_detect_threshold
    if threshold is None or s.config.source == "torch":  # the torch window has its own
        return
    offset = s.start_pair.offset_ns
    _watch = GcWatch(threshold, lambda: now_ns() + offset)
    _watch.start()
    s.note(f"gc_detect_threshold={threshold}: Python collections of at least {threshold} ms are "
           f"recorded (host/{FILE}, the timeline's Python GC process)")


def _on_stop(s: session.Session) -> None:
    global _watch
    watch, _watch = _watch, None
    if watch is None:
        return
    doc = watch.stop()
    s.write_host_file(FILE, orjson.dumps(doc))
    if doc["dropped"]:
        s.note(f"gc_detect_threshold: {doc['dropped']} collections over the {MAX_EVENTS} kept were "
               "not recorded", warn=True)


session.add_listener(_on_start, _on_stop)
