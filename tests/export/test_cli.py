"""The export/show verbs through the real argparse entry point."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from openmsprof.cli.main import main
from tests.export.dbfactory import make_job


def test_export_verbs_write_files(job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "timeline", "-dir", str(job)]) == 0
    assert (job / "timeline" / "msprof_0.json").is_file()
    assert (job / "timeline" / "step_trace_0.json").is_file()  # the job has steps: its iteration timeline
    assert main(["export", "summary", "--collection-dir", str(job), "--format", "json"]) == 0
    assert (job / "summary" / "op_summary_0.json").is_file()
    assert main(["export", "summary", "-dir", str(job), "--layout", "svp"]) == 0
    assert [p.name for p in (job / "summary").glob("op_statistic_0_*_0.csv")]  # seed 002's name
    assert [p.name for p in (job / "summary").glob("op_summary_0.*.NA.*.csv")]
    assert main(["export", "timeline", "-dir", str(job), "--ascend-compat",
                 "--start-us", "0", "--end-us", "126000", "--max-size-mb", "50"]) == 0
    assert isinstance(orjson.loads((job / "timeline" / "msprof_0.json").read_bytes()), list)
    out = capsys.readouterr().out
    assert "2 timeline file(s)" in out and "summary file(s)" in out


def test_folder_of_jobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = make_job(tmp_path / "x")
    b = tmp_path / "x" / "PROF_000002_20240101000000000_00004243ABCDEFGH"
    shutil.copytree(a, b)
    assert main(["export", "summary", "-dir", str(tmp_path / "x")]) == 0
    assert (a / "summary" / "op_summary_0.csv").is_file()
    assert (b / "summary" / "op_summary_0.csv").is_file()
    assert main(["show", "-dir", str(tmp_path / "x"), "--format", "json", "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count('"top_operators_by_total_time"') == 2


def test_show_json_to_stdout(job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "-dir", str(job), "--format", "json", "--top", "3"]) == 0
    data = orjson.loads(capsys.readouterr().out)
    assert len(data["top_operators_by_total_time"]) == 3


def test_bad_input_gives_one_line_errors(tmp_path: Path, job: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "timeline", "-dir", str(tmp_path / "missing")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("openmsprof: error: ") and "missing" in err and err.count("\n") == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["show", "-dir", str(empty)]) == 1
    assert "not a profiling job" in capsys.readouterr().err
    assert main(["show", "-dir", str(job), "--top", "0"]) == 1
    assert "--top" in capsys.readouterr().err
    assert main(["export", "timeline", "-dir", str(job), "--max-size-mb", "-1"]) == 1
    assert main(["export"]) == 2
    with pytest.raises(SystemExit) as exc:
        main(["export", "summary", "-dir", str(job), "--format", "xml"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["export", "timeline", "-h"])
    assert exc.value.code == 0
    assert "--ascend-compat" in capsys.readouterr().out
