"""``openmsprof analyze`` of a torch run against HolisticTraceAnalysis (HTA) on the same workload.

Run: ``.venv/bin/python benchmarks/bench_analyze_hta.py [--iterations 500000] [--repeat 3]
[--hta-python .venv-hta/bin/python] [--corunner {off,on,both}] [--inputs DIR]``.

Also the torch ``analyse`` of the same rank dir (``python -m openmsprof.torch.profiler.analysis``,
the Ascend views from the raw Kineto trace, kept by ``data_simplification=False``) against HTA's
parse: CPU time of each fresh process and the children it waited for (``RUSAGE_CHILDREN``), and
its peak RSS (goal: CPU ratio <= 0.3).  Rounds interleave the sides, and the conditions without
and with a co-runner on every core (``benchmarks/corunner.py``).

The workload (softplus then tanh on a 64×64 tensor, ``--iterations`` times: two aten ops per
iteration) is profiled once, by ``openmsprof.torch.profiler`` with its trace handler (a rank
dir).  Both sides read the same file: HTA's trace dir holds a hard link (or a copy) of the rank
dir's ``FRAMEWORK/torch.kineto_trace.json`` (the Kineto JSON torch.profiler wrote).  ``--inputs
DIR`` keeps the rank dir in DIR and reuses it on the next run (a 1 M-event collection takes many
minutes on a busy machine).
Then, each in a fresh process, interleaved: ``openmsprof analyze -dir RANK`` the first time
(it builds the rank's kernel database) and again, and HTA's ``TraceAnalysis(trace_dir=…)``
(parsing the trace into its frames) followed by ``get_temporal_breakdown()``.  HTA's analyses
are GPU-kernel-centric: on a CPU-only trace they find no kernels, so its figure is mostly the
trace load — the work every analysis of it starts with.  HTA lives in its own venv (it pulls
Jupyter; it needs no torch): ``python -m venv .venv-hta && .venv-hta/bin/pip install
holistictraceanalysis``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from corunner import CoRunner, corunner_modes, loadavg, summary

HTA_SNIPPET = """
import sys, logging
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
try:
    a.get_temporal_breakdown(visualize=False)
except Exception as exc:  # no GPU kernels in a CPU trace
    print("temporal breakdown:", type(exc).__name__, file=sys.stderr)
"""

WORK = """
import sys, torch
n = int(sys.argv[2])
a = torch.randn(64, 64)
def loop():
    for _ in range(n):
        torch.tanh(torch.nn.functional.softplus(a))
import openmsprof.torch.profiler as tp
prof = tp.profile(schedule=tp.schedule(wait=0, active=1, repeat=1), record_shapes=True,
                  on_trace_ready=tp.tensorboard_trace_handler(sys.argv[1]),
                  experimental_config=tp._ExperimentalConfig(data_simplification=False))  # re-analysed
with prof:
    loop()
    prof.step()
"""


def load() -> str:
    return "load {:.2f}/{:.2f}/{:.2f}".format(*os.getloadavg())


def stats(v: list[float]) -> str:
    return f"median {statistics.median(v):7.2f} s (min {min(v):.2f}, max {max(v):.2f}, n={len(v)})"


#: both sides as users run them: with .pyc files
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(argv: list[str]) -> float:
    """Wall time of a fresh process (interpreter start and imports included)."""
    return costed(argv)[0]


def costed(argv: list[str]) -> tuple[float, float, float]:
    """(wall s, CPU s of the process and the children it waited for, peak RSS MiB) of a fresh
    process (interpreter start and imports included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    with subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV) as p:
        _pid, status, use = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise subprocess.CalledProcessError(p.returncode, argv)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall, cpu, use.ru_maxrss / 1024


