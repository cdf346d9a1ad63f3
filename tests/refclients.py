"""The reference clients fetched at test-venv build time (tests/fetch_refclients.py): Perfetto's
trace_processor_shell v56 and torch_npu 2.14's profiler analysis sources.  Tests skip, naming the
make target, when they are absent."""

from __future__ import annotations

import csv
import io
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REF = Path(os.environ.get("OPENMSPROF_REFCLIENTS", ROOT / ".venv" / "refclients"))
TRACE_PROCESSOR = REF / "trace_processor_shell"
TORCH_NPU = REF / "torch_npu_2.14.0"
MISSING = "reference clients not fetched: run `make .venv/refclients/.installed`"


def trace_processor() -> Path:
    if not os.access(TRACE_PROCESSOR, os.X_OK):
        pytest.skip(MISSING)
    return TRACE_PROCESSOR


def query(trace: Path, sql: str) -> list[dict[str, str]]:
    """Rows of ``sql`` over ``trace`` loaded by trace_processor_shell."""
    res = subprocess.run([str(trace_processor()), "-Q", sql, str(trace)], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return list(csv.DictReader(io.StringIO(res.stdout)))


def perfetto_errors(trace: Path) -> dict[str, int]:
    """Every non-zero error or data-loss counter of trace_processor's ``stats`` for ``trace``."""
    rows = query(trace, "select name, idx, value from stats where severity in ('error', 'data_loss') "
                        "and value > 0")
    return {r["name"] + ("" if r["idx"] in ("", "[NULL]") else f"[{r['idx']}]"): int(r["value"]) for r in rows}
