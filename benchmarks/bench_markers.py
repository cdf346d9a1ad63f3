"""Marker cost with profiling off/on, against peers measured in the same process.

Prints ns per call (best of several rounds) and ratios to the pure-Python floor, nvtx and
torch.profiler.record_function, the raw bytes per marker and the flusher's CPU share at
1 M markers/s.  Run: ``.venv/bin/python benchmarks/bench_markers.py [--quick]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import openmsprof
from openmsprof import mstx
from openmsprof.config import ProfileConfig
from openmsprof.recorder import session


def per_call_ns(body: Callable[[int], None], n: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        body(n)
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def loop_overhead(n: int) -> None:
    for _ in range(n):
        pass


def floor_body(n: int) -> None:
    out: list[tuple[int, int]] = []
    now = time.perf_counter_ns

    def rec(i: int) -> None:
        out.append((now(), i))

    for _ in range(n):
        rec(7)


def mark_body(n: int) -> None:
    mark = mstx.mark
    for _ in range(n):
        mark("step")


def pushpop_body(n: int) -> None:
    push, pop = mstx.range_push, mstx.range_pop
    for _ in range(n):
        push("step")
        pop()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n, rounds = (100_000, 3) if args.quick else (400_000, 5)
    base = per_call_ns(lambda k: loop_overhead(k), n, rounds)
    rows: list[tuple[str, float]] = []

    def run(name: str, body: Callable[[int], None]) -> float:
        ns = per_call_ns(body, n, rounds) - base
        rows.append((name, ns))
        return ns

    def run_parked(name: str, body: Callable[[int], None], s: session.Session) -> float:
        best = float("inf")
        for _ in range(rounds):
            t0 = time.perf_counter_ns()
            body(n)
            best = min(best, (time.perf_counter_ns() - t0) / n)
            s.flusher.drain()  # outside the timed part
        rows.append((name, best - base))
        return best - base

    floor = run("pure-Python floor: append((perf_counter_ns(), id))", floor_body)
    off_mark = run("mstx.mark, profiling off", mark_body)
    off_pp = run("mstx.range_push+range_pop, profiling off", pushpop_body)
    with tempfile.TemporaryDirectory() as tmp:
        # Hot path alone: the flusher thread is parked and drained by hand between rounds, so
        # the figure is what the calling thread pays inline.  The flusher's own cost per record
        # is measured next, and both together under a sustained load after that.
        s = session.start(ProfileConfig(), tmp, flush_interval=3600.0)

        on_mark = run_parked("mstx.mark, profiling on (hot path)", mark_body, s)
        on_pp = run_parked("mstx.range_push+range_pop, profiling on (hot path)", pushpop_body, s)
        for _ in range(n):
            mstx.mark("step")
        t0 = time.perf_counter_ns()
        s.flusher.drain()
        flush_ns = (time.perf_counter_ns() - t0) / n
        rows.append(("flusher encode+write per record (off the hot path)", flush_ns))
        session.stop()
        sustained = sustained_pushpop(Path(tmp), n)
        rows.append(("push+pop sustained, flusher running (GIL shared)", sustained))
        raw = sum(p.stat().st_size for p in (s.root / "host" / "data").glob("Mstx.records.*.slice_*") if not p.name.endswith(".done"))
        marks_written = s.flusher.records
        bytes_per_record = (raw - 16) / max(1, marks_written)
        flusher_share = measure_flusher(Path(tmp), seconds=1.0 if args.quick else 3.0)
    nvtx_pp = torch_rf = None
    try:
        import nvtx

        def nvtx_body(k: int) -> None:
            for _ in range(k):
                nvtx.push_range("step")
                nvtx.pop_range()

        nvtx_pp = run("nvtx.push_range+pop_range (peer)", nvtx_body)
    except Exception as exc:  # pragma: no cover - peer missing
        print(f"(nvtx not measured: {exc})", file=sys.stderr)
    try:
        from torch.profiler import ProfilerActivity, profile, record_function

        import torch

        def rf_body(k: int) -> None:
            for _ in range(k):
                with record_function("step"):
                    pass

        with profile(activities=[ProfilerActivity.CPU]):
            torch_rf = per_call_ns(rf_body, max(1000, n // 40), 2) - base
        rows.append(("torch record_function, profiler on (peer)", torch_rf))
        del torch
    except Exception as exc:  # pragma: no cover
        print(f"(torch not measured: {exc})", file=sys.stderr)

    print(f"{'what':58s} {'ns/call':>9s}")
    for name, ns in rows:
        print(f"{name:58s} {ns:9.1f}")
    print()
    print(f"budget: mark on <= 200 ns (hot path): {on_mark:.0f} ns  ({'ok' if on_mark <= 200 else 'OVER'})")
    print(f"budget: push+pop on <= 450 ns (hot path): {on_pp:.0f} ns  ({'ok' if on_pp <= 450 else 'OVER'})")
    print(f"flusher: {flush_ns:.0f} ns per record; push+pop with the flusher sharing the GIL: {sustained:.0f} ns")
    print(f"budget: marker off <= 60 ns: mark {off_mark:.0f} ns, push+pop {off_pp:.0f} ns "
          f"({'ok' if max(off_mark, off_pp / 2) <= 60 else 'OVER'})")
    print(f"ratio mark on / pure-Python floor: {on_mark / floor:.2f}x")
    if nvtx_pp:
        print(f"ratio push+pop on / nvtx push+pop: {on_pp / nvtx_pp:.2f}x")
    if torch_rf:
        print(f"ratio torch record_function / our push+pop: {torch_rf / on_pp:.1f}x")
    print(f"raw bytes per marker record: {bytes_per_record:.1f}")
    print(f"flusher CPU share at 1 M markers/s: {flusher_share * 100:.1f} % of one core")
    return 0


def sustained_pushpop(tmp: Path, n: int) -> float:
    """push+pop per call with the flusher thread running at its normal interval."""
    session.start(ProfileConfig(), tmp / "sustained")
    best = min(per_call_ns(pushpop_body, n, 1) for _ in range(3))
    session.stop()
    return best


def measure_flusher(tmp: Path, seconds: float) -> float:
    """Issue 1 M marks/s (paced in 10 ms bursts) and report the flusher's busy fraction."""
    s = openmsprof.start(output=tmp / "flush")
    mark = mstx.mark
    t_start = time.perf_counter()
    issued = 0
    while (elapsed := time.perf_counter() - t_start) < seconds:
        target = int(elapsed * 1_000_000) + 10_000
        while issued < target:
            mark("m")
            issued += 1
        time.sleep(0.001)
    wall = time.perf_counter() - t_start
    busy = s.flusher.cycle_seconds
    session.stop()
    return busy / wall


if __name__ == "__main__":
    raise SystemExit(main())
