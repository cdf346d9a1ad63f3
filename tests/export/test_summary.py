"""export summary: file set, docs/formats.md §4 rules (wait time, ratios, variance, step trace), CSV
slicing, JSON form, data-exists rule."""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

import orjson
import pytest

from openmsprof.config.errors import ConfigError
from openmsprof.export.fmt import us, us_avg
from openmsprof.export.msprof.summary_export import export_summary
from openmsprof.export.msprof.tables import Num, Table, write_csv
from tests.export.dbfactory import BASE_NS, PID, Builder


def read(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_us_formatting_is_integer_based() -> None:
    assert us(0) == "0.000" and us(1) == "0.001" and us(1_234_567) == "1234.567"
    assert us(-1_500) == "-1.500"
    assert us(1_700_000_000_123_456_789) == "1700000000123456.789"
    assert us_avg(1_000, 3) == "0.333" and us_avg(2_000, 3) == "0.667"


def test_file_set_and_names(job: Path) -> None:
    names = sorted(p.name for p in export_summary(job))
    assert names == ["acl_statistic_host.csv", "api_statistic_host.csv", "host_cpu_usage_host.csv",
                     "host_mem_usage_host.csv", "msprof_tx_host.csv", "op_statistic_0.csv",
                     "op_summary_0.csv", "step_trace_0.csv", "task_time_0.csv"]
    assert not (job / "summary" / "op_statistic_s2_0.csv").exists()
    assert (job / "summary" / "op_statistic_s2_0.csv") in export_summary(job, s2=True)
    assert all(p.stat().st_mode & 0o777 == 0o640 for p in (job / "summary").iterdir())


def test_op_summary_rules(job: Path) -> None:
    export_summary(job)
    rows = read(job / "summary" / "op_summary_0.csv")
    assert len(rows) == 11
    first, second, fourth = rows[0], rows[1], rows[3]
    assert first["Task Start Time(us)"] == "1700000000124496.789"
    assert first["Task Wait Time(us)"] == "0.000"
    assert second["Task Wait Time(us)"] == "10.000"  # 706.789 - 496.789 - 200
    assert fourth["Task Wait Time(us)"] == "380.000"
    assert first["Task Type"] == "CPU" and first["Stream ID"] == "0" and first["Model ID"] == "1"
    for col in ("Block Num", "Mix Block Num", "HF32 Eligible", "Context ID", "OP State"):
        assert first[col] == "N/A"
    assert first["Input Shapes"] == "1,3,8,8" and first["Input Data Types"] == "FLOAT"
    assert rows[-1]["Model ID"] == "N/A"  # 4294967295


def test_statistics(job: Path) -> None:
    export_summary(job)
    ops = read(job / "summary" / "op_statistic_0.csv")
    assert [r["OP Type"] for r in ops][:3] == ["Conv", "Gemm", "Relu"]
    conv = ops[0]
    assert (conv["Core Type"], conv["Count"], conv["Total Time(us)"], conv["Min Time(us)"],
            conv["Avg Time(us)"], conv["Ratio(%)"]) == ("CPU", "3", "600.000", "200.000",
                                                         "200.000", "27.273")
    assert sum(float(r["Ratio(%)"]) for r in ops) == pytest.approx(100, abs=0.01)
    apis = read(job / "summary" / "api_statistic_host.csv")
    assert [(r["Device_id"], r["Level"], r["API Name"], r["Count"]) for r in apis] == [
        ("host", "AscendCL", "aclmdlExecute", "3"), ("host", "Runtime", "aclrtMalloc", "1"),
        ("host", "Runtime", "rtKernelLaunch", "3")]
    acl = read(job / "summary" / "acl_statistic_host.csv")
    assert acl[0]["Process ID"] == str(PID) and acl[0]["Type"] == "acl"
    assert acl[1]["Thread ID"] == str(PID + 8)


def test_api_variance(tmp_path: Path) -> None:
    b = Builder(tmp_path / "j" / "sqlite" / "msprof.db")
    b.meta(BASE_NS, BASE_NS + 10**9)
    for i, d in enumerate((1_000, 2_000, 6_000)):  # µs: 1, 2, 6 → mean 3, variance 14/3
        b.api(BASE_NS + i * 10_000, BASE_NS + i * 10_000 + d, 5000, PID, i + 1, "rtMalloc")
    b.close()
    (api,) = [p for p in export_summary(tmp_path / "j") if p.name.startswith("api_")]
    row = read(api)[0]
    assert row["Variance"] == "4.667" and row["Avg(us)"] == "3.000" and row["Time(us)"] == "9.000"
    assert row["Min(us)"] == "1.000" and row["Max(us)"] == "6.000"


def test_step_trace_iteration_time(job: Path, tmp_path: Path) -> None:
    export_summary(job)
    steps = read(job / "summary" / "step_trace_0.csv")
    assert [r["Iteration Time(us)"] for r in steps] == ["950.000", "1000.000", "1000.000"]
    assert steps[0]["FP Start(us)"] == "N/A" and steps[0]["Data Aug Bound(us)"] == "N/A"
    c = sqlite3.connect(job / "sqlite" / "msprof.db")  # framework steps: own duration
    c.execute("UPDATE STEP_TIME SET modelId = 4294967295")
    c.commit()
    c.close()
    export_summary(job)
    steps = read(job / "summary" / "step_trace_0.csv")
    assert [r["Iteration Time(us)"] for r in steps] == ["950.000"] * 3
    assert steps[0]["Model ID"] == "N/A"


def test_tx_and_host_usage(job: Path) -> None:
    export_summary(job)
    tx = read(job / "summary" / "msprof_tx_host.csv")
    assert [r["event_type"] for r in tx[:2]] == ["push/pop", "marker"]
    assert tx[1]["Start_time(us)"] == tx[1]["End_time(us)"]
    assert tx[0]["Device Start_time(us)"] == "N/A" and tx[0]["domain"] == "default"
    (cpu,) = read(job / "summary" / "host_cpu_usage_host.csv")
    assert cpu == {"Device_id": "host", "Total Cpu Numbers": "2", "Occupied Cpu Numbers": "1",
                   "Recommend Cpu Numbers": "2"}
    (mem,) = read(job / "summary" / "host_mem_usage_host.csv")
    assert mem["Total Memory(KB)"] == "8000000" and mem["Peak Used Memory(KB)"] == "4090000"


def test_json_format(job: Path) -> None:
    paths = export_summary(job, fmt="json")
    assert all(p.suffix == ".json" for p in paths)
    rows = orjson.loads((job / "summary" / "op_summary_0.json").read_bytes())
    assert rows[1]["Task Wait Time(us)"] == 10.0 and rows[1]["Op Name"] == "relu1"
    assert rows[0]["Task Start Time(us)"] == "1700000000124496.789"  # all digits kept
    assert list(rows[0])[:3] == ["Device_id", "Model ID", "Task ID"]
    with pytest.raises(ConfigError, match="--format"):
        export_summary(job, fmt="xml")


def test_csv_slices(tmp_path: Path) -> None:
    rows = [[i, Num(us(i * 1000))] for i in range(7)]
    paths = write_csv(tmp_path, Table("task_time", 0, ["a", "b"], rows), max_rows=3)
    assert [p.name for p in paths] == [f"task_time_0_slice_{k}.csv" for k in range(3)]
    got = [read(p) for p in paths]
    assert [len(g) for g in got] == [3, 3, 1]
    assert got[2][0] == {"a": "6", "b": "6.000"}
    # a later export that fits in one file removes the stale slices
    (single,) = write_csv(tmp_path, Table("task_time", 0, ["a", "b"], rows[:2]), max_rows=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == [single.name] == ["task_time_0.csv"]


def test_no_data_no_file(tmp_path: Path) -> None:
    b = Builder(tmp_path / "j" / "sqlite" / "msprof.db")
    b.meta(BASE_NS, None)
    b.close()
    assert export_summary(tmp_path / "j") == []
