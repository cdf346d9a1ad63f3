"""Benchmark ``openmsprof analyze`` and ``openmsprof peaks``, and measure how well the roofline
predicts CPU operator times.

Run: ``.venv/bin/python benchmarks/bench_analyze.py [--events 1000000] [--repeat 5] [--corunner both]``.

Every timed part runs with and without the co-runner (one busy process per core,
``benchmarks/corunner.py``), conditions and sides interleaved round by round; each figure is
wall beside the process-tree CPU (fresh processes are waited-for children: counted), median
(min–max), with per-round ratios to the peers and the load average.  Part 4 (prediction
accuracy, not a cost) runs once, without the co-runner.

1. analyze at scale: the bundled Mish CNN profiled for ``--executes`` executes (a real ONNX
   Runtime job), its database replicated in time to ``--events`` tasks (same ops, shapes, API
   calls and iteration structure), then ``analyze`` (all rules, incl. opening the job; in this
   process and as ``openmsprof analyze`` in a fresh one) and the HTML report, each
   ``--repeat`` times interleaved with the peers on the same job (``export summary``;
   ``msprof-analyze advisor all`` where it runs), median and min–max.
2. ``openmsprof peaks`` in a fresh process (imports included), ``--repeat`` runs.
3. ``openmsprof analyze`` of a torch rank dir of ``--kernels`` kernels: first (building its
   kernel database) and again; and of a real torch window of ``--iterations`` × (softplus,
   tanh) analysed by the torch analysis (which writes the kernel database: its share of the
   analysis, then the first ``analyze``, a cache hit).
4. Prediction accuracy: ResNet-like Mish and LeakyReLU CNNs at 64 channels, 64×64 (ops of
   0.1–10 ms) profiled here; for every operator (name, shapes) whose median time is ≥ 100 µs,
   the roofline-attainable time against that median.  Peaks are measured just before.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from openmsprof.analysis import advisor
from openmsprof.analysis.report_html import build_html
from openmsprof.cli.cmd_demo import profile_model
from openmsprof.demo.models import resnet_like
from openmsprof.export.jobdb import open_job
from openmsprof.export.msprof.roofline import ceilings
from openmsprof.export.msprof.summary_export import write_summary
from openmsprof.machine import peaks
from openmsprof.parse.costmodel import op_cost
from openmsprof.parse.importer import ensure_imported

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.corunner import add_corunner_arg, busy, corunner_modes, interleaved, report


def load() -> str:
    return "load {:.2f}/{:.2f}/{:.2f}".format(*os.getloadavg())


def stats(times: list[float]) -> str:
    return (f"median {statistics.median(times):8.3f} s  (min {min(times):.3f}, max "
            f"{max(times):.3f}, n={len(times)})")


def scale_job(job: Path, dest: Path, tasks_wanted: int) -> tuple[Path, int]:
    """Copy ``job`` and replicate its tasks/APIs in time until ≥ ``tasks_wanted`` tasks."""
    shutil.copytree(job, dest)
    db = dest / "sqlite" / "msprof.db"
    con = sqlite3.connect(db)
    (n, t0, t1, g_max) = con.execute(
        "SELECT COUNT(*), MIN(startNs), MAX(endNs), MAX(globalTaskId) FROM TASK").fetchone()
    (c_max, a0, a1) = con.execute(
        "SELECT MAX(connectionId), MIN(startNs), MAX(endNs) FROM CANN_API").fetchone()
    span = max(t1, a1) - min(t0, a0) + 1_000_000
    copies = -(-tasks_wanted // n) - 1
    for k in range(1, copies + 1):
        con.execute("INSERT INTO TASK SELECT startNs + ?1, endNs + ?1, deviceId, CASE WHEN"
                    " connectionId >= 0 THEN connectionId + ?2 ELSE connectionId END,"
                    " globalTaskId + ?3, globalPid, taskType, contextId, streamId, taskId,"
                    " modelId FROM TASK WHERE globalTaskId <= ?4",
                    (k * span, k * (c_max + 1), k * (g_max + 1), g_max))
        con.execute("INSERT INTO COMPUTE_TASK_INFO SELECT name, globalTaskId + ?1, blockNum,"
                    " mixBlockNum, taskType, opType, inputFormats, inputDataTypes, inputShapes,"
                    " outputFormats, outputDataTypes, outputShapes, attrInfo, opState,"
                    " hf32Eligible FROM COMPUTE_TASK_INFO WHERE globalTaskId <= ?2",
                    (k * (g_max + 1), g_max))
        con.execute("INSERT INTO CANN_API SELECT startNs + ?1, endNs + ?1, type, globalTid,"
                    " connectionId + ?2, name FROM CANN_API WHERE connectionId <= ?3",
                    (k * span, k * (c_max + 1), c_max))
    con.execute("UPDATE SESSION_TIME_INFO SET endTimeNs = endTimeNs + ?", (copies * span,))
    con.commit()
    total = con.execute("SELECT COUNT(*) FROM TASK").fetchone()[0]
    apis = con.execute("SELECT COUNT(*) FROM CANN_API").fetchone()[0]
    con.close()
    os.utime(db)  # newer than the raw data: no re-import
    return dest, total + apis


def msprof_analyze(job: Path, out: Path) -> bool:
    """``msprof-analyze advisor all`` on ``job``; whether it ran and succeeded."""
    exe = Path(sys.executable).with_name("msprof-analyze")
    if not exe.exists():
        return False
    r = subprocess.run([str(exe), "advisor", "all", "-d", str(job), "-o", str(out)],
                       capture_output=True, timeout=900, check=False)
    return r.returncode == 0


def bench_analyze(root: Path, executes: int, events: int, repeat: int, modes: list[bool]) -> None:
    model = root / "mish.onnx"
    onnx.save(resnet_like("mish"), os.fspath(model))
    (root / "small").mkdir()
    small = profile_model(model, root / "small", executes)
    ensure_imported(small)
    job, n_events = scale_job(small, root / "big" / small.name, events)
    print(f"job: resnet_like(mish) x {executes} executes, replicated to {n_events:,} events "
          f"(tasks + API calls); {repeat} rounds; HTML and summary include opening the job")
    docs: list[dict[str, Any]] = []
    sizes: list[int] = []

    def html() -> None:
        with open_job(job) as db:
            sizes.append(len(build_html(db).encode()))

    def summary_peer() -> None:
        with open_job(job) as db:
            write_summary(db, root / "summary")

    res = interleaved({
        "analyze (all rules, incl. open)": lambda: docs.append(advisor.report(job)),
        "`openmsprof analyze -dir JOB` (fresh process)": lambda: cli_wall(["analyze", "-dir", str(job)]),
        "HTML report build": html,
        "peer: export summary (csv)": summary_peer,
    }, repeat, modes, cleanup=lambda: shutil.rmtree(root / "summary", ignore_errors=True))
    report(res, [("analyze (all rules, incl. open)", "peer: export summary (csv)")], unit="s", scale=1.0)
    top = docs[-1]["findings"][0]
    print(f"  top finding: [{top['severity']}] {top['rule']}: {top['summary'][:100]}…; HTML {sizes[-1] / 1e6:.2f} MB")
    ok: list[bool] = []
    adv = interleaved({
        "analyze (all rules, incl. open)": lambda: advisor.report(job),
        "peer: msprof-analyze advisor all": lambda: ok.append(msprof_analyze(job, root / "adv")),
    }, min(2, repeat), modes, cleanup=lambda: shutil.rmtree(root / "adv", ignore_errors=True))
    if ok and all(ok):
        report(adv, [("analyze (all rules, incl. open)", "peer: msprof-analyze advisor all")], unit="s", scale=1.0)
    else:
        print("peer: msprof-analyze advisor all did not run on this job")
    print("peer: HTA reads Kineto traces, not this job: see bench_analyze_hta.py")


#: fresh processes as users run them: with .pyc files
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def cli_wall(args: list[str]) -> None:
    """``openmsprof ARGS`` in a fresh process (measured by the caller)."""
    subprocess.run([str(Path(sys.executable).with_name("openmsprof")), *args], check=True,
                   stdout=subprocess.DEVNULL, env=ENV)


def bench_rank(root: Path, kernels: int, repeat: int, modes: list[bool]) -> None:
    """`openmsprof analyze` of a torch rank dir of ``kernels`` kernels (gen_cluster's
    kernel_details.csv): the first run builds the kernel database (removing the previous one is
    inside its time), the next reuses it."""
    from gen_cluster import generate

    generate(root / "pt", ranks=1, events=kernels)
    (rank,) = sorted((root / "pt").glob("*_ascend_pt"))
    size = (rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").stat().st_size

    def first() -> None:
        shutil.rmtree(rank / ".openmsprof", ignore_errors=True)
        cli_wall(["analyze", "-dir", str(rank)])

    res = interleaved({"`openmsprof analyze` first (builds kernels.db)": first,
                       "`openmsprof analyze` again": lambda: cli_wall(["analyze", "-dir", str(rank)])},
                      repeat, modes, alternate=False)
    print(f"torch rank dir, {kernels:,} kernels ({size / 2**20:.0f} MiB kernel_details.csv):")
    report(res, [("`openmsprof analyze` again", "`openmsprof analyze` first (builds kernels.db)")], unit="s",
           scale=1.0)


TORCH_WORK = """
import sys, torch
import openmsprof.torch.profiler as tp
n = int(sys.argv[2])
a = torch.randn(64, 64)
exp = tp._ExperimentalConfig(data_simplification=False)  # FRAMEWORK/ kept: analysed again
prof = tp.profile(schedule=tp.schedule(wait=0, active=1, repeat=1), record_shapes=True,
                  on_trace_ready=tp.tensorboard_trace_handler(sys.argv[1], analyse_flag=False),
                  experimental_config=exp)
