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
* :func:`interleaved` runs named sides round by round under each condition (orders alternating)
  and :func:`report` prints each side and the ratios of named pairs, wall beside tree CPU, with
  the load: the shape every benchmark's figures take.

Benchmarks take ``--corunner {off,on,both}``; ``both`` interleaves rounds with and without it.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import psutil

_CORUNNER_PIDS: set[int] = set()  # excluded from tree_cpu_s: the co-runner is not the measured work

__all__ = ["CoRunner", "add_corunner_arg", "busy", "corunner_modes", "interleaved", "loadavg", "measured", "report", "summary",
           "tree_cpu_s"]


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


def busy() -> bool:
    """Whether a :class:`CoRunner` is running now (a side that keeps results by condition)."""
    return bool(_CORUNNER_PIDS)


def corunner_modes(choice: str) -> list[bool]:
    """``--corunner`` value → the list of conditions to run (``both`` = off then on)."""
    return {"off": [False], "on": [True], "both": [False, True]}[choice]


def tree_cpu_s(pid: int | None = None) -> float:
    """CPU seconds of ``pid`` (default: this process) and every live descendant, plus the
    waited-for children of this process (``RUSAGE_CHILDREN``).  Co-runner processes are not
    counted (a block measured inside a :class:`CoRunner` does not span their exit).  This
    process's own share is read with ``time.process_time()`` (the same user + system time of
    all its threads, at ns rather than /proc's 10 ms resolution)."""
    me = os.getpid()
    proc = psutil.Process(pid or me)
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        if p.pid in _CORUNNER_PIDS:
            continue
        if p.pid == me:
            total += time.process_time()
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


def add_corunner_arg(ap: argparse.ArgumentParser) -> None:
    """The ``--corunner {off,on,both}`` option every benchmark takes (default ``both``)."""
    ap.add_argument("--corunner", choices=("off", "on", "both"), default="both",
                    help="without / with one busy process per core (both: interleaved round by round)")


Results = dict[bool, dict[str, list[dict[str, float]]]]


def interleaved(sides: Mapping[str, Callable[[], object]], rounds: int, modes: Sequence[bool],
                cleanup: Callable[[], object] | None = None, alternate: bool = True) -> Results:
    """Each round runs every condition of ``modes`` (co-runner off / on; their order alternates
    by round) and in it every side once (order alternating too), each inside :func:`measured`:
    wall, process-tree CPU and load of every call, by condition and side (``alternate=False``:
    the sides always in their given order, for steps that depend on the one before).  Nothing runs between
    the sides untimed but the co-runner's start and ``cleanup`` (after each side: removing the
    benchmark's own output, e.g. a copied job, never the profiler's work)."""
    out: Results = {m: {s: [] for s in sides} for m in modes}
    names = list(sides)
    for r in range(rounds):
        for busy in (modes if r % 2 == 0 else list(modes)[::-1]):
            with CoRunner(enabled=busy):
                for name in (names if r % 2 == 0 or not alternate else names[::-1]):
                    with measured() as m:
                        sides[name]()
                    out[busy][name].append(m)
                    if cleanup is not None:
                        cleanup()
    return out


def report(results: Results, pairs: Sequence[tuple[str, str]], per: Mapping[str, float] | None = None,
           unit: str = "ms", scale: float = 1e3, goal: str = "") -> None:
    """Print, per condition: each side's wall and tree CPU (``scale`` × seconds ÷ ``per[side]``,
    the calls one side's run made, default 1), median (min–max), and for each ``(ours, peer)``
    of ``pairs`` the median (min–max) of the per-round ratios of the per-call figures, wall
    beside CPU, with the load average range of the condition."""
    per = per or {}
    for busy, by in results.items():
        loads = [m["load"] for ms in by.values() for m in ms]
        lo = f"load {min(loads):.1f}-{max(loads):.1f}" if loads else "no rounds"
        print(f" co-runner {'on (one busy process per core)' if busy else 'off'}, {lo}:")
        for name, ms in by.items():
            k = per.get(name, 1.0)
            print(f"  {name:44s} wall {summary([m['wall_s'] * scale / k for m in ms], '.2f')} {unit}, "
                  f"tree CPU {summary([m['cpu_s'] * scale / k for m in ms], '.2f')} {unit}")
        for a, b in pairs:
            ka, kb = per.get(a, 1.0), per.get(b, 1.0)
            wall = [x["wall_s"] / ka / max(y["wall_s"] / kb, 1e-12) for x, y in zip(by[a], by[b], strict=True)]
            cpu = [x["cpu_s"] / ka / max(y["cpu_s"] / kb, 1e-12) for x, y in zip(by[a], by[b], strict=True)]
            print(f"  ratio {a} / {b}: wall {summary(wall)}, tree CPU {summary(cpu)}{goal}")
