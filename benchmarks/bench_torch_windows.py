"""The torch analysis of one window, on real windows of one job: CPU per window in one process.

Run: ``.venv/bin/python benchmarks/bench_torch_windows.py [--windows 100] [--rounds 3]
[--corunner {off,on,both}] [--inputs DIR]``.

A training loop (``bench_torch.mlp`` and its step, 1 torch thread, schedule(wait=2, warmup=1,
active=3)) is profiled by ``openmsprof.torch.profiler`` with ``analyse_flag=False``: ``--windows``
saved, unanalysed windows of one job (``--inputs DIR`` keeps them and reuses them next time).
Then each side, in a fresh process, analyses copies of them one after the other as the analysis
worker does (``analysis.analyse_dir_info`` and ``record_overhead``) and reports the process CPU of
each window's analysis (all threads; a small window forks nothing); the copies are made before
the timed loop, and the first 5 windows (imports, first-use caches) are not counted:

- ``distinct windows``: the job's windows in the order they were written (what the worker sees:
  every window has new ``ProfilerStep#N`` names and new autograd Sequence numbers);
- ``distinct, 12 ms apart``: the same with a 12 ms sleep before each (a window every 6 steps of
  ~2 ms: the worker's child waits between windows, and its caches cool);
- ``one window repeated``: the first window analysed again and again.  Everything kept from one
  window to the next hits there, so it flatters: it is printed to show by how much, never as
  the cost of a window.

Sides and conditions (without / with one busy process per core, ``benchmarks/corunner.py``)
alternate round by round; each side prints median (min–max) over rounds of its median CPU per
window, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from corunner import CoRunner, add_corunner_arg, corunner_modes, loadavg, summary

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SKIP = 5

_MAKE = """
import logging, sys, torch, openmsprof.torch.profiler as tp
sys.path.insert(0, sys.argv[3])
from bench_torch import _train_step, mlp
logging.disable(logging.WARNING)
torch.set_num_threads(1)
model, opt = mlp()
p = tp.profile(activities=[tp.ProfilerActivity.CPU], schedule=tp.schedule(wait=2, warmup=1, active=3, repeat=0),
               on_trace_ready=tp.tensorboard_trace_handler(sys.argv[1], analyse_flag=False))
p.start()
for _ in range(int(sys.argv[2]) * 6):
    _train_step(model, opt)
    p.step()
p.stop()
"""

_SIDE = """
import json, logging, os, shutil, statistics, sys, time
from pathlib import Path
logging.disable(logging.WARNING)
from openmsprof.torch.profiler import analysis, _analysis_claim
src, work, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
wins = sorted(src.iterdir(), key=lambda p: p.name.rsplit("_", 2)[-2])
if mode == "one":
    wins = [wins[0]] * len(wins)
copies = []
for i, w in enumerate(wins):
    d = work / str(i) / w.name
    shutil.copytree(w, d)
    copies.append(d)
analysis.preload()
gap = 0.012 if mode == "apart" else 0.0
per = []
for d in copies:
    if gap:
        time.sleep(gap)
    c0, t0 = time.process_time(), time.perf_counter()
    read = analysis.analyse_dir_info(d, parallel=True)
    _analysis_claim.record_overhead(d, time.process_time() - c0, time.perf_counter() - t0, "bench", read)
    per.append(time.process_time() - c0)
print(json.dumps({"median_ms": statistics.median(per[int(sys.argv[4]):]) * 1e3}))
"""

SIDES = {"distinct windows": "distinct", "distinct, 12 ms apart": "apart", "one window repeated": "one"}


def _env() -> dict[str, str]:
    """The environment of a side's process: this tree's ``src`` first on the path."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}


def make_windows(out: Path, n: int) -> None:
    """``n`` saved, unanalysed windows of one training job in ``out``."""
    subprocess.run([sys.executable, "-c", _MAKE, str(out), str(n), str(HERE)], check=True, env=_env(),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    got = [p for p in out.iterdir() if p.name.endswith("_ascend_pt")]
    if len(got) < n:
        raise SystemExit(f"bench_torch_windows: {len(got)} windows saved in {out}, {n} asked for")


def run_side(src: Path, mode: str) -> float:
    """One side in a fresh process: its median CPU per window, ms."""
    work = Path(tempfile.mkdtemp(prefix="omsp-bench-win-"))
    try:
        out = subprocess.run([sys.executable, "-c", _SIDE, str(src), str(work), mode, str(SKIP)], check=True, env=_env(),
                             capture_output=True, text=True).stdout
        return float(json.loads(out.strip().splitlines()[-1])["median_ms"])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--windows", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--inputs", type=Path, help="keep the job's windows here and reuse them")
    add_corunner_arg(ap)
    a = ap.parse_args()
    if a.windows <= SKIP:
        ap.error(f"--windows must be more than {SKIP}")
    tmp = None
    src = a.inputs
    if src is None:
        tmp = Path(tempfile.mkdtemp(prefix="omsp-bench-job-"))
        src = tmp / "job"
    try:
        if not (src.is_dir() and len([p for p in src.iterdir() if p.name.endswith("_ascend_pt")]) >= a.windows):
            src.mkdir(parents=True, exist_ok=True)
            make_windows(src, a.windows)
        modes = corunner_modes(a.corunner)
        res: dict[bool, dict[str, list[float]]] = {m: {s: [] for s in SIDES} for m in modes}
        loads: dict[bool, list[float]] = {m: [] for m in modes}
        names = list(SIDES)
        for r in range(a.rounds):
            for busy in (modes if r % 2 == 0 else modes[::-1]):
                with CoRunner(enabled=busy):
                    for name in (names if r % 2 == 0 else names[::-1]):
                        res[busy][name].append(run_side(src, SIDES[name]))
                        loads[busy].append(loadavg())
        print(f"torch analysis CPU per window (median of windows {SKIP + 1}..{a.windows} in one process), "
              f"{a.rounds} rounds, {os.cpu_count()} cpus")
        for busy in modes:
            print(f" co-runner {'on (one busy process per core)' if busy else 'off'}, "
                  f"load {min(loads[busy]):.1f}-{max(loads[busy]):.1f}:")
            for name in names:
                print(f"  {name:24s} {summary(res[busy][name], '.2f')} ms")
            one, dist = res[busy]["one window repeated"], res[busy]["distinct windows"]
            print(f"  distinct ÷ one window repeated: {statistics.median(dist) / statistics.median(one):.2f}")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
