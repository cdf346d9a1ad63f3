"""profile_memory → memory_record.csv / operator_memory.csv (docs/formats.md §4 headers) and the DB's
MEMORY_RECORD / OP_MEMORY, checked against torch's own ``[memory]`` events in the Kineto trace."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest

from tests.torch.conftest import Trainer, rank_dirs, read_csv

tp = pytest.importorskip("openmsprof.torch.profiler")

MEMORY_RECORD = ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)",
                 "Stream Ptr", "Device Type"]
OPERATOR_MEMORY = ["Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)",
                   "Duration(us)", "Active Duration(us)", "Allocation Total Allocated(MB)",
                   "Allocation Total Reserved(MB)", "Allocation Total Active(MB)", "Release Total Allocated(MB)",
                   "Release Total Reserved(MB)", "Release Total Active(MB)", "Stream Ptr", "Device Type"]


def _run(root: Path, trainer: Trainer, memory: bool) -> Path:
    exp = tp._ExperimentalConfig(profiler_level=tp.ProfilerLevel.Level1, export_type=["text", "db"],
                                 data_simplification=False)  # the tests read FRAMEWORK/ afterwards
    with tp.profile(schedule=tp.schedule(wait=0, warmup=0, active=2, repeat=1), profile_memory=memory,
                    on_trace_ready=tp.tensorboard_trace_handler(str(root)), experimental_config=exp) as prof:
        for _ in range(3):
            trainer.step()
            prof.step()
    (d,) = rank_dirs(root)
    return d


@pytest.fixture(scope="module")
def mem_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("mem"), Trainer("cnn"), memory=True)


def _kineto_memory(rank_dir: Path) -> list[dict]:
    doc = orjson.loads((rank_dir / "FRAMEWORK" / "torch.kineto_trace.json").read_bytes())
    return [e["args"] for e in doc["traceEvents"] if e.get("name") == "[memory]"]


def _us(cell: str) -> int:
    """A µs cell (3 decimals, no trailing whitespace: issue 11) as integer ns."""
    assert cell == cell.strip(), repr(cell)
    whole, frac = cell.split(".")
    assert len(frac) == 3
    return int(whole) * 1000 + int(frac)


def test_memory_record_has_every_allocator_event(mem_run: Path) -> None:
    events = _kineto_memory(mem_run)
    header, both = read_csv(mem_run / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv")
    assert header == MEMORY_RECORD
    # torch_npu's order: each PTA row is followed by its PTA+GE row (no GE on a CPU: same totals)
    rows, combined = both[0::2], both[1::2]
    assert len(rows) == len(combined) == len(events) > 0
    assert {r["Component"] for r in rows} == {"PTA"} and {r["Component"] for r in combined} == {"PTA+GE"}
    assert [{**r, "Component": "PTA"} for r in combined] == rows
    assert {r["Device Type"] for r in rows} == {"CPU"}
    ts = [_us(r["Timestamp(us)"]) for r in rows]
    assert ts == sorted(ts)
    mb = sorted(round(float(r["Total Allocated(MB)"]) * 1024 * 1024) for r in rows)
    assert mb == sorted(e["Total Allocated"] for e in events)
    assert all(float(r["Total Active(MB)"]) == float(r["Total Allocated(MB)"]) for r in rows)


def test_npu_module_mem_is_the_pta_components_reserved_memory(mem_run: Path) -> None:
    events = _kineto_memory(mem_run)
    header, rows = read_csv(mem_run / "ASCEND_PROFILER_OUTPUT" / "npu_module_mem.csv")
    assert header == ["Device_id", "Component", "Timestamp(us)", "Total Reserved(MB)", "Device"]
    assert len(rows) == len(events) > 0 and {r["Component"] for r in rows} == {"PTA"}
    _h, record = read_csv(mem_run / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv")
    pta = [r for r in record if r["Component"] == "PTA"]
    assert [(r["Timestamp(us)"], float(r["Total Reserved(MB)"])) for r in rows] == \
        [(r["Timestamp(us)"], round(float(r["Total Reserved(MB)"]), 6)) for r in pta]
    assert max(float(r["Total Reserved(MB)"]) for r in rows) * 1024 * 1024 == \
        pytest.approx(max(e["Total Allocated"] for e in events), abs=1)


def test_operator_memory_one_row_per_allocation(mem_run: Path) -> None:
    events = _kineto_memory(mem_run)
    allocs = [e for e in events if e["Bytes"] > 0]
    header, rows = read_csv(mem_run / "ASCEND_PROFILER_OUTPUT" / "operator_memory.csv")
    assert header == OPERATOR_MEMORY
    assert len(rows) == len(allocs) > 0
    assert sorted(float(r["Size(KB)"]) * 1024 for r in rows) == sorted(float(e["Bytes"]) for e in allocs)
    assert sum(r["Name"].startswith("aten::") for r in rows) > len(rows) // 2
    freed = [r for r in rows if r["Release Time(us)"]]
    assert freed  # most tensors of a training step die within it
    for r in freed:
        a, f = _us(r["Allocation Time(us)"]), _us(r["Release Time(us)"])
        assert f >= a
        assert _us(r["Duration(us)"]) == f - a
        assert r["Active Release Time(us)"] == r["Release Time(us)"]
    alloc_times = [_us(r["Allocation Time(us)"]) for r in rows]
    assert alloc_times == sorted(alloc_times)


def test_db_memory_tables_in_bytes_and_ns(mem_run: Path) -> None:
    events = _kineto_memory(mem_run)
    _h, rows = read_csv(mem_run / "ASCEND_PROFILER_OUTPUT" / "operator_memory.csv")
    con = sqlite3.connect(mem_run / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db")
    try:
        cols = [r[1] for r in con.execute("PRAGMA table_info(OP_MEMORY)")]
        assert cols == ["name", "size", "allocationTime", "releaseTime", "activeReleaseTime", "duration",
                        "activeDuration", "allocationTotalAllocated", "allocationTotalReserved",
                        "allocationTotalActive", "releaseTotalAllocated", "releaseTotalReserved",
                        "releaseTotalActive", "streamPtr", "deviceId"]
        assert con.execute("SELECT count(*) FROM MEMORY_RECORD").fetchone()[0] == len(events)
        ops = con.execute("SELECT s.value, o.size, o.allocationTime, o.releaseTime, o.duration, o.deviceId "
                          "FROM OP_MEMORY o JOIN STRING_IDS s ON s.id = o.name ORDER BY o.rowid").fetchall()
        comp = {r[0] for r in con.execute("SELECT s.value FROM MEMORY_RECORD m JOIN STRING_IDS s ON s.id = m.component")}
    finally:
        con.close()
    assert comp == {"PTA"}
    assert [(o[0], o[1]) for o in ops] == [(r["Name"], round(float(r["Size(KB)"]) * 1024)) for r in rows]
    for name, _size, a, f, dur, dev in ops:
        assert dev == -1 and name
        if f is not None:
            assert dur == f - a
    first = rows[0]["Allocation Time(us)"].rstrip("\t")
    assert f"{ops[0][2] // 1000}.{ops[0][2] % 1000:03d}" == first


def test_no_memory_files_without_profile_memory_nor_comm_without_collectives(
        tmp_path: Path, trainer: Trainer) -> None:
    out = _run(tmp_path / "plain", trainer, memory=False) / "ASCEND_PROFILER_OUTPUT"
    names = {p.name for p in out.iterdir()}
    assert "trace_view.json" in names
    assert not names & {"memory_record.csv", "operator_memory.csv", "npu_module_mem.csv", "communication.json",
                        "communication_matrix.json"}
    con = sqlite3.connect(out / "ascend_pytorch_profiler_0.db")
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert not tables & {"OP_MEMORY", "MEMORY_RECORD"}  # an empty MEMORY_RECORD crashes msprof-analyze
        assert con.execute("SELECT count(*) FROM COMMUNICATION_OP").fetchone()[0] == 0
    finally:
        con.close()
    events = orjson.loads((out / "trace_view.json").read_bytes())
    assert not [e for e in events if e.get("name") == "process_name" and e["args"]["name"] == "Communication"]
