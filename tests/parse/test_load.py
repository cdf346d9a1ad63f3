"""``openmsprof.load``: summaries as rows and DataFrames, raw tables, clear errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import openmsprof
from openmsprof.config.errors import ConfigError, RawDataError
from tests.parse.conftest import LOOPS, TASKS, THREADS


def test_load_summaries_and_tables(real_job: tuple[Path, dict[str, Any]]) -> None:
    job, _ = real_job
    assert not (job / "sqlite").exists()
    with openmsprof.load(job) as j:
        assert (job / "sqlite" / "msprof.db").is_file()  # imported on demand
        names = j.names()
        assert {"op_summary", "api_statistic", "msprof_tx"} <= set(names)
        api = {r["API Name"]: r for r in j.rows("api_statistic")}
        assert api["aclmdlExecute"]["Count"] == TASKS
        assert api["aclmdlExecute"]["Avg(us)"] == pytest.approx(5.0)
        tx = j.rows("msprof_tx")
        assert len(tx) == len(j.db_rows("MSTX_EVENTS")) == THREADS * (3 * LOOPS + 1) + 2
        df = j.dataframe("op_summary")
        assert len(df) == TASKS and list(df.columns)[:2] == ["Device_id", "Model ID"]
        assert len(j.db_dataframe("TASK")) == TASKS
        strings = j.strings()
        assert {strings[r["name"]] for r in j.db_rows("CANN_API")} == {"aclmdlExecute", "rtKernelLaunch"}
        with pytest.raises(ConfigError, match="no summary 'nope'"):
            j.rows("nope")
        with pytest.raises(ConfigError, match="no table"):
            j.db_rows("NOPE")


def test_load_bad_paths(tmp_path: Path, out_dir: Path) -> None:
    with pytest.raises(RawDataError, match="does not exist"):
        openmsprof.load(tmp_path / "missing")
    from tests.parse.conftest import make_job

    make_job(out_dir, sampler=False)
    make_job(out_dir, sampler=False)
    with pytest.raises(RawDataError, match="holds 2 jobs"):
        openmsprof.load(out_dir)
