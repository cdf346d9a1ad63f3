"""``openmsprof compare`` from the command line: formats, exit codes, bad input."""

from __future__ import annotations

import csv
import io
import stat
from pathlib import Path

import orjson
import pytest
from rich.console import Console

import openmsprof
from openmsprof import mstx
from openmsprof.cli import cmd_compare
from openmsprof.cli.main import build_parser, main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["compare", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_table_fits_80_columns(jobs: dict[str, Path]) -> None:
    args = build_parser().parse_args(["compare", "-dir", str(jobs["mish"]),
                                      "-dir", str(jobs["leakyrelu"])])
    console = Console(file=io.StringIO(), width=80, force_terminal=False)
    assert cmd_compare.run(args, console) == 0
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "Softplus" in text and "removed" in text and "faster" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_csv_and_json(jobs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "--base", str(jobs["mish"]), "--new", str(jobs["leakyrelu"]),
                      "--format", "csv")
    assert rc == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows[0]["name"] == "Total device time" and rows[0]["verdict"] == "faster"
    assert any(r["name"] == "Softplus" and r["verdict"] == "removed" for r in rows)
    rc, out, _ = _run(capsys, "-dir", str(jobs["mish"]), "-dir", str(jobs["leakyrelu"]),
                      "--format", "json", "--alpha", "0.01", "--threshold", "10%")
    doc = orjson.loads(out)
    assert rc == 0 and doc["alpha"] == 0.01 and doc["rows"][0]["name"] == "Total device time"
    assert doc["threshold"] == pytest.approx(0.10)
    assert {"p_value", "ci_low_us", "ci_high_us", "median_change_pct"} <= set(doc["rows"][0])


def test_output_file(jobs: dict[str, Path], tmp_path: Path,
                     capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "cmp.json"
    rc, out, _ = _run(capsys, "-dir", str(jobs["mish"]), "-dir", str(jobs["leakyrelu"]),
                      "--output", str(dest))
    assert rc == 0 and str(dest) in out
    assert orjson.loads(dest.read_bytes())["verdict"] == "faster"
    assert stat.S_IMODE(dest.stat().st_mode) == 0o640


def test_fail_on_regression(jobs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    same = _run(capsys, "-dir", str(jobs["mish"]), "-dir", str(jobs["mish"]),
                "--fail-on-regression", "--format", "csv")
    assert same[0] == 0
    slower = _run(capsys, "-dir", str(jobs["leakyrelu"]), "-dir", str(jobs["wide"]),
                  "--fail-on-regression", "--format", "csv")
    assert slower[0] == 3 and "regression" in slower[2]
    faster = _run(capsys, "-dir", str(jobs["wide"]), "-dir", str(jobs["leakyrelu"]),
                  "--fail-on-regression", "--format", "csv")
    assert faster[0] == 0
    assert _run(capsys, "-dir", str(jobs["leakyrelu"]), "-dir", str(jobs["wide"]),
                "--format", "csv")[0] == 0  # without the flag a regression is not an error


def _one_line_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    rc, _, err = _run(capsys, *argv)
    assert rc == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("openmsprof: error: "), err
    return lines[0]


def test_bad_inputs(jobs: dict[str, Path], tmp_path: Path,
                    capsys: pytest.CaptureFixture[str]) -> None:
    good = str(jobs["mish"])
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "not a profiling job" in _one_line_error(capsys, "-dir", str(empty), "-dir", good)
    missing = str(tmp_path / "nope")
    assert "does not exist" in _one_line_error(capsys, "-dir", good, "-dir", missing)
    assert "two jobs" in _one_line_error(capsys, "-dir", good)
    assert "--base" in _one_line_error(capsys, "--base", good)
    assert "--threshold" in _one_line_error(capsys, "-dir", good, "-dir", good,
                                            "--threshold", "lots")
    assert "--alpha" in _one_line_error(capsys, "-dir", good, "-dir", good, "--alpha", "1.5")
    assert "--output" in _one_line_error(capsys, "-dir", good, "-dir", good, "--output",
                                         str(tmp_path / "no" / "x.csv"))
    # a folder holding both jobs is ambiguous
    parent = jobs["mish"].parent.parent
    assert "jobs" in _one_line_error(capsys, "-dir", str(parent), "-dir", good)


def test_job_without_tasks(jobs: dict[str, Path], tmp_path: Path,
                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "markers"
    out.mkdir()
    openmsprof.start(output=out, msproftx=True)
    mstx.mark("nothing on the device")
    job = Path(openmsprof.stop())
    msg = _one_line_error(capsys, "-dir", str(job), "-dir", str(jobs["mish"]))
    assert "no device tasks" in msg and job.name in msg
