"""Flight recorder overhead (issue 27), with and without a co-runner saturating every core.

1. Armed, not triggered: rounds of ``--steps`` training-like steps (numpy + Python, an mstx
   push/pop and a mark per step), bare and armed interleaved round by round; per round the
   armed/bare ratio of the mean step in wall time and in process CPU time (the sampler thread
   included); median (min–max) with the load average.  Target: CPU ≤ 1.03×.
2. Memory: a child marks flat out with ``memory_mb=16`` and ``keep_s=3600`` (so only the memory
   bound trims) for ``--mem-seconds`` s; its RSS growth and the history's own estimate at
   intervals.  Target: ≤ memory_mb whatever the run length.
3. Dump: 30 s of history (stacks of 4 threads at 20 Hz, markers at 5 kHz, steps at 50 Hz, host
   samples at 10 Hz) written as a job; seconds per dump.  Target: ≤ 1 s.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/bench_flight.py [--corunner both] [--quick]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corunner import CoRunner, corunner_modes, loadavg, summary

import openmsprof
from openmsprof import mstx
from openmsprof.flight import dump
from openmsprof.flight.history import History, thread_names
from openmsprof.sources.sampler_proc import ProcReader, sample


def work_step(a: np.ndarray, n_py: int) -> float:
    mstx.range_push("step")
    s = 0.0
    for _ in range(4):
        s += float((a @ a).sum())
    acc = 0
    for i in range(n_py):
        acc += i * i
    mstx.mark("loss")
    mstx.range_pop()
    return s + acc


SAMPLER_SHARE: list[float] = []


def one_round(armed: bool, steps: int, out: Path) -> tuple[float, float]:
    a = np.random.default_rng(0).random((96, 96))
    fr = openmsprof.flight_recorder(out, slow_step=1000, hang_s=600, signal=None) if armed else None
    if fr is not None:
        fr.start()
    work_step(a, 20000)  # warm
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(steps):
        work_step(a, 20000)
        if fr is not None:
            fr.step()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    if fr is not None:
        fr.stop()
        SAMPLER_SHARE.append(fr.sampler.cpu_ns / 1e9 / cpu)
        assert not fr.dumps, "an armed round triggered"
    return wall / steps, cpu / steps


def bench_steps(rounds: int, steps: int, corunner: bool) -> None:
    wall_r, cpu_r, bare_ms = [], [], []
    SAMPLER_SHARE.clear()
    with tempfile.TemporaryDirectory() as tmp, CoRunner(enabled=corunner):
        for r in range(rounds):
            order = (False, True) if r % 2 == 0 else (True, False)
            res = {armed: one_round(armed, steps, Path(tmp)) for armed in order}
            wall_r.append(res[True][0] / res[False][0])
            cpu_r.append(res[True][1] / res[False][1])
            bare_ms.append(res[False][0] * 1e3)
        load = loadavg()
    print(f"  steps (co-runner {'on' if corunner else 'off'}): bare step {statistics.median(bare_ms):.2f} ms; "
          f"armed/bare wall {summary(wall_r)}, CPU {summary(cpu_r)}; the sampler thread's share of the armed "
          f"rounds' CPU {summary(SAMPLER_SHARE)}; {rounds} rounds x {steps} steps; load {load:.2f}")


MEM_CHILD = """
import os, sys, threading, time, psutil
import openmsprof
from openmsprof import mstx
secs, mb = float(sys.argv[1]), float(sys.argv[2])
stop = threading.Event()
def deep(n):  # 8 idle threads 60 frames deep: the stack store fills its share within the run
    return deep(n - 1) if n else stop.wait()
for k in range(8):
    threading.Thread(target=deep, args=(60,), daemon=True).start()
p = psutil.Process()
base = p.memory_info().rss
fr = openmsprof.flight_recorder(sys.argv[3], keep_s=3600, memory_mb=mb, signal=None).start()
t0 = time.time(); nxt = 0; i = 0
while time.time() - t0 < secs:
    for _ in range(1000):
        mstx.mark("m"); mstx.range_push("r"); mstx.range_pop()
    fr.step(); i += 1
    if time.time() - t0 >= nxt:
        h = fr.history
        print(f"{time.time() - t0:.0f} {(p.memory_info().rss - base) / 2**20:.1f} {h.estimate_bytes() / 2**20:.1f} "
              f"{len(h.marks)} {sum(h.evicted.values())} {h.stack_bytes / 2**20:.1f}", flush=True)
        nxt += max(1.0, secs / 6)
