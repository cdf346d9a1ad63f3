"""Cost of the profile_memory outputs (memory_record.csv, operator_memory.csv) in ``analyse``.

One profile_memory run of a small CNN training loop is analysed twice in this process, with the
memory view on (as recorded) and off (profile_memory flipped to false in profiler_info),
``--repeats`` interleaved rounds with and without the co-runner (``benchmarks/corunner.py``);
prints the allocator event count, wall and process-tree CPU of both and the per-round ratios.

    .venv/bin/python benchmarks/bench_torchmem.py [--steps N] [--repeats N] [--corunner both]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
from pathlib import Path

import orjson

import openmsprof.torch.profiler as tp
import torch
from openmsprof.export.ascend_pt.rank_analyse import export

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.corunner import add_corunner_arg, corunner_modes, interleaved, report


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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    add_corunner_arg(ap)
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
        res = interleaved({"with memory view": lambda: export(on, parallel=False),
                           "without memory view": lambda: export(off, parallel=False)},
                          args.repeats, corunner_modes(args.corunner))
        rows = (on / "ASCEND_PROFILER_OUTPUT" / "operator_memory.csv").read_bytes().count(b"\n") - 1
    print(f"[1] analyse of {len(trace)} Kineto events incl. {n_mem} allocator events ({rows} allocations), "
          f"{args.repeats} rounds:")
    report(res, [("with memory view", "without memory view")], unit="s", scale=1.0)


if __name__ == "__main__":
    main()
