"""The roofline on a real ONNX Runtime job: the load() view, op_summary's cost columns, show
--roofline, and a target machine's peaks file changing the verdict."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import orjson
import pytest

import openmsprof
from openmsprof.cli.main import main
from openmsprof.export.msprof.summary_export import export_summary


@pytest.fixture(scope="module")
def slow_memory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A target machine with very slow memory and a fast GEMM: everything is memory-bound."""
    f = tmp_path_factory.mktemp("peaks") / "target.json"
    f.write_text('{"stream": {"copy": 0.001}, "gemm": {"numpy float32": 1000000},'
                 ' "special": {"exp": 1000}}')
    return f


def test_load_roofline_view(jobs: dict[str, Path]) -> None:
    with openmsprof.load(jobs["mish"]) as job:
        assert "roofline" in job.names()
        rows = job.rows("roofline")
    convs = [r for r in rows if r["OP Type"] == "Conv" and r["Input Shapes"].startswith("1,16,")]
    assert convs
    c = convs[0]
    out = [int(d) for d in c["Output Shapes"].split(",")]
    w = [int(d) for d in c["Input Shapes"].split(";")[1].split(",")]
    assert c["FLOPs"] == 2 * math.prod(out) * math.prod(w[1:])  # 2 per MAC, as flop_counter
    assert c["Kind"] == "conv" and c["Bound"] in ("compute", "memory", "overhead")
    soft = next(r for r in rows if r["OP Type"] == "Softplus")
    assert soft["Kind"] == "transcendental" and soft["Bytes"] == 2 * 4 * 16 * 32 * 32
    assert soft["Total Time(us)"] >= soft["Avg Time(us)"] > 0
    assert soft["Efficiency(%)"] > 0 and soft["Memory Bound Ratio"] > 0
    assert sum(r["Count"] for r in rows) == 20 * 34  # every task in one group


def test_op_summary_cost_columns(jobs: dict[str, Path]) -> None:
    export_summary(jobs["mish"])
    with (jobs["mish"] / "summary" / "op_summary_0.csv").open() as f:
        rows = list(csv.DictReader(f))
    conv = next(r for r in rows if r["OP Type"] == "Conv")
    out = [int(d) for d in conv["Output Shapes"].split(",")]
    w = [int(d) for d in conv["Input Shapes"].split(";")[1].split(",")]
    assert int(conv["FLOPs"]) == 2 * math.prod(out) * math.prod(w[1:])
    assert float(conv["Memory Bound Ratio"]) > 0  # the job holds its peaks
    reorder = next(r for r in rows if r["OP Type"].startswith("Reorder"))
    assert reorder["FLOPs"] == "0" and reorder["Memory Bound Ratio"] == "N/A"


def test_show_roofline_with_target_peaks(jobs: dict[str, Path], slow_memory: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "-dir", str(jobs["mish"]), "--roofline", "--format", "json",
                 "--top", "50"]) == 0
    own = orjson.loads(capsys.readouterr().out)["roofline"]
    assert main(["show", "-dir", str(jobs["mish"]), "--roofline", "--format", "json",
                 "--top", "50", "--peaks", str(slow_memory)]) == 0
    slow = orjson.loads(capsys.readouterr().out)["roofline"]
    assert len(own) == len(slow) > 10
    assert {r["Bound"] for r in slow if r["MBR"] != "N/A"} == {"memory"}
    assert all(float(r["MBR"]) > 1 for r in slow if r["MBR"] != "N/A")
    assert main(["show", "-dir", str(jobs["mish"]), "--roofline"]) == 0
    text = capsys.readouterr().out
    assert "ceilings: DRAM" in text and "Roofline" in text


def test_report_flags_peaks_from_a_loaded_machine(jobs: dict[str, Path], tmp_path: Path) -> None:
    from openmsprof.analysis.report_html import write_html

    f = tmp_path / "loaded.json"
    f.write_text('{"stream": {"copy": {"best": 10, "cv": 0.3}}, "gemm": {"numpy float32": 50},'
                 ' "loaded": ["stream copy"], "skipped": ["gemm numpy float64"]}')
    page = write_html(jobs["mish"], tmp_path / "r.html", "patterns", peaks=f).read_text()
    assert "Peaks measured on a loaded machine (CV above 10 %): stream copy" in page
    assert "Not measured (time budget): gemm numpy float64" in page
    assert "DRAM 10.0 GB/s" in page and "GEMM peak 50.0 GFLOP/s" in page


def test_analyze_cli_base_and_peaks(jobs: dict[str, Path], slow_memory: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "r.html"
    assert main(["analyze", "-dir", str(jobs["leakyrelu"]), "--base", str(jobs["mish"]),
                 "--html", str(page), "--peaks", str(slow_memory), "--rule", "top_ops"]) == 0
    capsys.readouterr()
    raw = page.read_text()
    assert 'class="waterfall"' in raw and "Softplus" in raw  # the removed op type's step
    assert "DRAM 0.0 GB/s" in raw  # the target's ceilings, not the job's
    assert main(["analyze", "-dir", str(jobs["mish"]), "--base", str(tmp_path / "nope")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("openmsprof: error: --base") and err.count("\n") == 1
    bad = tmp_path / "bad.json"
    bad.write_text('{"stream": {"copy": "x"}, "gemm": {"numpy float32": 1}}')
    assert main(["analyze", "-dir", str(jobs["mish"]), "--peaks", str(bad)]) == 1
    assert "stream.copy must be" in capsys.readouterr().err
