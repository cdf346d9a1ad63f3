"""Trigger decisions: the slow-step test against a running median, and the per-kind rate limit."""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass

__all__ = ["KINDS", "RateLimit", "SlowStep", "Trigger"]

KINDS = ("slow_step", "hang", "signal", "exception", "manual")
WINDOW = 101


@dataclass
class Trigger:
    """Why a dump was written (``info.json``'s ``flight.trigger``)."""

    kind: str
    t_ns: int
    step: int | None = None
    duration_ns: int | None = None
    median_ns: int | None = None
    threshold_ns: int | None = None
    detail: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "step": self.step, "duration_ns": self.duration_ns,
                "median_ns": self.median_ns, "threshold_ns": self.threshold_ns, "detail": self.detail}


class SlowStep:
    """``factor`` × the median of the last :data:`WINDOW` steps, after ``warmup`` steps (the
    first steps compile, load, warm caches) and once 5 steps are in the window."""

    def __init__(self, factor: float, warmup: int) -> None:
        self.factor, self.warmup = factor, warmup
        self.seen = 0
        self.order: deque[int] = deque()
        self.sorted: list[int] = []

    def median(self) -> int | None:
        n = len(self.sorted)
        return self.sorted[n // 2] if n >= 5 else None

    def check(self, duration: int) -> tuple[int, int] | None:
        """(median, threshold) when ``duration`` is slow; the step then joins the window."""
        self.seen += 1
        if self.seen <= self.warmup:
            return None
        med = self.median()
        hit = None
        if med is not None and duration > self.factor * med:
            hit = (med, int(self.factor * med))
        bisect.insort(self.sorted, duration)
        self.order.append(duration)
        if len(self.order) > WINDOW:
            old = self.order.popleft()
            del self.sorted[bisect.bisect_left(self.sorted, old)]
        return hit


class RateLimit:
    """One dump per kind per ``period_ns``; what was held back is counted."""

    def __init__(self, period_ns: int) -> None:
        self.period = period_ns
        self.last: dict[str, int] = {}
        self.suppressed: dict[str, int] = {}

    def allow(self, kind: str, now: int) -> bool:
        last = self.last.get(kind)
        if last is not None and now - last < self.period:
            self.suppressed[kind] = self.suppressed.get(kind, 0) + 1
            return False
        self.last[kind] = now
        return True
