"""Marker cost and the recorder core under load, native core and pure-Python fallback side by side.

1. Per call, sides interleaved round by round, median and min-max (ns, loop overhead removed):
   the pure-Python floor ``def floor(i): buf.append((perf_counter_ns(), i))`` (its list made
   before and freed after the timer), ``mstx.mark`` and push+pop on each backend with the
   flusher running through the timed region, profiling off, nvtx and torch ``record_function``;
   in wall time and in the CPU time of the whole process (all its threads, the flusher's too,
   but not the time other work on a shared machine preempted it), with the ratio to the floor
   of the medians and the median of the per-round ratios.
2. Sustained: a child process marks flat out on 4 threads for ``--seconds`` s; the parent
   samples its RSS and the age of the newest record on disk every 0.1 s, then checks
   emitted = recorded + dropped per thread and times the import (records/s).
3. Flusher CPU at 1 M records/s (paced), raw bytes per record.
4. ``--kills N`` SIGKILLs of a 4-thread flat-out marker at random points: kill-to-newest-record.
5. Native burst: one thread flat out for 1 s at the default budget, share kept and drop reasons,
   written to ``--burst-dir`` (default: the temp dir) with its file system named; each round's
   ~0.5 GB job is removed once counted (kept, 14 rounds filled tmpfs with 8 GB: memory no
   user's single burst takes).

Every part runs with and without the co-runner (``--corunner {off,on,both}``, default both),
rounds interleaved.  Nothing is drained or paused untimed: each timed block is one run of calls
and the drain of what it left buffered.

Run: ``.venv/bin/python benchmarks/bench_markers.py [--quick] [--kills 20] [--seconds 10] [--per-call-only]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psutil

from openmsprof import mstx
from openmsprof.config.model import ProfileConfig
from openmsprof.parse.importer import import_job
from openmsprof.recorder import core, rawfile, rawread, session
from openmsprof.recorder.records import Kind
from openmsprof.sources import markers

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.corunner import CoRunner, corunner_modes
from tests.recorder.flatout import kill_once  # the same child as the test


def load() -> str:
    a, b, c = os.getloadavg()
    return f"load {a:.2f} {b:.2f} {c:.2f}"


def timed(body: Callable[[int], None], n: int) -> float:
    t0 = time.perf_counter_ns()
    body(n)
    return (time.perf_counter_ns() - t0) / n


def loop(n: int) -> None:
    for _ in range(n):
        pass


def make_floor() -> tuple[Callable[[int], None], list[tuple[int, int]]]:
    buf: list[tuple[int, int]] = []
    now = time.perf_counter_ns

    def floor(i: int) -> None:
        buf.append((now(), i))

    def body(n: int) -> None:
        f = floor
        for _ in range(n):
            f(7)

    return body, buf


def mark_body(mark: Callable[..., None], domain: str | None = None) -> Callable[[int], None]:
    if domain is not None:
        def in_domain(n: int) -> None:
            m, d = mark, domain
            for _ in range(n):
                m("step", d)
        return in_domain

    def body(n: int) -> None:
        m = mark
        for _ in range(n):
            m("step")
    return body


def pushpop_body(push: Callable[..., None], pop: Callable[[], None]) -> Callable[[int], None]:
    def body(n: int) -> None:
        pu, po = push, pop
        for _ in range(n):
            pu("step")
            po()
    return body


BACKEND_FNS = {
    "native": (lambda: (core.ring.mark, core.ring.push, core.ring.pop)) if core.ring else None,
    "python": lambda: (markers.py_mark, markers.py_push, markers.py_pop),
}


def timed_block(body: Callable[[int], None], n: int,
                tail: Callable[[], object] | None = None) -> tuple[float, float]:
    """ns per call over ``n`` calls in one timed block, as wall time and as the CPU time of the
    whole process (every thread, the flusher's included; time the machine's other work
    preempted this process is not in it).  Nothing runs untimed in between: a recorder's
    flusher runs, and a fallback producer drains its own full list, inside the block, and
    ``tail`` (the session flusher's ``drain``: what the block left in the threads' lists,
    encoded and written) ends it inside the timer too."""
    wall_ns, cpu_ns = time.perf_counter_ns, time.process_time_ns
    c0 = cpu_ns()
    t0 = wall_ns()
    body(n)
    if tail is not None:
        tail()
    t1 = wall_ns()
    return (t1 - t0) / n, (cpu_ns() - c0) / n


def per_call(n: int, rounds: int, tmp: Path, modes: list[bool]) -> dict[bool, tuple[dict[str, list[float]], dict[str, list[float]]]]:
    """Interleaved rounds (each round: every condition of ``modes``, co-runner off/on, and in
    it every side); each backend's session (flusher thread running) lives through its timed
    block.  Returns wall ns and process-CPU ns per call, by condition and side."""
    out: dict[bool, tuple[dict[str, list[float]], dict[str, list[float]]]] = {m: ({}, {}) for m in modes}
    backends = [b for b, f in BACKEND_FNS.items() if f is not None]
    for r in range(rounds):
        for busy in modes:
            res, cpu = out[busy]
            with CoRunner(enabled=busy):
                base = timed_block(loop, n)

                def add(name: str, ns: tuple[float, float]) -> None:
                    res.setdefault(name, []).append(ns[0] - base[0])  # noqa: B023
                    cpu.setdefault(name, []).append(ns[1] - base[1])  # noqa: B023

                body, buf = make_floor()
                add("floor", timed_block(body, n))
                buf.clear()
                add("off mark", timed_block(mark_body(mstx.mark), n))
                for b in backends:
                    fns = BACKEND_FNS[b]
                    assert fns is not None
                    mark, push, pop = fns()
                    core.BACKEND = b
                    add(f"{b} off, mark in a domain", timed_block(mark_body(mark, "noisy"), n))
                    s = session.start(output=tmp / f"{b}{r}{int(busy)}")
                    # each block's records drained inside its own timer (the native core's ring
                    # is written by its C flusher thread as it runs; what it holds at the end is
                    # written by stop(), as every session ends)
                    tail = s.stream.flusher.drain
                    add(f"{b} mark", timed_block(mark_body(mark), n, tail))
                    add(f"{b} push+pop", timed_block(pushpop_body(push, pop), n // 2, tail))
                    session.stop()
                    if s.overhead["records_dropped"]:
                        print(f"  ({b} round {r}, co-runner {'on' if busy else 'off'}: "
                              f"{s.overhead['records_dropped']} records dropped: {s.overhead['drop_reasons']}; {load()})")
                    # the domain filter: a mark in an excluded domain, and one without a domain
                    # while the filter excludes the default domain (goal: the off cost)
                    session.start(ProfileConfig(mstx_domain_exclude=["noisy", "default"]),
                                  output=tmp / f"{b}{r}{int(busy)}x")
                    add(f"{b} mark, excluded domain", timed_block(mark_body(mark, "noisy"), n))
                    add(f"{b} mark, default domain excluded", timed_block(mark_body(mark), n))
                    session.stop()
    return out


def peers(n: int) -> dict[str, float]:
    out: dict[str, float] = {}
    try:
        import nvtx

        def nv(k: int) -> None:
            for _ in range(k):
                nvtx.push_range("step")
                nvtx.pop_range()
        out["nvtx push+pop (peer)"] = statistics.median(timed(nv, n) for _ in range(3))
    except Exception as exc:  # pragma: no cover - peer missing
        print(f"(nvtx not measured: {exc})", file=sys.stderr)
    try:
        from torch.profiler import ProfilerActivity, profile, record_function

        def rf(k: int) -> None:
            for _ in range(k):
                with record_function("step"):
                    pass
        with profile(activities=[ProfilerActivity.CPU]):
            out["torch record_function, profiler on (peer)"] = statistics.median(
                timed(rf, max(1000, n // 20)) for _ in range(3))
    except Exception as exc:  # pragma: no cover
        print(f"(torch not measured: {exc})", file=sys.stderr)
    return out


FLAT_OUT = """
import json, sys, threading, time
import openmsprof
from openmsprof import mstx
seconds = float(sys.argv[2])
openmsprof.start(output=sys.argv[1])
emitted = {}
go = threading.Barrier(5)
def work():
    go.wait()
    mark, now, end = mstx.mark, time.monotonic, time.monotonic() + seconds
    k = 0
    while now() < end:
        for _ in range(1000):
            mark("flat")
        k += 1000
    emitted[threading.get_native_id()] = k
