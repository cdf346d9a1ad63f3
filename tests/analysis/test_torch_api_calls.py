"""A torch rank dir's API calls for analyze's header: the Count column of api_statistic.csv."""

from __future__ import annotations

from pathlib import Path

import pytest

from openmsprof.analysis.advisor import torch_api_calls
from openmsprof.config.errors import RawDataError

HEAD = "Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance\n"


def _write(tmp_path: Path, body: str) -> Path:
    out = tmp_path / "ASCEND_PROFILER_OUTPUT"
    out.mkdir()
    (out / "api_statistic.csv").write_text(HEAD + body)
    return tmp_path


def test_counts_summed(tmp_path: Path) -> None:
    rank = _write(tmp_path, "host,Node,aten::mm,1.0,2,0.5,0.4,0.6,0\nhost,Node,aten::t,3.0,14,0.2,0.1,0.3,0\n")
    assert torch_api_calls(rank) == 16


def test_no_file_is_zero(tmp_path: Path) -> None:
    assert torch_api_calls(tmp_path) == 0


def test_bad_count_is_one_line(tmp_path: Path) -> None:
    rank = _write(tmp_path, "host,Node,aten::mm,1.0,two" + "x" * 500 + ",0.5,0.4,0.6,0\n")
    with pytest.raises(RawDataError) as e:
        torch_api_calls(rank)
    msg = str(e.value)
    assert "line 2" in msg and "is not a count" in msg and "\n" not in msg and len(msg) < 300
