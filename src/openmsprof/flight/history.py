"""The flight recorder's bounded in-memory history: markers, step spans, host samples, stacks.

Every store is a :class:`collections.deque` (appends and pops are atomic under the GIL, so
producers take no lock).  Two bounds hold at once: entries older than ``keep_s`` are trimmed by
the sampler thread at every tick, and each store has a share of ``memory_mb`` (an entry evicted
while still younger than ``keep_s`` is counted in :attr:`History.evicted`).
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from types import FrameType
from typing import Any

__all__ = ["Frame", "History", "capture_stacks", "thread_names"]

Frame = tuple[str, str, int]  # (file, qualified function, line)

#: Bytes an entry costs, measured with tracemalloc on CPython 3.11 (deque slot included, rounded up).
MARK_BYTES = 200
STEP_BYTES = 160
STACK_BASE_BYTES = 200
FRAME_REF_BYTES = 8
FRAME_KEY_BYTES = 400
HOST_BYTES = 400
MAX_DEPTH = 128
_FRAME_KEYS = 20_000


class History:
    """The last ``keep_s`` seconds, within ``memory_mb``."""

    def __init__(self, keep_s: float, memory_mb: float) -> None:
        self.keep_ns = int(keep_s * 1e9)
        budget = int(memory_mb * 1024 * 1024)
        self.budget = budget
        #: (ts, kind, native tid, message, domain, range id); kinds as records.Kind
        self.marks: deque[tuple[int, int, int, Any, Any, int]] = deque(maxlen=max(64, budget * 35 // 100 // MARK_BYTES))
        #: (step index, t0, t1)
        self.steps: deque[tuple[int, int, int]] = deque(maxlen=max(64, budget * 5 // 100 // STEP_BYTES))
        #: (ts, packed COUNTER records)
        self.host: deque[tuple[int, bytes]] = deque(maxlen=max(16, budget * 5 // 100 // HOST_BYTES))
        #: (ts, native tid, frames innermost first)
        self.stacks: deque[tuple[int, int, tuple[Frame, ...]]] = deque()
        self.stack_bytes = 0
        self.stack_cap = budget * 45 // 100
        self._keys: dict[tuple[Any, int], Frame] = {}
        self.evicted: dict[str, int] = {"marks": 0, "steps": 0, "host": 0, "stacks": 0}

    # -- producers (any thread) ----------------------------------------------------------
    def add_mark(self, rec: tuple[int, int, int, Any, Any, int]) -> None:
        marks = self.marks
        if len(marks) == marks.maxlen and rec[0] - marks[0][0] < self.keep_ns:
            self.evicted["marks"] += 1
        marks.append(rec)

    def add_step(self, index: int, t0: int, t1: int) -> None:
        steps = self.steps
        if len(steps) == steps.maxlen and t1 - steps[0][2] < self.keep_ns:
            self.evicted["steps"] += 1
        steps.append((index, t0, t1))

    # -- sampler thread ------------------------------------------------------------------
    def add_host(self, ts: int, packed: bytes) -> None:
        if len(self.host) == self.host.maxlen:
            self.evicted["host"] += 1
        self.host.append((ts, packed))

    def frame(self, f: FrameType) -> Frame:
        key = (f.f_code, f.f_lineno)
        fr = self._keys.get(key)
        if fr is None:
            if len(self._keys) >= _FRAME_KEYS:  # bounded; samples keep the tuples they hold
                self._keys.clear()
            code = f.f_code
            fr = self._keys[key] = (code.co_filename, getattr(code, "co_qualname", code.co_name), f.f_lineno)
        return fr

    def add_stacks(self, ts: int, frames: dict[int, FrameType], tids: dict[int, int], skip: set[int]) -> None:
        """One sample of every Python thread but ``skip`` (thread idents)."""
        cap = self.stack_cap - len(self._keys) * FRAME_KEY_BYTES
        for ident, top in frames.items():
            if ident in skip:
                continue
            out: list[Frame] = []
            f: FrameType | None = top
            while f is not None and len(out) < MAX_DEPTH:
                out.append(self.frame(f))
                f = f.f_back
            self.stacks.append((ts, tids.get(ident, ident), tuple(out)))
            self.stack_bytes += STACK_BASE_BYTES + FRAME_REF_BYTES * len(out)
        while self.stack_bytes > cap and self.stacks:
            old = self.stacks.popleft()
            self.stack_bytes -= STACK_BASE_BYTES + FRAME_REF_BYTES * len(old[2])
            if ts - old[0] < self.keep_ns:
                self.evicted["stacks"] += 1

    def trim(self, now: int) -> None:
        """Drop what is older than ``keep_s``."""
        cut = now - self.keep_ns
        for dq in (self.marks, self.host):
            while dq and dq[0][0] < cut:
                dq.popleft()
        while self.steps and self.steps[0][2] < cut:
            self.steps.popleft()
        stacks = self.stacks
        while stacks and stacks[0][0] < cut:
            old = stacks.popleft()
            self.stack_bytes -= STACK_BASE_BYTES + FRAME_REF_BYTES * len(old[2])

    def estimate_bytes(self) -> int:
        """What the stores hold now, by the per-entry costs above."""
        host = sum(len(p) for _t, p in list(self.host)) + len(self.host) * 100
        return (len(self.marks) * MARK_BYTES + len(self.steps) * STEP_BYTES + host
                + self.stack_bytes + len(self._keys) * FRAME_KEY_BYTES)

    def snapshot(self) -> dict[str, list[Any]]:
        """Copies of every store (each ``list(deque)`` is one C call)."""
        return {"marks": list(self.marks), "steps": list(self.steps),
                "host": list(self.host), "stacks": list(self.stacks)}


def thread_names() -> tuple[dict[int, int], dict[int, str]]:
    """(ident → native tid, native tid → name) of the live Python threads."""
    tids: dict[int, int] = {}
    names: dict[int, str] = {}
    for t in threading.enumerate():
        if t.ident is None:
            continue
        tid = t.native_id if t.native_id is not None else t.ident
        tids[t.ident] = tid
        names[tid] = t.name
    return tids, names


def capture_stacks(skip: set[int] | None = None) -> list[dict[str, Any]]:
    """Every Python thread's stack now (innermost frame first), for the trigger record."""
    tids, names = thread_names()
    out = []
    for ident, top in sys._current_frames().items():
        if skip and ident in skip:
            continue
        frames: list[list[Any]] = []
        f: FrameType | None = top
        while f is not None and len(frames) < MAX_DEPTH:
            code = f.f_code
            frames.append([code.co_filename, getattr(code, "co_qualname", code.co_name), f.f_lineno])
            f = f.f_back
        tid = tids.get(ident, ident)
        out.append({"tid": tid, "thread": names.get(tid, str(ident)), "frames": frames})
    return out


def mono_ns() -> int:
    return time.perf_counter_ns()
