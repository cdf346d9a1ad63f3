"""The long fuzz campaign: thousands of mutated jobs and configs over several seeds.

Each seed runs ``tests/hostile/fuzzlib.py`` in a child process (2 GB address-space limit,
per-case timeout) and reports tracebacks, hangs and peak RSS.  CI runs one seed of 500 + 500
(tests/hostile/test_fuzz.py).  Run: ``.venv/bin/python benchmarks/fuzz.py [--seeds 4]
[--jobs 800] [--configs 1000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=800)
    ap.add_argument("--configs", type=int, default=1000)
    args = ap.parse_args()
    total = {"jobs": 0, "configs": 0, "runs": 0, "tracebacks": 0, "hangs": 0}
    peak = 0.0
    for seed in range(100, 100 + args.seeds):
        r = subprocess.run([sys.executable, "-m", "tests.hostile.fuzzlib", "--jobs", str(args.jobs),
                            "--configs", str(args.configs), "--seed", str(seed)],
                           capture_output=True, text=True, cwd=ROOT)
        if r.returncode != 0:
            print(f"seed {seed}: the fuzz process failed (rc {r.returncode}): {r.stderr[-500:]}")
            total["tracebacks"] += 1
            continue
        res = json.loads(r.stdout.splitlines()[-1])
        for k in total:
            total[k] += res[k]
        peak = max(peak, res["peak_rss_mb"])
        print(f"seed {seed}: {res['jobs']} jobs, {res['configs']} configs, {res['runs']} runs, "
              f"{res['tracebacks']} tracebacks, {res['hangs']} hangs, peak RSS {res['peak_rss_mb']:.0f} MB, "
              f"{res['seconds']:.0f} s")
        for f in res["failures"][:5]:
            print(f"  {f['case']} [{f['mutation']}] {f['command']}: {f['status']}")
    a, b, c = os.getloadavg()
    print(f"total: {total}; peak RSS {peak:.0f} MB; load {a:.2f} {b:.2f} {c:.2f}")
    return 0 if total["tracebacks"] == total["hangs"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
