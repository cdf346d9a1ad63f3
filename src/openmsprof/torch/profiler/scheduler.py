"""``schedule(wait, active, warmup, repeat, skip_first, skip_first_wait)`` with the exact action
sequence of docs/formats.md §7.4; bad numbers are reset with a warning, never raised."""

from __future__ import annotations

import logging
from collections.abc import Callable

from openmsprof.torch.profiler._enums import ProfilerAction

log = logging.getLogger("openmsprof")


def _as_int(name: str, value: object, minimum: int, fallback: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        log.warning("openmsprof: schedule %s=%r is invalid (an integer >= %d); using %d", name, value,
                    minimum, fallback)
        return fallback
    return value


class Schedule:
    """Callable ``step -> ProfilerAction``; attributes hold the validated numbers."""

    __slots__ = ("active", "n", "repeat", "skip_first", "skip_first_wait", "wait", "warmup")

    def __init__(self, wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0,
                 skip_first_wait: int = 0) -> None:
        self.wait = _as_int("wait", wait, 0, 0)
        self.active = _as_int("active", active, 1, 1)
        self.warmup = _as_int("warmup", warmup, 0, 0)
        self.repeat = _as_int("repeat", repeat, 0, 0)
        self.skip_first = _as_int("skip_first", skip_first, 0, 0)
        self.skip_first_wait = _as_int("skip_first_wait", skip_first_wait, 0, 0)
        self.n = self.wait + self.warmup + self.active

    def __call__(self, step: int) -> ProfilerAction:
        if step < 0:
            raise ValueError(f"schedule: step {step} is negative")
        if step < self.skip_first:
            return ProfilerAction.NONE
        s = step - self.skip_first
        if self.skip_first_wait != 0:
            s += self.wait
        n = self.n
        if self.repeat > 0 and s / n >= self.repeat:
            return ProfilerAction.NONE
        m = s % n
        if m < self.wait:
            return ProfilerAction.NONE
        if m < self.wait + self.warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if m < n - 1 else ProfilerAction.RECORD_AND_SAVE

    def to_dict(self) -> dict[str, int]:
        return {"wait": self.wait, "active": self.active, "warmup": self.warmup, "repeat": self.repeat,
                "skip_first": self.skip_first, "skip_first_wait": self.skip_first_wait}


def schedule(wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0) -> Schedule:
    """torch_npu ``schedule``: keyword use as in the seed (``schedule(wait=0, warmup=0, active=1)``)."""
    return Schedule(wait, active, warmup, repeat, skip_first, skip_first_wait)


def default_schedule(step: int) -> ProfilerAction:
    """No schedule: always record (the window is saved on stop)."""
    return ProfilerAction.RECORD


ScheduleFn = Callable[[int], ProfilerAction]
