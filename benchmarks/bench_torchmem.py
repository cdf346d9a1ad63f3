"""Cost of the profile_memory outputs (memory_record.csv, operator_memory.csv) in ``analyse``.

One profile_memory run of a small CNN training loop is analysed twice in this process, with the
memory view on (as recorded) and off (profile_memory flipped to false in profiler_info), best of
``--repeats`` each; prints the allocator event count, both times and the ratio.

    .venv/bin/python benchmarks/bench_torchmem.py [--steps N] [--repeats N]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
import time
from pathlib import Path

import orjson

import openmsprof.torch.profiler as tp
import torch
from openmsprof.export.ascend_pt.rank_analyse import export


def _record(root: Path, steps: int) -> Path:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(16 * 16 * 16, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with tp.profile(schedule=tp.schedule(wait=0, warmup=0, active=steps, repeat=1), profile_memory=True,
                    on_trace_ready=tp.tensorboard_trace_handler(str(root), analyse_flag=False),
                    experimental_config=tp._ExperimentalConfig(data_simplification=False)) as prof:  # re-analysed
        for _ in range(steps):
            loss = model(torch.randn(8, 3, 16, 16)).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            prof.step()
    return next(p for p in root.iterdir() if p.name.endswith("_ascend_pt"))


def _best(rank_dir: Path, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        export(rank_dir, parallel=False)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        on = _record(Path(tmp) / "on", args.steps)
        off = Path(tmp) / "off" / on.name
        shutil.copytree(on, off)
        info = next(off.glob("profiler_info*.json"))
        doc = orjson.loads(info.read_bytes())
        doc["config"]["common_config"]["profile_memory"] = False
        info.write_bytes(orjson.dumps(doc))
        trace = orjson.loads((on / "FRAMEWORK" / "torch.kineto_trace.json").read_bytes())["traceEvents"]
        n_mem = sum(1 for e in trace if e.get("name") == "[memory]")
        t_on, t_off = _best(on, args.repeats), _best(off, args.repeats)
        rows = (on / "ASCEND_PROFILER_OUTPUT" / "operator_memory.csv").read_bytes().count(b"\n") - 1
    print(f"[1] analyse of {len(trace)} Kineto events incl. {n_mem} allocator events ({rows} allocations), "
          f"best of {args.repeats}:")
    print(f"    without memory view {t_off:.3f} s   with memory view {t_on:.3f} s   "
          f"ratio {t_on / t_off:.2f}  ({(t_on - t_off) / max(n_mem, 1) * 1e6:.2f} µs per allocator event)")


if __name__ == "__main__":
    main()
