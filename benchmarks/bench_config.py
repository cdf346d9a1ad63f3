"""Config layer costs: each loader against a peer measured in the same run.

Run: ``.venv/bin/python benchmarks/bench_config.py [--rounds 5] [--corunner both]`` (about a
minute).  Each loader and its peer (stdlib json / argparse / a bare dataclass /
ctypes.util.find_library) run as sides of one pair, a batch of calls sized to ~0.2 s each, sides
and co-runner conditions interleaved round by round (``benchmarks/corunner.py``); prints µs per
call, wall and process-tree CPU, median (min–max), and the per-round ratios with the load.
"""

from __future__ import annotations

import argparse
import ctypes.util
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from openmsprof.config import ProfileConfig, add_arguments, from_args, from_experimental, from_mask
from openmsprof.config.acl_json import parse_acl_json_bytes
from openmsprof.config.capabilities import machine
from openmsprof.config.tf_options import parse_profiling_options

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.corunner import add_corunner_arg, corunner_modes, interleaved, report

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "config" / "golden" / "acl_full.json"


def batch_size(fn: Callable[[], object], budget_s: float = 0.2) -> int:
    """Calls of ``fn`` that take about ``budget_s``."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - t0 > budget_s or n > 1 << 22:
            return n
        n *= 2


def batch(fn: Callable[[], object], n: int) -> Callable[[], None]:
    def run() -> None:
        for _ in range(n):
            fn()
    return run


def pair(name: str, ours: Callable[[], object], peer_name: str, peer: Callable[[], object], rounds: int,
         modes: list[bool], budget_s: float = 0.2) -> None:
    n_ours, n_peer = batch_size(ours, budget_s), batch_size(peer, budget_s)
    res = interleaved({name: batch(ours, n_ours), peer_name: batch(peer, n_peer)}, rounds, modes)
    print(f"{name} vs {peer_name} ({n_ours} / {n_peer} calls a block, {rounds} rounds), µs per call:")
    report(res, [(name, peer_name)], per={name: n_ours, peer_name: n_peer}, unit="µs", scale=1e6)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    add_corunner_arg(ap)
    args = ap.parse_args()
    rounds, modes = args.rounds, corunner_modes(args.corunner)
    data = GOLDEN.read_bytes()
    pair("acl.json parse+validate (23 keys)", lambda: parse_acl_json_bytes(data),
         "json.loads of the same file", lambda: json.loads(data), rounds, modes)
    opts = json.dumps({"output": "/tmp/p", "training_trace": "on", "task_trace": "on",
                       "fp_point": "", "bp_point": "", "aic_metrics": "PipeUtilization"})
    pair("PROFILING_OPTIONS (seed 003 sample)", lambda: parse_profiling_options(opts),
         "json.loads of the same text", lambda: json.loads(opts), rounds, modes)
    pair("pyACL from_mask (seed 001 mask)", lambda: from_mask([0], 0, 0, 0x3D),
         "bare ProfileConfig()", ProfileConfig, rounds, modes)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    argv = ["--aicpu", "on", "--aic-metrics", "PipeUtilization", "--interval", "2", "--host-sys", "cpu,mem"]
    ns = parser.parse_args(argv)
    pair("from_args (4 flags)", lambda: from_args(ns),
         "argparse parse_args of those flags", lambda: parser.parse_args(argv), rounds, modes)
    exp = {"profiler_level": "Level1", "aic_metrics": "PipeUtilization", "export_type": ["text", "db"]}
    pair("torch from_experimental", lambda: from_experimental(exp),
         "bare ProfileConfig()", ProfileConfig, rounds, modes)
    pair("capabilities.machine() (uncached)", machine.__wrapped__,
         "ctypes.util.find_library('cuda')", lambda: ctypes.util.find_library("cuda"), rounds, modes)


if __name__ == "__main__":
    main()
