"""Benchmark of ``openmsprof compare``: comparing two real jobs against ``show`` on both (peer).

    python benchmarks/bench_compare.py [--executes 300]

Profiles the Mish and LeakyReLU CNNs through the pyACL facade (``--executes`` each), imports
both, then times ``compare_jobs`` (load + U tests + bootstrap CIs for every row) against
``show.sections`` on both jobs (the same DB reads without statistics), and the U test on
100 000 + 100 000 samples against a plain ``np.sort`` of the 200 000 values.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx

from openmsprof.analysis.compare import compare_jobs
from openmsprof.analysis.stats import mann_whitney_u
from openmsprof.cli.cmd_demo import profile_model
from openmsprof.demo.models import resnet_like
from openmsprof.export.jobdb import open_job
from openmsprof.export.msprof.show import sections
from openmsprof.parse.importer import ensure_imported


def best(fn: Callable[[], object], repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--executes", type=int, default=300)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench_compare_"))
    jobs = []
    for act in ("mish", "leakyrelu"):
        model = root / f"{act}.onnx"
        onnx.save(resnet_like(act), os.fspath(model))
        (root / act).mkdir()
        job = profile_model(model, root / act, args.executes)
        ensure_imported(job)
        jobs.append(job)

    def show_both() -> None:
        for j in jobs:
            with open_job(j) as db:
                sections(db)

    cmp = compare_jobs(jobs[0], jobs[1])
    tasks = cmp.rows[0].base_count + cmp.rows[0].new_count
    t_cmp = best(lambda: compare_jobs(jobs[0], jobs[1]))
    t_show = best(show_both)
    print(f"jobs: {args.executes} executes each, {tasks} tasks, {len(cmp.rows)} rows compared")
    print(f"compare_jobs          {t_cmp * 1e3:8.1f} ms")
    print(f"show.sections x2      {t_show * 1e3:8.1f} ms   (peer)   ratio {t_cmp / t_show:5.2f}x")
    rng = np.random.default_rng(0)
    x, y = rng.normal(0, 1, 100_000), rng.normal(0.01, 1, 100_000)
    t_u = best(lambda: mann_whitney_u(x, y))
    t_sort = best(lambda: np.sort(np.concatenate([x, y])))
    print(f"U test 1e5 + 1e5      {t_u * 1e3:8.1f} ms")
    print(f"np.sort 2e5           {t_sort * 1e3:8.1f} ms   (peer)   ratio {t_u / t_sort:5.2f}x")
    print(f"verdict mish → leakyrelu: {cmp.verdict}")


if __name__ == "__main__":
    main()
