"""Run every benchmark in its own process and print their figures (``make bench``).

Each script measures openmsprof against peers in the same process and prints ratios; see
benchmarks/README.md for the figures recorded on the 2-core CI machine.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = [
    "bench_markers.py", "bench_config.py", "bench_import.py", "bench_export.py", "bench_export_cli.py",
    "bench_acl.py", "bench_torch.py", "bench_torch_windows.py", "bench_torchmem.py", "bench_collect.py", "bench_compare.py", "bench_analyze.py",
]


def main() -> int:
    failed = []
    for name in SCRIPTS:
        path = HERE / name
        if not path.exists():
            continue
        print(f"\n=== {name} ===", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, str(path), *sys.argv[1:]])
        print(f"--- {name}: exit {rc}, {time.perf_counter() - t0:.1f} s", flush=True)
        if rc:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
