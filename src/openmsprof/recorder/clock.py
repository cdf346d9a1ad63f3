"""Clocks: monotonic ns for records, a (monotonic, epoch) pair to map them to wall time."""

from __future__ import annotations

import time
from dataclasses import dataclass

now_ns = time.perf_counter_ns


@dataclass(frozen=True)
class ClockPair:
    """A monotonic reading and the wall-clock time at that instant (both ns)."""

    mono_ns: int
    wall_ns: int

    @property
    def offset_ns(self) -> int:
        """Add to a monotonic ns value to get epoch ns."""
        return self.wall_ns - self.mono_ns


def read_pair() -> ClockPair:
    """Read wall time between two monotonic reads and use the midpoint (docs/formats.md §1)."""
    best: ClockPair | None = None
    best_gap = 1 << 62
    for _ in range(5):
        m0 = now_ns()
        w = time.time_ns()
        m1 = now_ns()
        if m1 - m0 < best_gap:
            best_gap = m1 - m0
            best = ClockPair((m0 + m1) // 2, w)
    assert best is not None
    return best


def epoch_to_mono(epoch_ns: int, pair: ClockPair) -> int:
    return epoch_ns - pair.offset_ns


def local_stamp(wall_ns: int, millis: bool = True) -> str:
    """``YYYYmmddHHMMSSmmm`` (or without ms) in local time."""
    secs, rem = divmod(wall_ns, 1_000_000_000)
    text = time.strftime("%Y%m%d%H%M%S", time.localtime(secs))
    return f"{text}{rem // 1_000_000:03d}" if millis else text
