"""Each collection mode of seed 004 on a real training loop, and the files it must produce."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

import openmsprof.torch.profiler as tp
import torch
from openmsprof.export.classify import core_name, op_type
from openmsprof.recorder import rawread
from tests.torch.conftest import DIR_RE, Trainer, modes_ok, rank_dirs, read_csv, trace

OUT = "ASCEND_PROFILER_OUTPUT"


def _level1(**kw: object) -> tp._ExperimentalConfig:
    return tp._ExperimentalConfig(profiler_level=tp.ProfilerLevel.Level1, **kw)  # type: ignore[arg-type]


def test_context_manager_schedule_handler(trainer: Trainer, tmp_path: Path) -> None:
    with tp.profile(activities=[tp.ProfilerActivity.CPU, tp.ProfilerActivity.NPU],
                    schedule=tp.schedule(wait=1, warmup=1, active=2, repeat=1, skip_first=1),
                    on_trace_ready=tp.tensorboard_trace_handler("./result"), record_shapes=True,
                    with_stack=True, experimental_config=_level1(data_simplification=False, msprof_tx=True)) as prof:
        prof.add_metadata("test_key1", "test_value1")
        prof.add_metadata_json("test_key2", "[1, 2, 3]")
        for _ in range(7):
            trainer.step()
            prof.step()
    dirs = rank_dirs(tmp_path / "result")
    assert len(dirs) == 1 and DIR_RE.match(dirs[0].name)
    rd = dirs[0]
    assert rd.name.split("_")[-3].isdigit()
    info = orjson.loads((rd / "profiler_info_0.json").read_bytes())
    assert info["config"]["common_config"]["schedule"]["active"] == 2
    assert "leaf CPU operators" in info["backend"]
    meta = orjson.loads((rd / "profiler_metadata.json").read_bytes())
    assert meta["test_key1"] == "test_value1" and meta["test_key2"] == [1, 2, 3]
    assert "ENV_VARIABLES" in meta
    out = rd / OUT
    for name in ("trace_view.json", "kernel_details.csv", "operator_details.csv", "op_statistic.csv",
                 "api_statistic.csv", "step_trace_time.csv", "analyse.done"):
        assert (out / name).is_file(), name
    assert (rd / "FRAMEWORK" / "torch.kineto_trace.json").is_file()
    assert list(rd.glob("PROF_*/host/data"))
    assert modes_ok(rd)

    header, steps = read_csv(out / "step_trace_time.csv")
    assert header == ["Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped",
                      "Communication", "Free", "Stage", "Bubble",
                      "Communication(Not Overlapped and Exclude Receive)", "Preparing"]
    assert [r["Step"] for r in steps] == ["3", "4"]
    for r in steps:
        assert float(r["Computing"]) > 0 and all(float(r[h]) >= 0 for h in header[2:])

    events = trace(out)
    procs = {e["args"]["name"]: e["pid"] for e in events if e.get("name") == "process_name"}
    assert {"Python", "CANN", "Ascend Hardware", "Overlap Analysis"} <= set(procs)
    kernels = {(e["pid"], e["tid"], e["ts"]): e for e in events
               if e.get("ph") == "X" and e["pid"] == procs["Ascend Hardware"]}
    assert kernels and all(k["args"]["Task Type"] == core_name(k["name"]) and k["args"]["Executor"] == "CPU"
                           for k in kernels.values())
    assert {k["args"]["Task Type"] for k in kernels.values()} <= {"CPU", "MEMCPY_ASYNC"}  # the real executor (decision 1)
    assert "CPU" in {k["args"]["Task Type"] for k in kernels.values()}
    flows_f = [e for e in events if e.get("cat") == "async_npu" and e["ph"] == "f"]
    assert flows_f and all((f["pid"], f["tid"], f["ts"]) in kernels for f in flows_f)
    ov_names = {e["name"] for e in events if e.get("ph") == "X" and e["pid"] == procs["Overlap Analysis"]}
    assert {"Computing", "Free"} <= ov_names
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    assert any(e["name"] == "ProfilerStep#3" for e in ops)
    assert any("Input Dims" in e["args"] and "Call stack" in e["args"] for e in ops)
    assert all(isinstance(e["ts"], str) and re.match(r"^\d+\.\d{3}$", e["ts"]) for e in ops)

    kh, krows = read_csv(out / "kernel_details.csv")
    assert kh[:2] == ["Step Id", "Device_id"] and "Accelerator Core" in kh
    assert len(krows) == len(kernels)
    by_ts = {k[2]: v for k, v in kernels.items()}
    for r in krows:
        assert r["Start Time(us)"].endswith("\t")
        k = by_ts[r["Start Time(us)"].rstrip("\t")]
        assert k["name"] == r["Name"] and r["Accelerator Core"] == k["args"]["Task Type"] and r["Step Id"] in ("3", "4")
        assert r["Executor"] == "CPU" and r["Type"] == op_type(r["Name"])
    oh, orows = read_csv(out / "operator_details.csv")
    assert oh[0] == "Name" and len(orows) > len(krows)


def test_start_stop_cnn(cnn: Trainer, tmp_path: Path) -> None:
    prof = tp.profile(on_trace_ready=tp.tensorboard_trace_handler(tmp_path / "r"),
                      experimental_config=tp._ExperimentalConfig(profiler_level=tp.ProfilerLevel.Level0))
    for step in range(4):
        if step == 1:
            prof.start()
        cnn.step()
        if step == 2:
            prof.stop()
    (rd,) = rank_dirs(tmp_path / "r")
    h, rows = read_csv(rd / OUT / "kernel_details.csv")
    assert h[:2] == ["Step Id", "Device_id"] and "Block Num" in h and "Model ID" not in h
    assert any("convolution" in r["Name"] for r in rows)
    h, rows = read_csv(rd / OUT / "op_statistic.csv")  # whenever kernel_details.csv (issue 9)
    assert h[:2] == ["Device_id", "OP Type"] and rows
    assert not (rd / OUT / "api_statistic.csv").exists()  # Level1+ only (docs/formats.md §3)
    assert not (rd / "FRAMEWORK").exists()  # data_simplification (default on) removed it
    assert (rd / OUT / "analyse.done").exists()


def test_kineto_profile_export_chrome_trace(cnn: Trainer, tmp_path: Path) -> None:
    prof = tp._KinetoProfile(activities=[tp.ProfilerActivity.CPU], record_shapes=True)
    for epoch in range(3):
        cnn.step()
        if epoch == 0:
            prof.start()
        if epoch == 1:
            prof.stop()
    prof.export_chrome_trace(tmp_path / "result_dir" / "trace.json")
    events = orjson.loads((tmp_path / "result_dir" / "trace.json").read_bytes())
    assert isinstance(events, list)
    assert any(e.get("cat") == "cpu_op" and e["name"] == "aten::conv2d" for e in events)
    (rd,) = rank_dirs(tmp_path)
    assert (rd / OUT / "analyse.done").exists()


def test_mstx_markers_land_in_trace_and_job(trainer: Trainer, tmp_path: Path) -> None:
    mstx = tp.mstx()
    exp = tp._ExperimentalConfig(profiler_level=tp.ProfilerLevel.Level0, msprof_tx=True,
                                 export_type=tp.ExportType.Text, data_simplification=False)
    with tp.profile(schedule=tp.schedule(wait=0, warmup=0, active=2, repeat=1),
                    on_trace_ready=tp.tensorboard_trace_handler("./mx"), experimental_config=exp) as prof:
        for _ in range(3):
            mstx.mark("forward_start")
            rid = mstx.range_start("train_step")
            trainer.step()
            mstx.range_end(rid)
            prof.step()
    (rd,) = rank_dirs(tmp_path / "mx")
    names = {e["name"] for e in trace(rd / OUT) if e.get("cat") == "cpu_op"}
    assert {"forward_start", "train_step"} <= names
    (data,) = rd.glob("PROF_*/host/data")
    strings = set(rawread.read_strings(data).values())
    assert {"forward_start", "train_step"} <= strings


def test_op_statistic_matches_key_averages(trainer: Trainer) -> None:
    seen: dict[str, object] = {}

    def ready(prof: tp.profile) -> None:
        from openmsprof.torch.profiler.analysis import analyse_dir

        seen["out"] = analyse_dir(prof.prof_path)  # type: ignore[arg-type]
        seen["ka"] = {k.key: k for k in prof.key_averages()}

    with tp.profile(schedule=tp.schedule(wait=1, active=3, repeat=1), on_trace_ready=ready,
                    experimental_config=_level1()) as prof:
        for _ in range(6):
            trainer.step()
            prof.step()
    _h, rows = read_csv(seen["out"] / "op_statistic.csv")  # type: ignore[operator]
    ka = seen["ka"]
    assert rows
    ours_total = theirs_total = 0.0
    compared = 0
    for r in rows:
        k = ka.get(r["OP Type"])  # type: ignore[attr-defined]
        if k is None:  # matrix-engine work is grouped under its CANN-style type (classify.op_type)
            assert r["Core Type"] == "CPU" and r["OP Type"] in ("MatMul", "MatMulBackward", "BatchMatMul")
            continue
        if int(r["Count"]) != k.count:  # the name also ran as a non-kernel (parent) operator
            continue
        ours, theirs = float(r["Total Time(us)"]), float(k.cpu_time_total)
        ours_total += ours
        theirs_total += theirs
        compared += 1
        assert ours == pytest.approx(theirs, rel=0.05, abs=0.01), r["OP Type"]
    assert compared >= len(rows) // 2
    assert ours_total == pytest.approx(theirs_total, rel=0.05)


def test_export_stacks_folded(trainer: Trainer, tmp_path: Path) -> None:
    prof = tp._KinetoProfile(with_stack=True)
    prof.start()
    trainer.step()
    prof.stop()
    prof.export_stacks(tmp_path / "stack.log", metric="self_npu_time_total")
    lines = (tmp_path / "stack.log").read_text().splitlines()
    assert lines and all(re.match(r"^\S.*;\S+ \d+$", ln) for ln in lines)
    assert any(";aten::" in ln for ln in lines)


def test_supported_queries_are_honest() -> None:
    if torch.cuda.is_available():
        assert tp.ProfilerActivity.NPU in tp.supported_activities()
    else:
        assert tp.supported_activities() == {tp.ProfilerActivity.CPU}
    assert tp.supported_ai_core_metrics() == {tp.AiCMetrics.AiCoreNone}
    assert tp.supported_export_type() == {"text", "db"}
    assert "Level2" in tp.supported_profiler_level()


def test_export_type_db(trainer: Trainer, tmp_path: Path) -> None:
    import sqlite3

    exp = tp._ExperimentalConfig(export_type=[tp.ExportType.Text, tp.ExportType.Db])
    with tp.profile(schedule=tp.schedule(wait=0, active=2, repeat=1),
                    on_trace_ready=tp.tensorboard_trace_handler("db"), record_shapes=True,
                    experimental_config=exp) as prof:
        for _ in range(3):
            trainer.step()
            prof.step()
    (rd,) = rank_dirs(tmp_path / "db")
    out = rd / OUT
    con = sqlite3.connect(out / "ascend_pytorch_profiler_0.db")
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"STRING_IDS", "TASK", "COMPUTE_TASK_INFO", "PYTORCH_API", "STEP_TIME", "MSTX_EVENTS",
            "ENUM_HCCL_DATA_TYPE", "META_DATA"} <= tables
    n_task = con.execute("SELECT count(*) FROM TASK").fetchone()[0]
    core = con.execute("SELECT DISTINCT s.value FROM TASK t JOIN STRING_IDS s ON s.id = t.taskType").fetchall()
    assert {c for (c,) in core} <= {"CPU", "MEMCPY_ASYNC"} and ("CPU",) in core  # decision 1
    assert con.execute("SELECT value FROM META_DATA WHERE name = 'EXECUTOR'").fetchall() == [("CPU",)]
    _h, krows = read_csv(out / "kernel_details.csv")
    assert n_task == len(krows)
    acon = sqlite3.connect(out / "analysis.db")
    steps = acon.execute("SELECT step, computing FROM StepTraceTime").fetchall()
    _h, srows = read_csv(out / "step_trace_time.csv")
    assert [(str(s), float(c)) for s, c in steps] == [(r["Step"], float(r["Computing"])) for r in srows]
    assert (out / "analyse.done").exists()
