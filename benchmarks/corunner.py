"""The busy machine users run on: a co-runner that saturates every core, and the measures every
benchmark reports beside it (issue 26).

* :class:`CoRunner` starts one busy process per core at normal priority (a pure-Python spin, so
  it competes for the CPU like a training loop does) and stops them on exit::

      with CoRunner(enabled=args.corunner):
          ...timed region...

* :func:`tree_cpu_s` is the CPU time (user + system) of a process and all of its descendants,
  the children that have exited and been waited for included (``RUSAGE_CHILDREN``), so a cost
  moved to a worker process is still counted.
* :func:`loadavg` is the 1-minute load average, printed beside every figure.
* :func:`summary` prints median (min–max) of per-round ratios.

Benchmarks take ``--corunner {off,on,both}``; ``both`` interleaves rounds with and without it.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import psutil

_CORUNNER_PIDS: set[int] = set()  # excluded from tree_cpu_s: the co-runner is not the measured work

__all__ = ["CoRunner", "corunner_modes", "loadavg", "measured", "summary", "tree_cpu_s"]


_SPIN = "x = 0\nwhile True:\n    x += 1\n"


class CoRunner:
    """One busy process per core (``os.cpu_count()``), normal priority, for the ``with`` block.
    Each is a bare ``python -c`` spin (not a multiprocessing spawn, which would re-import the
    benchmark's own modules, torch included, at every start)."""

    def __init__(self, enabled: bool = True, procs: int | None = None) -> None:
        self.enabled = enabled
        self.procs = procs or os.cpu_count() or 1
        self._workers: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> CoRunner:
        if self.enabled:
            self._workers = [subprocess.Popen([sys.executable, "-S", "-c", _SPIN]) for _ in range(self.procs)]
            for w in self._workers:
                _CORUNNER_PIDS.add(w.pid)
            time.sleep(0.3)  # let them reach the spin before the timed region
        return self

    def __exit__(self, *exc: object) -> None:
        for w in self._workers:
            w.kill()
            w.wait()
            _CORUNNER_PIDS.discard(w.pid)
        self._workers = []


def corunner_modes(choice: str) -> list[bool]:
    """``--corunner`` value → the list of conditions to run (``both`` = off then on)."""
    return {"off": [False], "on": [True], "both": [False, True]}[choice]


def tree_cpu_s(pid: int | None = None) -> float:
    """CPU seconds of ``pid`` (default: this process) and every live descendant, plus the
    waited-for children of this process (``RUSAGE_CHILDREN``).  Co-runner processes are not
    counted (a block measured inside a :class:`CoRunner` does not span their exit)."""
    proc = psutil.Process(pid or os.getpid())
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        if p.pid in _CORUNNER_PIDS:
            continue
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    if pid in (None, os.getpid()):
        ch = resource.getrusage(resource.RUSAGE_CHILDREN)
        total += ch.ru_utime + ch.ru_stime
    return total


def loadavg() -> float:
    return os.getloadavg()[0]


@contextmanager
def measured() -> Iterator[dict[str, float]]:
    """Wall and process-tree CPU of the block, with the load average at its end."""
    out: dict[str, float] = {}
    w0, c0 = time.perf_counter(), tree_cpu_s()
    yield out
    out["wall_s"] = time.perf_counter() - w0
    out["cpu_s"] = tree_cpu_s() - c0
    out["load"] = loadavg()


def summary(values: Sequence[float], fmt: str = ".3f") -> str:
    """``median (min–max)`` of per-round values (ratios by default, 3 decimals)."""
    if not values:
        return "n/a"
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}–{max(values):{fmt}})"
