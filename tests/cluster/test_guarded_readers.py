"""Every cluster reader goes through the read guard: a rank's kernel_details.csv,
step_trace_time.csv, communication.json or communication_matrix.json that is a FIFO, a link to
/dev/zero, or past its size bound is one problem line naming that rank and file, in bounded time
and memory, and the other ranks are analysed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from openmsprof.cluster import rank_pt, rank_small
from tests.cluster.conftest import copy_tree

OUT = "ASCEND_PROFILER_OUTPUT"
FILES = ("kernel_details.csv", "step_trace_time.csv", "communication.json", "communication_matrix.json")


def _rank_dir(root: Path, rank: int) -> Path:
    return next(root.glob(f"*_{1000 + rank}_*"))


def _cluster(root: Path, out: Path) -> dict:
    """run_cluster in a child (a regression hangs on the FIFO or eats /dev/zero: the child is
    killed, not the test run) with a 6 GB address-space limit (unguarded, /dev/zero took 17 GB); returns its summary."""
    code = (
        "import json, resource, sys; from pathlib import Path\n"
        "resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))\n"
        "from openmsprof.cluster import run_cluster\n"
        "run = run_cluster(Path(sys.argv[1]), ['all'], Path(sys.argv[2]), workers=1)\n"
        "print(json.dumps({'problems': run.problems, 'ranks': [p['rank'] for p in run.partials],"
        " 'steps': (run.output / 'cluster_step_trace_time.csv').read_text().splitlines()}))\n")
    p = subprocess.run([sys.executable, "-c", code, str(root), str(out)], capture_output=True, text=True,
                       timeout=600, env={**os.environ, "PYTHONPATH": str(Path(rank_pt.__file__).parents[2])})
    assert p.returncode == 0, p.stderr[-3000:]
    out_doc: dict = orjson.loads(p.stdout.splitlines()[-1])
    return out_doc


@pytest.mark.timeout(900)
def test_fifos_and_dev_zero_links_in_every_input_are_refused_per_rank(synthetic: Path, tmp_path: Path) -> None:
    root = copy_tree(synthetic, tmp_path / "job")
    # rank 0: every input a FIFO; rank 1: every input a link to /dev/zero; ranks 2 and 3 intact
    for name in FILES:
        f0 = _rank_dir(root, 0) / OUT / name
        f0.unlink()
        os.mkfifo(f0)
        f1 = _rank_dir(root, 1) / OUT / name
        f1.unlink()
        f1.symlink_to("/dev/zero")
    res = _cluster(root, tmp_path / "o")
    problems = res["problems"]
    for name in FILES:
        assert any(p.startswith("rank 0: ") and f"/{name}' is a FIFO" in p for p in problems), (name, problems)
        assert any(p.startswith("rank 1: ") and f"/{name}': cannot read: is a symbolic link" in p for p in problems), (name, problems)
    assert all("\n" not in p for p in problems)
    steps = {row.split(",")[2] for row in res["steps"][1:]}
    assert {"2", "3"} <= steps and not {"0", "1"} & steps


def test_oversized_inputs_are_refused_before_reading(synthetic: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from openmsprof.cluster import run_cluster

    root = copy_tree(synthetic, tmp_path / "job")
    monkeypatch.setattr(rank_small, "STEP_TRACE_MAX_BYTES", 10)
    monkeypatch.setattr(rank_small, "COMM_MAX_BYTES", 10)
    monkeypatch.setattr(rank_pt, "KERNEL_MAX_BYTES", 10)
    run = run_cluster(root, ["all"], tmp_path / "o", workers=1)
    text = "\n".join(run.problems)
    for name in ("step_trace_time.csv", "communication.json", "kernel_details.csv"):
        assert any(f"/{name}': " in p and "larger than the 10 byte limit" in p for p in run.problems), (name, text)
