"""TF2 mode (npu_device) end to end on real TensorFlow: Keras fit, tf.function, eager ops."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import orjson

from openmsprof.parse.importer import import_job
from tests.tensorflow.helpers import (
    EXAMPLES,
    PROGRAMS,
    QUIET,
    export,
    jobs,
    rows,
    run_py,
    tf_own_op_count,
    tf_own_op_counts,
)


def test_keras_fit_job_and_export(tmp_path):
    r = run_py([str(PROGRAMS), "keras", str(tmp_path)])
    assert r.returncode == 0, r.stderr
    (job,) = jobs(tmp_path)
    assert f"job {job}" in r.stdout
    export(job, "summary")
    export(job, "summary", "--format", "json")
    export(job, "timeline")
    s = job / "summary"
    ops = rows(s / "op_summary_0.csv")
    stat = rows(s / "op_statistic_0.csv")
    # every op of TensorFlow's own trace is one task, and op_statistic counts them all
    assert len(ops) == sum(int(r["Count"]) for r in stat) == tf_own_op_count(job) > 20
    assert {r["Task Type"] for r in ops} == {"CPU"}
    assert any("gradient_tape" in r["Op Name"] for r in ops)
    assert {"MatMul", "Mul"} & {r["OP Type"] for r in stat} or any("MatMul" in r["OP Type"] for r in stat)
    # Keras fit: 4 train steps + 1 evaluate step, one step_trace row each, FP/BP found automatically
    steps = rows(s / "step_trace_host.csv")
    assert [r["Iteration ID"] for r in steps] == ["1", "2", "3", "4", "5"]
    for r in steps[:4]:
        assert r["FP Start(us)"] and r["BP End(us)"], r
        assert float(r["FP Start(us)"]) <= float(r["BP End(us)"]) <= float(r["Iteration End(us)"])
        assert float(r["FP to BP Time(us)"]) >= 0
    assert steps[4]["BP End(us)"] == ""  # evaluate has no gradient op: empty, not invented
    api = {r["API Name"]: int(r["Count"]) for r in rows(s / "api_statistic_host.csv")}
    assert api.get("multi_step_on_iterator", 0) + api.get("one_step_on_iterator", 0) >= 5
    assert (s / "step_trace_host.json").exists()
    assert (job / "timeline" / "msprof_0.json").stat().st_size > 1000
    log = (job / "host" / "collection.log").read_text()
    assert "TensorFlow profiling enabled by npu_device.open().as_default()" in log
    # seed 003 Table 1 names mindstudio_profiler_output/: the tool-facing layout of the same job
    tool = job / "mindstudio_profiler_output"
    names = sorted(p.name for p in tool.iterdir())
    for stem in ("msprof", "op_summary", "op_statistic", "step_trace", "task_time", "api_statistic",
                 "fusion_op"):
        assert any(re.fullmatch(rf"{stem}_\d{{14}}\.(csv|json)", n) for n in names), (stem, names)
    (stat_f,) = [tool / n for n in names if n.startswith("op_statistic_")]
    tool_stat = rows(stat_f)
    assert next(iter(tool_stat[0])) == "Device_id"
    assert sum(int(r["Count"]) for r in tool_stat) == len(ops)  # the same ops as summary/
    assert (tool / "README.txt").is_file()
    assert [p.name for p in job.glob("msprof_*.db") if re.fullmatch(r"msprof_\d{14}\.db", p.name)]


def test_enabled_without_options_uses_seed_defaults(tmp_path):
    r = run_py([str(PROGRAMS), "env", str(tmp_path)], env={"PROFILING_MODE": "true"}, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (job,) = jobs(tmp_path)  # no options: output is the current directory
    log = (job / "host" / "collection.log").read_text()
    for name in ("hccl=on", "aicpu=on", "aic_metrics=PipeUtilization"):
        assert log.count(name) == 1, name  # what the CPU cannot honour: said once
    assert "env:PROFILING_MODE=true" in (job / "host" / "sample.json").read_text()
    export(job)
    assert rows(job / "summary" / "op_statistic_0.csv")


def test_malformed_env_options_warn_once_and_train(tmp_path):
    r = run_py([str(PROGRAMS), "env", str(tmp_path)], cwd=tmp_path,
               env={"PROFILING_MODE": "true", "PROFILING_OPTIONS": '{"task_trace": "maybe"}'})
    assert r.returncode == 0, r.stderr
    assert "loss" in r.stdout
    assert r.stderr.count("task_trace") == 1 and "default options" in r.stderr
    (job,) = jobs(tmp_path)  # profiled with the defaults
    assert "ignored malformed environment" in (job / "host" / "collection.log").read_text()


def test_enabled_twice_one_job_one_warning(tmp_path):
    r = run_py([str(PROGRAMS), "twice", str(tmp_path)])
    assert r.returncode == 0, r.stderr
    assert len(jobs(tmp_path)) == 1
    assert r.stderr.count("already enabled") == 1


def test_not_stopped_is_closed_at_exit(tmp_path):
    r = run_py([str(PROGRAMS), "keras-noclose", str(tmp_path)])
    assert r.returncode == 0, r.stderr
    (job,) = jobs(tmp_path)
    assert (job / "host" / "end_info").exists()
    export(job)
    assert len(rows(job / "summary" / "step_trace_host.csv")) == 5


def test_unwritable_output_warns_and_trains(tmp_path):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")  # tests run as root too: a file in the path blocks even root
    r = run_py([str(PROGRAMS), "keras", str(tmp_path), orjson.dumps({"output": str(blocker / "prof")}).decode()])
    assert r.returncode == 0, r.stderr
    assert "loss" in r.stdout and "job None" in r.stdout
    (line,) = [ln for ln in r.stderr.splitlines() if "profiling not started" in ln]
    assert str(blocker) in line


def _kill_mid_step(tmp_path, env, after_s, parts=0):
    """Run the endless step loop, SIGKILL it ``after_s`` seconds into the window (and not before
    ``parts`` rolled tracer parts are on disk: on a loaded machine 3 s may hold none); the job."""
    p = subprocess.Popen([sys.executable, str(PROGRAMS), "sleep", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={k: v for k, v in {**os.environ, **QUIET, **env}.items()
                              if k not in ("PROFILING_MODE", "PROFILING_OPTIONS")})
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "stepping"
        time.sleep(after_s)
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("PROF_*/host/tf_xplane/plugins/profile/*/*.xplane.pb"))) < parts \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    (job,) = jobs(tmp_path)
    res = import_job(job)
    assert res.db_path.exists()
    export(job)  # a killed job still imports and exports
    return job


def test_sigkill_mid_step_job_imports(tmp_path):
    job = _kill_mid_step(tmp_path, {}, 1.0)
    # TensorFlow's in-memory trace dies with the process (documented): no TF ops by default
    assert not (job / "summary" / "op_summary_0.csv").exists()


def test_sigkill_with_rolling_keeps_all_but_the_last_period(tmp_path):
    """OPENMSPROF_TF_ROLL_S: the tracer is rolled, so a kill loses at most one period of ops."""
    job = _kill_mid_step(tmp_path, {"OPENMSPROF_TF_ROLL_S": "0.5"}, 3.0, parts=2)
    ops = rows(job / "summary" / "op_summary_0.csv")
    assert {r["OP Type"] for r in ops} >= {"Sum"} and len(ops) > 20
    log = (job / "host" / "collection.log").read_text()
    assert "rolls every 0.5 s" in log
    assert len(list((job / "host" / "tf_xplane").glob("plugins/profile/*/*.xplane.pb"))) >= 1


def test_rolled_tracer_records_every_part(tmp_path):
    """A window rolled every 0.2 s: each part is kept apart and recorded, fusions once."""
    r = run_py([str(PROGRAMS), "keras", str(tmp_path)], env={"OPENMSPROF_TF_ROLL_S": "0.2"})
    assert r.returncode == 0, r.stderr
    (job,) = jobs(tmp_path)
    per_part = tf_own_op_counts(job)
    # at least two parts hold ops (how many each holds depends on the load: what runs while the
    # tracer restarts is not traced, docs/tensorflow.md)
    assert len(per_part) >= 2 and sorted(per_part)[-2] > 0, per_part
    export(job)
    ops = rows(job / "summary" / "op_summary_0.csv")
    assert len(ops) == sum(per_part) > max(per_part)  # every part's ops, none twice
    fused = [(r["Model Name"], r["Fusion Op"]) for r in rows(job / "summary" / "fusion_op_0.csv")]
    assert fused and len(fused) == len(set(fused))
    assert "rolled" in (job / "host" / "collection.log").read_text()


def test_bad_roll_period_is_noted_and_off(tmp_path):
    r = run_py([str(PROGRAMS), "keras", str(tmp_path)], env={"OPENMSPROF_TF_ROLL_S": "soon"})
    assert r.returncode == 0, r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if "OPENMSPROF_TF_ROLL_S" in ln]
    assert "'soon'" in line and "not rolled" in line


def test_seed_tf2_sample_with_host_sys(tmp_path):
    """examples/tf2_keras.py (seed 003's TF2 sample) and host_sys cpu,mem through PROFILING_OPTIONS."""
    r = run_py([str(EXAMPLES / "tf2_keras.py"), str(tmp_path)])
    assert r.returncode == 0, r.stderr
    (job,) = jobs(tmp_path)
    log = (job / "host" / "collection.log").read_text()
    assert "fused nodes (fusion_op)" in log
    export(job)
    assert len(rows(job / "summary" / "step_trace_host.csv")) == 4  # 128 samples / batch 32
    # the optimized graph of Keras' train step: grappler's fused Dense kernels and op shapes
    fused = rows(job / "summary" / "fusion_op_0.csv")
    assert fused and all(r["Original Ops"].split(",")[0].endswith("/MatMul") for r in fused), fused
    assert all(r["Model Name"].startswith("__inference_") for r in fused)
    ops = rows(job / "summary" / "op_summary_0.csv")
    kernels = {r["OP Type"]: r for r in ops if "MatMul" in r["OP Type"] and "gradient" not in r["Op Name"]}
    assert kernels and all(r["Input Shapes"] not in ("", "N/A") for r in kernels.values()), kernels
    opts = orjson.dumps({"output": str(tmp_path / "sys"), "host_sys": "cpu,mem"}).decode()
    r = run_py([str(PROGRAMS), "keras", str(tmp_path), opts])
    assert r.returncode == 0, r.stderr
    (job,) = jobs(tmp_path / "sys")
    export(job)
    for name in ("host_cpu_usage_host.csv", "host_mem_usage_host.csv"):
        (row,) = rows(job / "summary" / name)
        assert int(next(iter(v for k, v in row.items() if k.startswith("Total")))) > 0


OTHER_PROFILER = r'''
import json, os, sys
import tensorflow as tf
from openmsprof.tensorflow import npu_device
out = sys.argv[1]
tf.profiler.experimental.start(os.path.join(out, "tb"))
pc = npu_device.global_options().profiling_config
pc.enable_profiling = True
pc.profiling_options = json.dumps({"output": out})
npu_device.open().as_default()
print("sum", float(tf.reduce_sum(tf.ones((3, 3)))))
print("job", npu_device.close())
tf.profiler.experimental.stop()
'''


def test_another_tf_profiler_running_is_noted(tmp_path):
    r = run_py(["-c", OTHER_PROFILER, str(tmp_path)])
    assert r.returncode == 0, r.stderr
    assert "sum 9.0" in r.stdout
    (job,) = jobs(tmp_path)
    log = (job / "host" / "collection.log").read_text()
    assert "TensorFlow's profiler could not start (AlreadyExistsError" in log
    assert list((tmp_path / "tb").glob("plugins/profile/*/*.xplane.pb"))  # the user's profiler unharmed


def test_functions_instantiated_before_the_window_give_shapes(tmp_path):
    """profiling_config.enable_profiling = True starts TensorFlow's graph collection, so a train
    function instantiated by a warm-up fit before as_default() still has its optimized graph."""
    r = run_py([str(PROGRAMS), "warm", str(tmp_path)])
    assert r.returncode == 0, r.stderr
    (job,) = jobs(tmp_path)
    export(job)
    ops = rows(job / "summary" / "op_summary_0.csv")
    assert len(ops) == tf_own_op_count(job)
    fused = [r for r in ops if "Fused" in r["OP Type"] and r["Op Name"].endswith("/Relu")]
    assert fused and {r["Input Shapes"] for r in fused} == {"16,8;8,16;16"}, fused[:1]
    assert rows(job / "summary" / "fusion_op_0.csv")