with prof:
    for _ in range(n):
        torch.tanh(torch.nn.functional.softplus(a))
    prof.step()
"""


def bench_torch_rank(root: Path, iterations: int, repeat: int, modes: list[bool]) -> None:
    """A real torch window (softplus then tanh ``iterations`` times: 2 kernels each), analysed
    by the torch analysis ``repeat`` times; each time the share of writing kernels.db from the
    kernel columns, then `openmsprof analyze -dir RANK` the first time after it (a cache hit)."""
    from openmsprof.export.ascend_pt import kernel_job
    from openmsprof.export.ascend_pt.rank_analyse import export

    subprocess.run([sys.executable, "-c", TORCH_WORK, str(root / "tw"), str(iterations)],
                   check=True, env=ENV)
    (rank,) = sorted((root / "tw").glob("*_ascend_pt"))
    real = kernel_job.write_kernel_db
    spent: list[float] = []

    def timed_write(*a: Any) -> Path | None:
        t = time.perf_counter()
        out = real(*a)
        spent.append(time.perf_counter() - t)
        return out

    cache: list[float] = []
    kernels: list[int] = []

    def analysis_bare() -> None:
        kernel_job.write_kernel_db = lambda *a: None  # type: ignore[assignment]
        shutil.rmtree(rank / ".openmsprof", ignore_errors=True)
        export(rank, parallel=True)

    def analysis_writing() -> None:
        kernel_job.write_kernel_db = timed_write  # type: ignore[assignment]
        shutil.rmtree(rank / ".openmsprof", ignore_errors=True)
        k = len(spent)
        kernels.append(export(rank, parallel=True).kernels)
        cache.append(spent[-1] if len(spent) > k else 0.0)  # (none below kernel_job.EAGER_MIN_KERNELS)

    try:
        # in this order each round: the analysis without the kernels.db write (as before), the
        # first analyze after it (builds it), then the analysis writing it and the first analyze
        # after that (a cache hit); removing the previous .openmsprof is inside each analysis
        res = interleaved({
            "analysis without the kernels.db write": analysis_bare,
            "`openmsprof analyze` first, after it": lambda: cli_wall(["analyze", "-dir", str(rank)]),
            "analysis writing kernels.db": analysis_writing,
            "`openmsprof analyze` first after analysis": lambda: cli_wall(["analyze", "-dir", str(rank)]),
        }, repeat, modes, alternate=False)
    finally:
        kernel_job.write_kernel_db = real  # type: ignore[assignment]
    print(f"torch window, {kernels[-1]:,} kernels, analysed by the torch analysis; of which the "
          f"kernels.db write: {stats(cache)}")
    report(res, [("analysis writing kernels.db", "analysis without the kernels.db write"),
                 ("`openmsprof analyze` first after analysis", "`openmsprof analyze` first, after it")],
           unit="s", scale=1.0)


def best_of(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The best figure of each kernel over several measurements (the machine's capability
    when the load on a shared machine varies)."""
    out: dict[str, Any] = {"stream": {}, "gemm": {}, "special": {}, "runtime": {}}

    def merge(into: dict[str, Any], sec: dict[str, Any]) -> None:
        for name, v in sec.items():
            if isinstance(v, dict) and "best" in v:
                old = into.get(name)
                if old is None or v["best"] > old["best"]:
                    into[name] = v

    for d in docs:
        for group in ("stream", "gemm", "special"):
            merge(out[group], d.get(group, {}))
        for rt, sec in d.get("runtime", {}).items():
            into = out["runtime"].setdefault(rt, {"flops": {}, "elements": {}})
            for k in ("flops", "elements"):
                merge(into[k], sec.get(k, {}))
    return out


