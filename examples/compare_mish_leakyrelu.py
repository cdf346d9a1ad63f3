"""The seed's case study: replace Mish (Softplus + Tanh + Mul on ONNX Runtime CPU) by LeakyReLU
and prove with openmsprof that the model got faster.

    python examples/compare_mish_leakyrelu.py [--executes 30] [--output DIR]

Builds both ResNet-like models, profiles each through the pyACL facade (acl.prof, task time),
then runs ``openmsprof compare`` on the two jobs: per-operator-type and per-API deltas, matched
operators, and a Mann-Whitney U verdict over the per-execute samples.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import onnx
from rich.console import Console

from openmsprof.analysis.compare import compare_jobs
from openmsprof.analysis.render import render_rich
from openmsprof.cli.cmd_demo import profile_model
from openmsprof.demo.models import resnet_like


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--executes", type=int, default=30, help="executes per model (default 30)")
    ap.add_argument("--output", default=None, help="where the two jobs go (default: a temp dir)")
    args = ap.parse_args()
    root = Path(args.output or tempfile.mkdtemp(prefix="openmsprof_compare_")).absolute()
    root.mkdir(parents=True, exist_ok=True)
    jobs = {}
    for act in ("mish", "leakyrelu"):
        model = root / f"resnet_{act}.onnx"
        onnx.save(resnet_like(act), os.fspath(model))
        out = root / act
        out.mkdir(exist_ok=True)
        jobs[act] = profile_model(model, out, args.executes)
        print(f"profiled {model.name}: {jobs[act]}")
    cmp = compare_jobs(jobs["mish"], jobs["leakyrelu"], alpha=0.05, threshold=0.05)
    render_rich(cmp, Console())
    print(f"\nsame from the command line: openmsprof compare -dir {jobs['mish']} "
          f"-dir {jobs['leakyrelu']}")
    return 0 if cmp.verdict == "faster" else 1


if __name__ == "__main__":
    raise SystemExit(main())