ts = [threading.Thread(target=work) for _ in range(4)]
for t in ts: t.start()
print("ready", flush=True)
go.wait()
for t in ts: t.join()
openmsprof.stop()
print(json.dumps(emitted), flush=True)
"""


def newest_on_disk(data: Path) -> int | None:
    best = None
    for p in data.glob("Mstx*.records.host.slice_*"):
        if p.name.endswith(".done"):
            continue
        size = p.stat().st_size
        if size >= 48:
            with open(p, "rb") as f:
                f.seek(16 + (size - 16) // 32 * 32 - 32)
                rec = np.frombuffer(f.read(32), dtype=rawfile.GENERIC_DTYPE)
            best = max(best or 0, int(rec["t0"][0]))
    return best


def sustained(backend: str, seconds: float, tmp: Path) -> dict[str, object]:
    out = tmp / f"sus_{backend}"
    env = dict(os.environ, OPENMSPROF_RECORDER=backend)
    p = subprocess.Popen([sys.executable, "-c", FLAT_OUT, str(out), str(seconds)],
                         stdout=subprocess.PIPE, text=True, env=env)
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "ready"
    proc = psutil.Process(p.pid)
    rss0 = proc.memory_info().rss
    rss_max, ages = rss0, []
    t_ready = time.perf_counter_ns()
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end - 0.05:
        time.sleep(0.1)
        try:
            rss_max = max(rss_max, proc.memory_info().rss)
        except psutil.Error:
            break
        jobs = list(out.glob("PROF_*"))
        newest = newest_on_disk(jobs[0] / "host" / "data") if jobs else None
        ages.append((time.perf_counter_ns() - (newest or t_ready)) / 1e9)
    emitted = {int(k): v for k, v in json.loads(p.stdout.read().splitlines()[-1]).items()}
    p.wait()
    job = next(out.glob("PROF_*"))
    over = json.loads((job / "host" / "openmsprof_overhead.json").read_text())
    recs = rawread.read_all_records(job / "host" / "data")
    marks = recs[recs["kind"] == Kind.MARK]
    exact = all(int(np.count_nonzero(marks["tid"] == tid))
                + over["drops_by_thread_kind"].get(str(tid), {}).get("mark", 0) == k
                for tid, k in emitted.items())
    return {"emitted": sum(emitted.values()), "recorded": len(marks), "dropped": over["records_dropped"],
            "exact": exact, "rss_growth_mb": (rss_max - rss0) / 2**20,
            "age_max_s": max(ages) if ages else float("nan"),
            "age_median_s": statistics.median(ages) if ages else float("nan")}


PACED = """
import sys, time, openmsprof
from openmsprof import mstx
s = openmsprof.start(output=sys.argv[1])
mark = mstx.mark
t0 = time.perf_counter(); issued = 0; seconds = float(sys.argv[2])
while (el := time.perf_counter() - t0) < seconds:
    target = int(el * 1_000_000) + 10_000
    while issued < target:
        mark("m"); issued += 1
    time.sleep(0.001)