def bench_peaks(repeat: int, modes: list[bool]) -> dict[str, Any]:
    docs: dict[bool, list[dict[str, Any]]] = {m: [] for m in modes}

    def run() -> None:  # what `openmsprof peaks` runs (in a fresh process: imports too)
        r = subprocess.run([str(Path(sys.executable).with_name("openmsprof")), "peaks",
                            "--format", "json"], capture_output=True, check=True, env=ENV)
        docs[busy()].append(json.loads(r.stdout))

    report(interleaved({"openmsprof peaks (fresh process)": run}, repeat, modes), [], unit="s", scale=1.0)
    quiet = docs[False] if False in docs else docs[True]  # the prediction's ceilings: without the co-runner
    for d in quiet:
        print(f"  measure {d['seconds']:.2f} s, load {d['load_avg']}: DRAM "
              f"{peaks.bandwidth(d) / 1e9:.1f} GB/s, GEMM {peaks.gemm_peak(d) / 1e9:.1f} "
              f"GFLOP/s; skipped {d['skipped'] or 'none'}; CV > 10 %: {d['loaded'] or 'none'}")
    return best_of(quiet)


CLASS_OPS = ("Exp", "Log", "Tanh", "Erf")


def bench_prediction(root: Path, doc: dict[str, Any], executes: int) -> None:
    """Three models against the same measured ops: the machine ceilings alone; plus the
    runtime's conv rate and one transcendental class rate (median of its Exp/Log/Tanh/Erf);
    plus the runtime's rate per element-wise op type (the model analyze uses)."""
    full = ceilings(doc)
    flops, elems = peaks.runtime_rates(doc)
    machine = replace(full, op_flops=(), op_elems=())
    cls = [elems[o] for o in CLASS_OPS if o in elems]
    klass = replace(full, op_elems=(), special=float(np.median(cls)) if cls else full.special)
    print(f"ceilings (best of the peaks runs): DRAM {full.bandwidth / 1e9:.1f} GB/s, GEMM "
          f"{full.peak_flops / 1e9:.1f} GFLOP/s, special {full.special / 1e9:.2f} G/s; runtime "
          f"conv {flops.get('Conv', 0) / 1e9:.1f} GFLOP/s, class transcendental "
          f"{klass.special / 1e9:.2f} G/s, Softplus {elems.get('Softplus', 0) / 1e9:.3f} G/s")
    within = {"machine": 0, "class": 0, "per-op": 0}
    total = 0
    for act in ("mish", "leakyrelu"):
        path = root / f"big_{act}.onnx"
        onnx.save(resnet_like(act, channels=64, size=64), os.fspath(path))
        (root / f"pred_{act}").mkdir()
        job = profile_model(path, root / f"pred_{act}", executes)
        with open_job(job) as db:
            rows = db.query(
                "SELECT c.name, c.opType, c.inputShapes, c.inputDataTypes, c.outputShapes,"
                " c.outputDataTypes, t.endNs - t.startNs FROM TASK t JOIN COMPUTE_TASK_INFO c"
                " USING (globalTaskId)")
            groups: dict[tuple[int, ...], list[int]] = {}
            for *key, d in rows:
                groups.setdefault(tuple(key), []).append(d)
            for key, ds in groups.items():
                med = float(np.median(ds))
                if med < 100_000:
                    continue
                c = op_cost(*(db.text(x) for x in key[1:]))
                total += 1
                marks = []
                for label, ceil in (("machine", machine), ("class", klass), ("per-op", full)):
                    att = ceil.roof(c).attainable_ns
                    ratio = med / att if att else float("inf")
                    ok = 0.5 <= ratio <= 2.0
                    within[label] += ok
                    marks.append(f"{label} {att / 1e3:8.1f} us x{ratio:5.2f}{'' if ok else '!'}")
                print(f"  {act:9s} {db.text(key[0]):20s} {db.text(key[1]):9s} measured "
                      f"{med / 1e3:8.1f} us | " + " | ".join(marks))
    for label, n in within.items():
        print(f"prediction within 2x ({label:7s} ceilings): {n}/{total} CPU ops >= 100 us "
              f"({100 * n / max(total, 1):.0f} %), {load()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--executes", type=int, default=300)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--kernels", type=int, default=1_000_000, help="kernels of the torch rank dir")
    ap.add_argument("--iterations", type=int, default=500_000,
                    help="softplus+tanh iterations of the torch window (2 kernels each)")
    ap.add_argument("--skip", default="",
                    help="comma list of parts to skip: analyze,rank,torch,peaks,predict")
    add_corunner_arg(ap)
    a = ap.parse_args()
    skip = set(a.skip.split(","))
    modes = corunner_modes(a.corunner)
    with tempfile.TemporaryDirectory(prefix="bench_analyze_") as tmp:
        root = Path(tmp)
        doc = bench_peaks(a.repeat, modes) if "peaks" not in skip else peaks.cached() or {}
        if "predict" not in skip:
            bench_prediction(root, doc, 20)
        if "analyze" not in skip:
            bench_analyze(root, a.executes, a.events, a.repeat, modes)
        if "rank" not in skip:
            bench_rank(root, a.kernels, a.repeat, modes)
        if "torch" not in skip:
            bench_torch_rank(root, a.iterations, a.repeat, modes)



if __name__ == "__main__":
    main()
