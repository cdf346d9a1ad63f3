"""``openmsprof cluster`` on the command line: modes, output files, the slow-rank line, exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.cluster.conftest import SLOW_RANK, gen_module


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openmsprof", "cluster", *args], capture_output=True, text=True,
                          timeout=300)


def test_modes_and_outputs(synthetic: Path, tmp_path: Path) -> None:
    res = _cli("-d", str(synthetic), "-o", str(tmp_path), "-m", "step_trace", "communication", "--workers", "2")
    assert res.returncode == 0, res.stderr
    out = tmp_path / "cluster_analysis_output"
    assert {p.name for p in out.iterdir() if not p.name.startswith(".")} == {
        "cluster_step_trace_time.csv", "cluster_communication.json", "cluster_communication_matrix.json",
        "communication_group.json"}
    assert not list((out / ".openmsprof_store").glob("rank*/kernels.parquet"))  # not needed by these modes
    res = _cli("-d", str(synthetic), "-o", str(tmp_path), "-m", "compute_op,slow_rank")
    assert res.returncode == 0, res.stderr
    assert "4 ranks (0 from cached stores)" in res.stdout  # kernels added to the existing stores
    assert f"slow rank: {SLOW_RANK} made the others wait" in res.stdout
    assert f"cause: op {gen_module().SLOW_OP}" in res.stdout
    assert len(list((out / ".openmsprof_store").glob("rank*/kernels.parquet"))) == 4
    res = _cli("-d", str(synthetic), "-o", str(tmp_path))
    assert "4 ranks (4 from cached stores)" in res.stdout


def test_bad_mode_and_missing_dir(tmp_path: Path) -> None:
    res = _cli("-d", str(tmp_path), "-m", "timeline")
    assert res.returncode == 1 and res.stderr.startswith("openmsprof: error: cluster mode 'timeline': unknown")
    res = _cli("-d", str(tmp_path / "absent"))
    assert res.returncode == 1 and "not a directory" in res.stderr
