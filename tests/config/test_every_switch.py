"""Every accepted Python switch (the fields of ProfileConfig that ``openmsprof.profile(**kw)``,
acl.json and the collect flags map onto) does what it says or is reported "not supported here":
each key is run with a non-default value in a real session, and either a concrete effect on the
job is checked (:data:`EFFECTS`) or the session's one-line "not supported here" note names it.

Keys this test has no effect check for yet, and that a plain session does not report, are listed
in :data:`SILENT` as strict xfails of the "reported" check (the day one is reported, its xfail
fails and it moves to the other tables).  Some of them do apply elsewhere, unchecked here:
training_trace/fp_point/bp_point fill step_trace's FP/BP columns at export, storage_limit_mb halts
collection at its size (200 MB at least), interval paces the flusher, and the torch-only keys
(profiler_level, export_type, data_simplification, op_attr, record_op_args, ...) act in the
torch facade.  (issue 23)"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import openmsprof
from openmsprof import mstx
from openmsprof.config.model import ProfileConfig
from openmsprof.recorder import rawfile
from openmsprof.recorder.records import Kind
from openmsprof.sources import emit

NOT_SWITCHES = {"unsupported", "notes", "explicit", "source"}

#: a non-default value per key
VALUES: dict[str, Any] = dict(
    switch=False, output=None, devices=[0, 1], acl_api=False, runtime_api=True, task_time="l2",
    aic_metrics="PipeUtilization", aicpu=True, l2=True, hccl=True, msproftx=False, training_trace=True,
    fp_point="a", bp_point="b", ge_api="l0", host_sys=["cpu", "mem", "disk"], host_sys_usage=["cpu", "mem"],
    host_sys_usage_freq=20, sys_hardware_mem_freq=50, sys_io_sampling_freq=50, sys_interconnection_freq=50,
    dvpp_freq=50, instr_profiling_freq=1000, llc_profiling="write", storage_limit_mb=300, interval=1,
    op_attr=True, task_memory=True, aicore_shape=True, api_stats=True, profiler_level="Level1",
    export_type=["db"], data_simplification=False, record_op_args=True, mstx_domain_include=["kept"],
    mstx_domain_exclude=["dropped"], gc_detect_threshold=5.0)

#: reported "not supported here" on this CPU-only machine (the note must name the key)
REPORTED = {"task_time", "aic_metrics", "aicpu", "l2", "hccl", "ge_api", "host_sys", "sys_hardware_mem_freq",
            "sys_io_sampling_freq", "sys_interconnection_freq", "dvpp_freq", "instr_profiling_freq",
            "gc_detect_threshold"}

#: no effect check here yet and not reported by a plain session (see the module docstring).
#: The mstx domain filters are the `native` helper's: TODO(native) move them to EFFECTS (a mark
#: in "dropped" absent, one in "kept" present) once they are applied on main.
SILENT = {"devices", "training_trace", "fp_point", "bp_point", "llc_profiling", "storage_limit_mb", "interval",
          "op_attr", "task_memory", "aicore_shape", "api_stats", "profiler_level", "export_type",
          "data_simplification", "record_op_args", "mstx_domain_include", "mstx_domain_exclude"}


def _records(job: Path) -> np.ndarray:
    return rawfile.read_all_records(job / "host" / "data")


def _kinds(job: Path) -> set[int]:
    return set(_records(job)["kind"].tolist()) if len(_records(job)) else set()


def _workload() -> None:
    mstx.mark("hello", None)
    mstx.mark("in a kept domain", "kept")
    mstx.mark("in a dropped domain", "dropped")
    t = emit.now_ns()
    emit.record_api("aclmdlExecute", emit.ApiLevel.ACL, t, t + 1000)
    emit.record_api("rtKernelLaunch", emit.ApiLevel.RUNTIME, t, t + 1000)


def _switch(job: Path | None, out: Path) -> None:
    assert job is None and not out.exists()  # switch=False: the block ran unprofiled


def _acl_api(job: Path | None, _out: Path) -> None:
    assert job is not None and Kind.API not in _kinds(job)  # acl_api=False (runtime_api off too)


def _runtime_api(job: Path | None, _out: Path) -> None:
    assert job is not None and Kind.API in _kinds(job)


def _msproftx(job: Path | None, _out: Path) -> None:
    assert job is not None and Kind.MARK not in _kinds(job)


def _host_sys_usage(job: Path | None, _out: Path) -> None:
    assert job is not None
    recs = _records(job).view(rawfile.COUNTER_DTYPE)
    assert len(recs[recs["kind"] == Kind.COUNTER])


def _output(job: Path | None, out: Path) -> None:
    assert job is not None and job.parent == out


EFFECTS: dict[str, Callable[[Path | None, Path], None]] = {
    "switch": _switch, "acl_api": _acl_api, "runtime_api": _runtime_api, "msproftx": _msproftx,
    "host_sys_usage": _host_sys_usage, "host_sys_usage_freq": _host_sys_usage, "output": _output}

KEYS = sorted(f.name for f in dataclasses.fields(ProfileConfig) if f.name not in NOT_SWITCHES)


def test_every_key_is_in_exactly_one_table() -> None:
    tables = [set(EFFECTS), REPORTED, SILENT]
    assert set(VALUES) == set(KEYS)
    for k in KEYS:
        assert sum(k in t for t in tables) == 1, k


@pytest.mark.parametrize("key", [
    pytest.param(k, marks=pytest.mark.xfail(strict=True, reason=f"{k}: no effect check here and not reported "
                                                                 "'not supported here' by a plain session (issue 23)"))
    if k in SILENT else k for k in KEYS])
def test_switch_is_applied_or_reported(key: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "out"
    kw = {key: VALUES[key]}
    if key == "host_sys_usage_freq":
        kw["host_sys_usage"] = ["cpu"]
    kw["output"] = str(out)
    with caplog.at_level(logging.WARNING, logger="openmsprof"), openmsprof.profile(**kw) as prof:
        _workload()
        if key.startswith("host_sys_usage"):
            time.sleep(0.5)  # a sampling period or two
    job = prof.job
    if key in REPORTED or key in SILENT:  # a silent key passes (strict xfail fails) once reported
        notes = [r.getMessage() for r in caplog.records if "not supported here" in r.getMessage()]
        assert any(f"{key}=" in n for n in notes), notes
    else:
        EFFECTS[key](Path(job) if job is not None else None, out)
