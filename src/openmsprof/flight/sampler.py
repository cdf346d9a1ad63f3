"""The flight recorder's sampler thread: every Python thread's stack at ``stack_hz`` (≥ 20 Hz),
host CPU and memory at ``host_hz`` (the host sampler's ``/proc`` reader), the ``keep_s`` trim,
and a tick callback (the hang watchdog).  Native frames are not sampled (not supported here)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

from openmsprof.flight.history import History, mono_ns, thread_names
from openmsprof.sources.sampler_proc import ProcReader, sample

__all__ = ["Sampler"]


class Sampler:
    """A daemon thread; :meth:`stop` ends it within one period."""

    def __init__(self, history: History, stack_hz: float, host_hz: float,
                 tick: Callable[[int], None], skip: set[int]) -> None:
        self.history, self.tick, self.skip = history, tick, set(skip)
        self.period = 1.0 / stack_hz
        self.host_every = max(1, round(stack_hz / host_hz)) if host_hz else 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="openmsprof-flight-sampler", daemon=True)
        self.samples = 0
        self.cpu_ns = 0

    @property
    def ident(self) -> int | None:
        return self.thread.ident

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(5.0)

    def _run(self) -> None:
        reader = ProcReader(os.getpid())
        try:
            reader.cpu()
            reader.proc_cpu()
        except OSError:
            self.host_every = 0
        skip = self.skip | {threading.get_ident()}
        tids, _names = thread_names()
        n = 0
        next_t = time.monotonic()
        while not self._stop.is_set():
            c0 = time.thread_time_ns()
            now = mono_ns()
            try:
                if n % 20 == 0:  # thread names: once a second at 20 Hz
                    tids, _names = thread_names()
                self.history.add_stacks(now, sys._current_frames(), tids, skip)
                if self.host_every and n % self.host_every == 0:
                    self.history.add_host(now, sample(reader, True, True))
                self.history.trim(now)
                self.tick(now)
            except Exception:
                pass
            n += 1
            self.samples = n
            self.cpu_ns += time.thread_time_ns() - c0
            next_t += self.period
            delay = next_t - time.monotonic()
            if delay < 0:  # fell behind (GIL busy): no burst to catch up
                next_t = time.monotonic()
                delay = 0.0
            self._stop.wait(delay)
