"""Helpers of the TensorFlow tests: run a program, export a job, read CSVs, count TF's own ops."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PROGRAMS = Path(__file__).with_name("programs.py")
TF215_PYTHON = ROOT / ".venv-tf215" / "bin" / "python"
QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}


def run_py(args: list[str], python: str | os.PathLike[str] = sys.executable,
           env: dict[str, str] | None = None, timeout: int = 120,
           cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **QUIET, **(env or {})}
    for k in ("PROFILING_MODE", "PROFILING_OPTIONS"):
        if env is None or k not in env:
            full.pop(k, None)
    return subprocess.run([str(python), *args], capture_output=True, text=True, timeout=timeout,
                          env=full, cwd=str(cwd))


def jobs(out: Path) -> list[Path]:
    return sorted(p for p in out.glob("PROF_*") if p.is_dir())


def export(job: Path, what: str = "summary", *extra: str) -> Path:
    r = subprocess.run([sys.executable, "-m", "openmsprof", "export", what, "-dir", str(job), *extra],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return job


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def tf_own_op_count(job: Path) -> int:
    """Ops in TensorFlow's own trace kept in the job, counted straight from the protobuf:
    executor events ``name:type`` (display name = type), async completions naming their kernel,
    and eager executions of single ops; summed over the parts of a rolled tracer."""

    return sum(tf_own_op_counts(job))


def tf_own_op_counts(job: Path) -> list[int]:
    """:func:`tf_own_op_count` per part of the tracer kept in the job, in file-name order."""
    from tensorflow.tsl.profiler.protobuf.xplane_pb2 import XSpace

    pbs = sorted((job / "host" / "tf_xplane").glob("plugins/profile/*/*.xplane.pb"))
    assert pbs, job
    return [_own_ops(XSpace.FromString(pb.read_bytes())) for pb in pbs]


def _own_ops(space: Any) -> int:
    n = 0
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        kinds = {}
        for mid, md in plane.event_metadata.items():
            if (md.display_name and md.name.endswith(":" + md.display_name)) or (md.name.startswith("EagerLocalExecute: ") and "__inference" not in md.name):
                kinds[mid] = 1
            elif md.name == "ExecutorState::ProcessAsync::Done":
                kinds[mid] = 2
        for line in plane.lines:
            for e in line.events:
                k = kinds.get(e.metadata_id)
                n += k == 1 or (k == 2 and len(e.stats) >= 2)
    return n