wall = time.perf_counter() - t0
openmsprof.stop()
print(wall, issued)
"""


def flusher_share(backend: str, seconds: float, tmp: Path) -> tuple[float, float, int, float]:
    """Flusher CPU share at 1 M records/s, raw bytes per record, records issued, and the
    import speed of that job (records/s)."""
    out = tmp / f"paced_{backend}"
    env = dict(os.environ, OPENMSPROF_RECORDER=backend)
    r = subprocess.run([sys.executable, "-c", PACED, str(out), str(seconds)], capture_output=True,
                       text=True, env=env, timeout=120)
    wall, issued = r.stdout.split()
    job = next(out.glob("PROF_*"))
    over = json.loads((job / "host" / "openmsprof_overhead.json").read_text())
    t0, c0 = time.perf_counter(), time.process_time()
    res = import_job(job, progress=False)
    imp = res.records / (time.perf_counter() - t0)
    IMPORT_CPU[backend] = res.records / max(1e-9, time.process_time() - c0)
    return (over["flusher_cpu_ns"] / 1e9 / float(wall), over["bytes_written"] / max(1, over["records_written"]),
            int(issued), imp)


BURST = """
import json, sys, time
import openmsprof
from openmsprof import mstx
from openmsprof.recorder import session
openmsprof.start(output=sys.argv[1])
mark = mstx.mark
end = time.monotonic() + 1.0
k = 0
while time.monotonic() < end:
    for _ in range(1000):
        mark("flat")
    k += 1000
