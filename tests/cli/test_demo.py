"""The README's main job: ``openmsprof demo`` profiles the bundled model end to end."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from openmsprof.cli.main import main


def test_demo_profiles_imports_exports_and_shows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--output", str(out), "--executes", "3"]) == 0
    printed = capsys.readouterr().out
    jobs = list(out.glob("PROF_*"))
    assert len(jobs) == 1
    job = jobs[0]
    assert (job / "sqlite" / "msprof.db").is_file()
    assert list((job / "timeline").glob("*.json"))
    stats = list((job / "summary").glob("op_statistic_*.csv"))
    assert stats, sorted(p.name for p in (job / "summary").iterdir())
    with open(stats[0], newline="") as f:
        rows = list(csv.DictReader(f))
    types = {r["OP Type"] for r in rows}
    assert {"Conv", "Gemm"} <= types
    counts = {r["OP Type"]: int(r["Count"]) for r in rows}
    assert counts["Gemm"] == 3  # one Gemm per execute
    assert "Op statistics" in printed and "aclmdlExecute" in printed
