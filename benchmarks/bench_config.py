"""Config layer costs: each loader against a peer measured in the same run.

Run: ``.venv/bin/python benchmarks/bench_config.py`` (about 10 s).  Prints µs per call and the
ratio to the peer (stdlib json / argparse / a bare dataclass / ctypes.util.find_library).
"""

from __future__ import annotations

import argparse
import ctypes.util
import json
import time
from collections.abc import Callable
from pathlib import Path

from openmsprof.config import ProfileConfig, add_arguments, from_args, from_experimental, from_mask
from openmsprof.config.acl_json import parse_acl_json_bytes
from openmsprof.config.capabilities import machine
from openmsprof.config.tf_options import parse_profiling_options

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "config" / "golden" / "acl_full.json"


def per_call_us(fn: Callable[[], object], budget_s: float = 0.5) -> float:
    """Best of 5 batches, µs per call."""
    n = 1
    while True:  # size a batch to ~budget/5
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt > budget_s / 5 or n > 1 << 20:
            break
        n *= 2
    best = dt
    for _ in range(4):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, time.perf_counter() - t0)
    return best / n * 1e6


def row(name: str, ours: float, peer_name: str, peer: float) -> None:
    print(f"{name:<38} {ours:9.2f} µs   {peer_name:<34} {peer:9.2f} µs   ratio {ours / peer:8.3g}x")


def main() -> None:
    data = GOLDEN.read_bytes()
    row("acl.json parse+validate (23 keys)", per_call_us(lambda: parse_acl_json_bytes(data)),
        "json.loads of the same file", per_call_us(lambda: json.loads(data)))
    opts = json.dumps({"output": "/tmp/p", "training_trace": "on", "task_trace": "on",
                       "fp_point": "", "bp_point": "", "aic_metrics": "PipeUtilization"})
    row("PROFILING_OPTIONS (seed 003 sample)", per_call_us(lambda: parse_profiling_options(opts)),
        "json.loads of the same text", per_call_us(lambda: json.loads(opts)))
    row("pyACL from_mask (seed 001 mask)", per_call_us(lambda: from_mask([0], 0, 0, 0x3D)),
        "bare ProfileConfig()", per_call_us(ProfileConfig))
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    argv = ["--aicpu", "on", "--aic-metrics", "PipeUtilization", "--interval", "2", "--host-sys", "cpu,mem"]
    ns = parser.parse_args(argv)
    row("from_args (4 flags)", per_call_us(lambda: from_args(ns)),
        "argparse parse_args of those flags", per_call_us(lambda: parser.parse_args(argv)))
    exp = {"profiler_level": "Level1", "aic_metrics": "PipeUtilization", "export_type": ["text", "db"]}
    row("torch from_experimental", per_call_us(lambda: from_experimental(exp)),
        "bare ProfileConfig()", per_call_us(ProfileConfig))
    row("capabilities.machine() (uncached)", per_call_us(machine.__wrapped__, 0.3),
        "ctypes.util.find_library('cuda')", per_call_us(lambda: ctypes.util.find_library("cuda"), 0.3))


if __name__ == "__main__":
    main()
