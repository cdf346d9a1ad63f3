"""Cluster test inputs: synthetic ranks from benchmarks/gen_cluster.py (planted slow rank) and
the msprof-analyze command line."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]
MSPROF_ANALYZE = shutil.which("msprof-analyze") or str(Path(sys.executable).with_name("msprof-analyze"))
SLOW_RANK = 2
SLOW_MS = 30.0


def gen_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_cluster", REPO / "benchmarks" / "gen_cluster.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def make_synthetic(out: Path, ranks: int = 4, events: int = 8000, slow_rank: int | None = SLOW_RANK) -> Path:
    gen_module().generate(out, ranks=ranks, events=events, steps=3, segments=8, slow_rank=slow_rank,
                          slow_ms=SLOW_MS)
    return out


@pytest.fixture(scope="session")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four ranks; rank 2 runs one convolution_backward per step 30 ms longer (read-only: copy to modify)."""
    return make_synthetic(tmp_path_factory.mktemp("syn") / "job")


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def msprof_analyze(root: Path, out: Path) -> Path:
    """Run ``msprof-analyze cluster`` (its exit code is always 0: check [ERROR] lines)."""
    if not Path(MSPROF_ANALYZE).exists():
        pytest.skip("msprof-analyze not installed (pip install -e .[dev])")
    res = subprocess.run([MSPROF_ANALYZE, "cluster", "-d", str(root), "-o", str(out)], cwd=out.parent,
                         capture_output=True, text=True, timeout=300)
    errors = [ln for ln in (res.stdout + res.stderr).splitlines() if "[ERROR]" in ln]
    assert not errors, errors
    return out / "cluster_analysis_output"


def leftovers(marker: str) -> list[psutil.Process]:
    """Live processes whose command line names ``marker`` (a command's workers share its command line)."""
    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        if p.pid != os.getpid() and p.info["status"] != psutil.STATUS_ZOMBIE and \
                any(marker in a for a in (p.info["cmdline"] or [])):
            out.append(p)
    return out