s = session.stop()
print(json.dumps({"emitted": k, "written": s.overhead["records_written"], "why": s.overhead["drop_reasons"]}))
"""


def fs_type(path: Path) -> str:
    """The file system type of the mount holding ``path`` (its longest mount point)."""
    best, kind = "", "?"
    real = os.path.realpath(path)
    with open("/proc/self/mounts", encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and (real == parts[1] or real.startswith(parts[1].rstrip("/") + "/")) \
                    and len(parts[1]) > len(best):
                best, kind = parts[1], parts[2]
    return f"{kind} at {best}"


def burst(rounds: int, tmp: Path, modes: list[bool], formats: tuple[str, ...] = ("packed",)) -> None:
    """5. One thread marks flat out for 1 s on the native core at the default budget: the share
    of its records kept, and why the rest dropped; rounds interleave the co-runner off/on and the
    record formats (``packed``, the default; ``fixed``: ``OPENMSPROF_RECORDER_PACKED=0``).  Each
    round's job is removed once counted, after its size on disk is taken."""
    sides = [(busy, form) for busy in modes for form in formats]
    kept: dict[tuple[bool, str], list[float]] = {s: [] for s in sides}
    rates: dict[tuple[bool, str], list[float]] = {s: [] for s in sides}
    sizes: dict[tuple[bool, str], list[float]] = {s: [] for s in sides}
    why: dict[tuple[bool, str], dict[str, int]] = {s: {} for s in sides}
    for r in range(rounds):
        for busy, form in sides:
            out = tmp / f"burst{r}{int(busy)}{form}"
            env = dict(os.environ, OPENMSPROF_RECORDER="native",
                       OPENMSPROF_RECORDER_PACKED="0" if form == "fixed" else "1")
            try:
                with CoRunner(enabled=busy):
                    res = subprocess.run([sys.executable, "-c", BURST, str(out)], capture_output=True, text=True,
                                         timeout=120, env=env)
                sizes[(busy, form)].append(sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 2**20)
            finally:
                shutil.rmtree(out, ignore_errors=True)
            d = json.loads(res.stdout.splitlines()[-1])
            kept[(busy, form)].append(100.0 * (d["written"] - 1) / d["emitted"])  # - the thread-name record
            rates[(busy, form)].append(d["emitted"] / 1e6)
            for k, v in d["why"].items():
                why[(busy, form)][k] = why[(busy, form)].get(k, 0) + v
    for busy, form in sides:
        side = (busy, form)
        print(f"burst native, 1 thread x 1 s flat out, default budget, {form} records, co-runner "
              f"{'on' if busy else 'off'}, output on {fs_type(tmp)}: kept {fmt(kept[side], 2).strip()} % "
              f"(rounds under 99 %: {sum(k < 99.0 for k in kept[side])} of {len(kept[side])}), rate "
              f"{fmt(rates[side], 2).strip()} M/s, job {fmt(sizes[side], 0).strip()} MiB, "
              f"drops by reason {why[side] or 'none'}; {load()}")


#: import speed per CPU-second of the importing process (all its threads), by backend
IMPORT_CPU: dict[str, float] = {}


def kills(backend: str, n: int, tmp: Path) -> list[float]:
    """``n`` SIGKILLs at random points (0.2-3 s) of the child the tests kill too."""
    rng = random.Random(20)
    return [kill_once(tmp / f"kill_{backend}_{i}", backend, rng.uniform(0.2, 3.0)) for i in range(n)]


