"""Benchmark ``openmsprof analyze``: advisor rules and the HTML report on a profiled CNN job,
against peers on the same job in the same run (``export summary`` and ``show`` statistics).

Run: ``.venv/bin/python benchmarks/bench_analyze.py [--executes N]`` (default 300, < 60 s).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import onnx

from openmsprof.analysis import advisor
from openmsprof.analysis.report_html import build_html
from openmsprof.cli.cmd_demo import profile_model
from openmsprof.export.db import open_job
from openmsprof.export.msprof import show
from openmsprof.export.msprof.summary import write_summary
from openmsprof.models import resnet_like
from openmsprof.parse.importer import ensure_imported


def best(fn: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--executes", type=int, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = root / "mish.onnx"
        onnx.save(resnet_like("mish"), os.fspath(model))
        (root / "out").mkdir()
        job = profile_model(model, root / "out", args.executes)
        ensure_imported(job)
        with open_job(job) as db:
            tasks = db.query("SELECT COUNT(*) FROM TASK")[0][0]
            results = {
                f"advisor rule {name}": best(lambda n=name: advisor.run_rules(db, [n]))  # type: ignore[misc]
                for name in advisor.RULES}
            results["advisor, all rules"] = best(lambda: advisor.run_rules(db))
            results["HTML report (build)"] = best(lambda: build_html(db))
            results["peer: show sections"] = best(lambda: show.sections(db))
            n = [0]

            def summary() -> None:
                n[0] += 1
                write_summary(db, root / f"summary{n[0]}")
            results["peer: export summary (csv)"] = best(summary, 3)
        results["analyze() incl. open"] = best(lambda: advisor.analyze(job))
    print(f"job: resnet_like(mish) x {args.executes} executes, {tasks} tasks")
    ref = results["peer: export summary (csv)"]
    for name, sec in results.items():
        print(f"{name:32s} {sec * 1e3:9.2f} ms   {sec / ref:6.2f}x export summary")


if __name__ == "__main__":
    main()
