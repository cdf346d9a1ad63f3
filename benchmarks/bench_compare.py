"""Benchmark of ``openmsprof compare``: comparing two real jobs against ``show`` on both (peer).

    python benchmarks/bench_compare.py [--executes 300] [--rounds 5] [--corunner both]

Profiles the Mish and LeakyReLU CNNs through the pyACL facade (``--executes`` each), imports
both, then times ``compare_jobs`` (load + U tests + bootstrap CIs for every row) against
``show.sections`` on both jobs (the same DB reads without statistics), and the U test on
100 000 + 100 000 samples against a plain ``np.sort`` of the 200 000 values.  Sides and
co-runner conditions interleaved round by round (``benchmarks/corunner.py``): wall and
process-tree CPU, median (min–max), per-round ratios, load average.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.corunner import add_corunner_arg, corunner_modes, interleaved, report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--executes", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    add_corunner_arg(ap)
    args = ap.parse_args()
    modes = corunner_modes(args.corunner)
    root = Path(tempfile.mkdtemp(prefix="bench_compare_"))
    try:
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
        print(f"jobs: {args.executes} executes each, {tasks} tasks, {len(cmp.rows)} rows compared; "
              f"{args.rounds} rounds")
        res = interleaved({"compare_jobs": lambda: compare_jobs(jobs[0], jobs[1]),
                           "show.sections x2 (peer)": show_both}, args.rounds, modes)
        report(res, [("compare_jobs", "show.sections x2 (peer)")])
        rng = np.random.default_rng(0)
        x, y = rng.normal(0, 1, 100_000), rng.normal(0.01, 1, 100_000)
        res = interleaved({"U test 1e5 + 1e5": lambda: mann_whitney_u(x, y),
                           "np.sort 2e5 (peer)": lambda: np.sort(np.concatenate([x, y]))}, args.rounds, modes)
        report(res, [("U test 1e5 + 1e5", "np.sort 2e5 (peer)")])
        print(f"verdict mish → leakyrelu: {cmp.verdict}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