def analyse_vs_hta(rank: Path, kineto: Path, hta: Path, repeat: int, conditions: list[bool]) -> None:
    """torch ``analyse`` of ``rank`` (re-analysed each time) vs HTA's parse of ``kineto``."""
    ours_argv = [sys.executable, "-m", "openmsprof.torch.profiler.analysis", str(rank)]
    hta_argv = [str(hta), "-c", HTA_SNIPPET, str(kineto)]
    res: dict[bool, dict[str, list[tuple[float, float, float]]]] = {c: {"ours": [], "hta": []} for c in conditions}
    loads: dict[bool, list[float]] = {c: [] for c in conditions}
    for r in range(repeat):
        for cond in (conditions if r % 2 == 0 else conditions[::-1]):
            with CoRunner(cond):
                sides = [("ours", ours_argv), ("hta", hta_argv)]
                for name, argv in (sides if r % 2 == 0 else sides[::-1]):
                    if name == "hta" and not hta.exists():
                        continue
                    shutil.rmtree(rank / "ASCEND_PROFILER_OUTPUT", ignore_errors=True)
                    loads[cond].append(loadavg())
                    res[cond][name].append(costed(argv))
                    loads[cond].append(loadavg())
                    w, c, m = res[cond][name][-1]
                    print(f"  analyse round {r}, co-runner {'on' if cond else 'off'}: {name} wall {w:.2f} s, "
                          f"CPU {c:.2f} s, peak RSS {m:.0f} MiB, {load()}", flush=True)
    for cond in conditions:
        o, h = res[cond]["ours"], res[cond]["hta"]
        print(f"torch analyse vs HTA parse, co-runner {'on ' if cond else 'off'}, load {min(loads[cond]):.1f}-"
              f"{max(loads[cond]):.1f}:")
        for name, v in (("analyse", o), ("HTA", h)):
            if v:
                print(f"  {name:<8} CPU {stats([x[1] for x in v])}  wall {stats([x[0] for x in v])}  "
                      f"peak RSS MiB {statistics.median([x[2] for x in v]):.0f}")
        if h:
            print(f"  ours / HTA per round: CPU {summary([x[1] / y[1] for x, y in zip(o, h, strict=False)])} "
                  f"(goal <= 0.3); wall {summary([x[0] / y[0] for x, y in zip(o, h, strict=False)])}; "
                  f"peak RSS {summary([x[2] / y[2] for x, y in zip(o, h, strict=False)])}")
        else:
            print(f"  HTA: not measured ({hta} missing)")


def prepare(root: Path, iterations: int) -> Path:
    """The rank dir under ``root/ours`` (profiled unless there already) and HTA's trace dir
    ``root/kineto`` holding the same Kineto file."""
    ranks = sorted((root / "ours").glob("*_ascend_pt"))
    if not ranks:
        (root / "ours").mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-c", WORK, str(root / "ours"), str(iterations)], check=True,
                       capture_output=True)
        ranks = sorted((root / "ours").glob("*_ascend_pt"))
    (rank,) = ranks
    src, dst = rank / "FRAMEWORK" / "torch.kineto_trace.json", root / "kineto" / "rank0.json"
    dst.parent.mkdir(exist_ok=True)
    dst.unlink(missing_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
    return rank


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--hta-python", default=".venv-hta/bin/python")
    ap.add_argument("--corunner", choices=("off", "on", "both"), default="both",
                    help="the analyse comparison without / with one busy process per core")
    ap.add_argument("--only", default="analyse,analyze", help="analyse (torch analyse vs HTA), analyze (vs HTA)")
    ap.add_argument("--inputs", help="keep the profiled rank dir under INPUTS/ITERATIONS and reuse it")
    a = ap.parse_args()
    hta = Path(a.hta_python)
    exe = str(Path(sys.executable).with_name("openmsprof"))
    with tempfile.TemporaryDirectory(prefix="bench_hta_") as tmp:
        root = Path(a.inputs) / str(a.iterations) if a.inputs else Path(tmp)
        rank = prepare(root, a.iterations)
        trace = root / "kineto" / "rank0.json"
        print(f"workload: {a.iterations:,} x (softplus, tanh); Kineto trace "
              f"{trace.stat().st_size / 2**20:.0f} MiB, read by both sides; {load()}")
        if "analyse" in a.only:
            analyse_vs_hta(rank, root / "kineto", hta, a.repeat, corunner_modes(a.corunner))
        if "analyze" not in a.only:
            return
        first, again, peer = [], [], []
        for _ in range(a.repeat):
            shutil.rmtree(rank / ".openmsprof", ignore_errors=True)
            first.append(timed([exe, "analyze", "-dir", str(rank)]))
            again.append(timed([exe, "analyze", "-dir", str(rank)]))
            if hta.exists():
                peer.append(timed([str(hta), "-c", HTA_SNIPPET, str(root / "kineto")]))
            print(f"  round: first {first[-1]:.2f} s, again {again[-1]:.2f} s, HTA "
                  f"{peer[-1] if peer else float('nan'):.2f} s, {load()}")
        with subprocess.Popen([exe, "analyze", "-dir", str(rank)], stdout=subprocess.PIPE,
                              text=True) as p:
            out = p.communicate()[0]
        print(f"openmsprof analyze (first, builds kernels.db) {stats(first)}  {load()}")
        print(f"openmsprof analyze (again)                    {stats(again)}")
        print("  " + out.splitlines()[0][:150])
        if peer:
            print(f"HTA TraceAnalysis + temporal breakdown       {stats(peer)}  ratio ours "
                  f"(first)/HTA {statistics.median(first) / statistics.median(peer):.2f}, "
                  f"(again)/HTA {statistics.median(again) / statistics.median(peer):.2f}")
        else:
            print(f"HTA: not measured ({hta} missing or failed)")


if __name__ == "__main__":
    main()