fr.stop()
"""


def bench_memory(seconds: float, corunner: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp, CoRunner(enabled=corunner):
        res = subprocess.run([sys.executable, "-c", textwrap.dedent(MEM_CHILD), str(seconds), "16", tmp],
                             capture_output=True, text=True, timeout=seconds + 120)
        load = loadavg()
    rows = [line.split() for line in res.stdout.splitlines() if line.strip()]
    if not rows:
        print("  memory: child failed:", res.stderr.strip().splitlines()[-1:])
        return
    peak = max(float(r[1]) for r in rows)
    print(f"  memory (co-runner {'on' if corunner else 'off'}, memory_mb=16, keep_s=3600): RSS growth by time "
          + ", ".join(f"{r[0]}s {r[1]} MB" for r in rows)
          + f"; estimate {rows[-1][2]} MB (stacks {rows[-1][5]} MB), marks kept {rows[-1][3]}, evicted {rows[-1][4]}; "
          f"peak {peak} MB; load {load:.2f}")


def fill_history(seconds: float = 30.0) -> History:
    h = History(keep_s=seconds, memory_mb=64)
    now = time.perf_counter_ns()
    t_first = now - int(seconds * 1e9)
    frames = sys._current_frames()
    tids, _ = thread_names()
    events: list[threading.Thread] = []
    stop = threading.Event()
    for k in range(3):  # four Python threads in all
        t = threading.Thread(target=stop.wait, name=f"worker-{k}")
        t.start()
        events.append(t)
    frames = sys._current_frames()
    tids, _ = thread_names()
    for k in range(int(seconds * 20)):
        h.add_stacks(t_first + k * 50_000_000, frames, tids, set())
    for k in range(int(seconds * 5000)):
        ts = t_first + k * 200_000
        h.add_mark((ts, 2 if k % 2 == 0 else 3, 1000, "phase" if k % 2 == 0 else None, None, 0))
    for k in range(int(seconds * 50)):
        h.add_step(k, t_first + k * 20_000_000, t_first + (k + 1) * 20_000_000)
    reader = ProcReader(psutil.Process().pid)
    for k in range(int(seconds * 10)):
        h.add_host(t_first + k * 100_000_000, sample(reader, True, True))
    stop.set()
    for t in events:
        t.join()
    return h


def bench_dump(repeats: int, corunner: bool) -> None:
    h = fill_history()
    snap = h.snapshot()
    times, cpus = [], []
    with tempfile.TemporaryDirectory() as tmp, CoRunner(enabled=corunner):
        for _ in range(repeats):
            t0, c0 = time.perf_counter(), time.thread_time()
            snap = h.snapshot()
            dump.write_job(Path(tmp), snap, {"trigger": {"kind": "manual"}, "evicted": {}}, time.perf_counter_ns(),
                           h.keep_ns, 1000, {1000: "MainThread"}, -1)
            times.append(time.perf_counter() - t0)
            cpus.append(time.thread_time() - c0)
        load = loadavg()
    print(f"  dump of 30 s (co-runner {'on' if corunner else 'off'}): {len(snap['marks'])} marks, "
          f"{len(snap['stacks'])} stack samples, {len(snap['steps'])} steps, {len(snap['host'])} host samples: "
          f"wall {statistics.median(times):.3f} s ({min(times):.3f}–{max(times):.3f}), CPU "
          f"{statistics.median(cpus):.3f} s ({min(cpus):.3f}–{max(cpus):.3f}); load {load:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corunner", choices=("off", "on", "both"), default="both")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--mem-seconds", type=float, default=60)
    ap.add_argument("--only", choices=("steps", "memory", "dump"), action="append",
                    help="run only these parts (repeatable; default all)")
    a = ap.parse_args()
    rounds, steps, mem_s, reps = (4, 30, 12, 2) if a.quick else (a.rounds, a.steps, a.mem_seconds, 5)
    print(f"bench_flight: {psutil.cpu_count()} CPUs, load {loadavg():.2f}")
    parts = set(a.only or ("steps", "memory", "dump"))
    for co in corunner_modes(a.corunner):
        if "steps" in parts:
            bench_steps(rounds, steps, co)
        if "memory" in parts:
            bench_memory(mem_s, co)
        if "dump" in parts:
            bench_dump(reps, co)


if __name__ == "__main__":
    main()
