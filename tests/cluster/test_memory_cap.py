"""DuckDB's cap for the cross-rank views: ``--memory-limit``, the environment variable, a default
sized from the machine, spilling under the output; a 4 × 1 M-kernel set completes under 64 MB
(issue 26: at a fixed 512 MB, 16 × 1 M failed with DuckDB's OutOfMemoryException)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from openmsprof.cluster import memcap
from openmsprof.config.errors import ConfigError
from tests.cluster.conftest import gen_module

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openmsprof", "cluster", *args], capture_output=True, text=True,
                          timeout=900, env={**os.environ, "PYTHONPATH": str(REPO / "src"), **(env or {})})


def test_sizes_and_where_the_cap_comes_from(monkeypatch: pytest.MonkeyPatch) -> None:
    assert memcap.parse("64MB") == 64_000_000 and memcap.parse("512MiB") == 512 << 20
    assert memcap.parse("2gb") == 2_000_000_000 and memcap.parse("100000000") == 100_000_000
    for bad in ("lots", "64 parsecs", "1MB", "-5MB"):
        with pytest.raises(ConfigError, match="--memory-limit"):
            memcap.parse(bad)
    monkeypatch.setenv(memcap.ENV, "300MB")
    assert memcap.cap_bytes() == 300_000_000 and memcap.cap_bytes("1GB") == 1_000_000_000  # the switch wins
    monkeypatch.delenv(memcap.ENV)
    avail = psutil.virtual_memory().available
    assert 256 << 20 <= memcap.cap_bytes() <= max(avail // 3, 256 << 20)  # from the machine, not fixed
    assert memcap.exact_kernel_limit(64_000_000) < 4_000_000 <= memcap.exact_kernel_limit(1 << 30)


def test_a_bad_limit_is_one_line(tmp_path: Path) -> None:
    res = _cli("-d", str(tmp_path), "--memory-limit", "plenty")
    assert res.returncode == 1 and res.stderr.count("\n") == 1
    assert res.stderr.startswith("openmsprof: error: --memory-limit 'plenty': not a size")
    res = _cli("-d", str(tmp_path), env={memcap.ENV: "3KB"})
    assert res.returncode == 1 and f"{memcap.ENV} '3KB': below the 16MB" in res.stderr


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_four_ranks_of_a_million_kernels_complete_under_64mb(tmp_path: Path) -> None:
    root = tmp_path / "job"
    gen_module().generate(root, ranks=4, events=1_000_000, steps=4, segments=10, slow_rank=1, slow_ms=30.0)
    res = _cli("-d", str(root), "-o", str(tmp_path), "--memory-limit", "64MB", "--workers", "2")
    assert res.returncode == 0, res.stderr
    assert "slow rank: 1 made the others wait" in res.stdout
    out = tmp_path / "cluster_analysis_output"
    rows = (out / "compute_op_sum" / "all_stats.csv").read_text().splitlines()
    assert len(rows) > 1 and rows[0].startswith("OpType,TaskType")
    total = sum(int(r.split(",")[4]) for r in rows[1:])  # Count: every kernel of the four ranks
    assert 3_900_000 <= total <= 4_100_000
    assert not (out / memcap.SPILL_DIR).exists()  # the spill directory is removed at the end