def fmt(xs: list[float], digits: int = 1) -> str:
    return f"{statistics.median(xs):8.{digits}f}  ({min(xs):.{digits}f}-{max(xs):.{digits}f})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--corunner", choices=("off", "on", "both"), default="both")
    ap.add_argument("--per-call-only", action="store_true", help="only parts 1 and 5 (per-call cost, burst)")
    ap.add_argument("--burst-dir", type=Path, default=None,
                    help="where the burst jobs are written (the file system under test; default: the temp dir)")
    ap.add_argument("--burst-formats", default="packed",
                    help="record formats the burst interleaves: packed, fixed or packed,fixed")
    ap.add_argument("--burst-only", action="store_true", help="only part 5 (the burst)")
    args = ap.parse_args()
    n, rounds = (100_000, 5) if args.quick else (300_000, 9)
    backends = [b for b, f in BACKEND_FNS.items() if f is not None]
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        formats = tuple(args.burst_formats.split(","))
        if not set(formats) <= {"packed", "fixed"}:
            ap.error(f"--burst-formats: {args.burst_formats!r} (packed, fixed or packed,fixed)")
        if args.burst_dir is not None:
            args.burst_dir.mkdir(parents=True, exist_ok=True)
        if args.burst_only:
            if core.ring is None:
                print("burst: the native core is not built")
                return 1
            burst(3 if args.quick else 7, args.burst_dir or tmp, corunner_modes(args.corunner), formats)
            return 0
        print(f"per call, ns (median (min-max) of {rounds} interleaved rounds of {n}); {load()}")
        by_mode = per_call(n, rounds, tmp, corunner_modes(args.corunner))
        for busy, (res, cpu) in by_mode.items():
            print(f" co-runner {'on' if busy else 'off'} ({os.cpu_count()} busy processes):" if busy
                  else " co-runner off:")
            for name, xs in res.items():
                print(f"  {name:44s} {fmt(xs)}")
            print(f"  the same calls in CPU time of the whole process (all threads; {load()}):")
            for name, xs in cpu.items():
                print(f"  {name:44s} {fmt(xs)}")
            for label, by in (("wall", res), ("CPU", cpu)):
                floor = statistics.median(by["floor"])
                for b in backends:
                    paired = [m / f for m, f in zip(by[f"{b} mark"], by["floor"], strict=True)]
                    print(f"  ratio ({label}) {b} mark / floor: {statistics.median(by[f'{b} mark']) / floor:.2f}x "
                          f"(per round {fmt(paired, 2).strip()}); push+pop / floor: "
                          f"{statistics.median(by[f'{b} push+pop']) / floor:.2f}x")
            print(f"  off: {statistics.median(res['off mark']):.1f} ns ({load()})")
            for b in backends:
                for label, by in (("wall", res), ("CPU", cpu)):
                    off = by[f"{b} off, mark in a domain"]
                    for what in ("excluded domain", "default domain excluded"):
                        paired = [x - o for x, o in zip(by[f"{b} mark, {what}"], off, strict=True)]
                        print(f"  {b} mark, {what}, minus off ({label}): "
                              f"{statistics.median(by[f'{b} mark, {what}']) - statistics.median(off):+.1f} ns "
                              f"(per round {fmt(paired).strip()})")
        if core.ring is not None:
            burst(3 if args.quick else 7, args.burst_dir or tmp, corunner_modes(args.corunner), formats)
        if args.per_call_only:
            return 0
        for name, ns in peers(n // 10).items():
            print(f"  {name:44s} {ns:8.1f}")
        for b in backends:
            s = sustained(b, args.seconds if not args.quick else 3.0, tmp)
            print(f"sustained {b}: 4 threads x {args.seconds if not args.quick else 3.0:.0f} s flat out: "
                  f"emitted {s['emitted']}, recorded {s['recorded']}, dropped {s['dropped']}, "
                  f"exact={s['exact']}; RSS growth {s['rss_growth_mb']:.1f} MB; newest on disk "
                  f"age max {s['age_max_s']:.3f} s median {s['age_median_s']:.3f} s; {load()}")
            share, bpr, issued, imp = flusher_share(b, 1.0 if args.quick else 3.0, tmp)
            print(f"flusher {b}: {share * 100:.2f} % of one core at 1 M records/s ({issued} issued); "
                  f"{bpr:.2f} raw bytes per record; import of that job {imp / 1e6:.2f} M records/s "
                  f"({IMPORT_CPU[b] / 1e6:.2f} M per CPU-second); {load()}")
            if args.kills:
                losses = kills(b, args.kills if not args.quick else 3, tmp)
                print(f"kills {b}: {len(losses)} SIGKILLs, kill-to-newest-record median "
                      f"{statistics.median(losses):.3f} s max {max(losses):.3f} s, "
                      f"{sum(x > 1.0 for x in losses)} over 1 s; {load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
