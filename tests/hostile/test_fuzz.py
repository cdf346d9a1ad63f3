"""The seeded fuzz corpus in CI: 500 mutated jobs (import + an export or show each) and 500
mutated configs, in a child process with a 2 GB address-space limit and a per-case timeout.
benchmarks/fuzz.py runs thousands of cases over several seeds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(1200)
def test_fuzz_corpus_no_traceback_no_hang_bounded_memory() -> None:
    r = subprocess.run([sys.executable, "-m", "tests.hostile.fuzzlib", "--jobs", "500", "--configs", "500",
                        "--seed", "12", "--case-timeout", "30"], capture_output=True, text=True,
                       cwd=ROOT, timeout=1150)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.splitlines()[-1])
    assert res["tracebacks"] == 0 and res["hangs"] == 0, json.dumps(res["failures"], indent=1)[:6000]
    assert res["runs"] >= 1500  # 500 jobs x 2 commands + 500 configs, acl.init on top
    assert res["peak_rss_mb"] < 512, res["peak_rss_mb"]
