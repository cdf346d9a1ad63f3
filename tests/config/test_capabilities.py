"""Switches this machine cannot honour: reported once, in the log and the job info."""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path

import pytest

import openmsprof
from openmsprof.config import Machine, ProfileConfig, check, from_kwargs, load_acl_json, machine
from openmsprof.config.capabilities import reasons
from openmsprof.recorder import session


def test_machine_detection_matches_the_system() -> None:
    m = machine()
    has_gpu = os.path.isdir("/proc/driver/nvidia/gpus") or bool(glob.glob("/dev/nvidia[0-9]*"))
    assert (m.nvidia_gpus > 0) == has_gpu
    assert (m.ascend_npus > 0) == bool(glob.glob("/dev/davinci[0-9]*"))
    assert machine() is m  # detected once


def test_describe() -> None:
    assert Machine().describe() == "CPU only"
    assert Machine(nvidia_gpus=2).describe() == "CPU + 2 NVIDIA GPUs"
    assert Machine(ascend_npus=1).describe() == "CPU + 1 Ascend NPU (not read by openmsprof)"


def test_nothing_reported_for_defaults_and_cpu_switches() -> None:
    cfg = ProfileConfig(host_sys=["cpu", "mem"], host_sys_usage=["cpu"], msproftx=True,
                        task_time="l1", acl_api=True, runtime_api=True)
    assert reasons(cfg, Machine()) == []


def test_each_unsupported_switch_has_one_line() -> None:
    cfg = ProfileConfig(aic_metrics="PipeUtilization", task_time="l3", l2=True, hccl=True,
                        aicpu=True, sys_hardware_mem_freq=10, sys_io_sampling_freq=10,
                        sys_interconnection_freq=10, dvpp_freq=10, instr_profiling_freq=300,
                        ge_api="l1", host_sys=["cpu", "osrt", "network"])
    lines = reasons(cfg, Machine(nvidia_gpus=1))
    assert [line.split(":")[0] for line in lines] == [
        "aic_metrics=PipeUtilization", "task_time=l3", "l2=on", "hccl=on", "aicpu=on",
        "sys_hardware_mem_freq=10", "sys_io_sampling_freq=10", "sys_interconnection_freq=10",
        "dvpp_freq=10", "instr_profiling_freq=300", "ge_api=l1", "host_sys=osrt,network"]
    assert all("\n" not in line for line in lines)
    assert "this machine is CPU + 1 NVIDIA GPU" in lines[0]


def test_metrics_inactive_without_task_time() -> None:
    for task_time in ("off", "l0"):
        assert reasons(ProfileConfig(aic_metrics="Memory", task_time=task_time), Machine()) == []


def test_check_is_idempotent_and_skips_switch_off() -> None:
    cfg = check(ProfileConfig(l2=True), Machine())
    assert check(check(cfg, Machine()), Machine()).unsupported == cfg.unsupported
    assert len(cfg.unsupported) == 1
    assert check(ProfileConfig(switch=False, l2=True)).unsupported == []


def test_reported_in_collection_log_and_info_json(out_dir: Path, tmp_path: Path) -> None:
    """End to end: an acl.json asking for AI Core metrics and aicpu, a real session."""
    acl = tmp_path / "acl.json"
    acl.write_text(json.dumps({"profiler": {"switch": "on", "output": str(out_dir), "aicpu": "on",
                                            "aic_metrics": "PipeUtilization"}}))
    cfg = load_acl_json(acl)
    assert cfg is not None
    s = session.start(cfg)
    job = s.root
    session.stop()
    log = (job / "host" / "collection.log").read_text()
    for head in ("aic_metrics=PipeUtilization", "aicpu=on"):
        assert log.count(f"not supported here: {head}") == 1
    info = json.loads(next((job / "host").glob("info.json*")).read_text())
    assert info["openmsprof"]["config"]["unsupported"] == cfg.unsupported


def test_python_entry_point_reports_too(out_dir: Path) -> None:
    with openmsprof.profile(output=out_dir, hccl=True) as prof:
        pass
    assert prof.job is not None
    log = (prof.job / "host" / "collection.log").read_text()
    assert "not supported here: hccl=on: HCCL collective tracing needs Ascend HCCL" in log
    assert from_kwargs(hccl=True).unsupported[0] in log


def test_loader_notes_reach_the_collection_log(out_dir: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Decision 10: acl.json without output writes to the cwd and says so in the log."""
    monkeypatch.chdir(out_dir)
    acl = tmp_path / "acl.json"
    acl.write_text(json.dumps({"profiler": {"switch": "on"}}))
    cfg = load_acl_json(acl)
    assert cfg is not None and cfg.output == str(out_dir)
    s = session.start(cfg)
    job = s.root
    session.stop()
    assert job.parent == out_dir
    log = (job / "host" / "collection.log").read_text()
    assert f"config: acl.json {acl}: no output given; writing to the current directory" in log
