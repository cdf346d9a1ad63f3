"""Estimator mode on TensorFlow 2.15 + tensorflow-estimator 2.15 (the ``.venv-tf215`` the Makefile
builds): seed 003's NPURunConfig/ProfilingConfig sample, driven in that venv's Python."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.tensorflow.helpers import (
    EXAMPLES,
    TF215_PYTHON,
    export,
    jobs,
    rows,
    run_py,
    tf_own_op_count,
)

pytestmark = pytest.mark.skipif(
    not TF215_PYTHON.exists(),
    reason="the TensorFlow 2.15 venv is missing: `make .venv-tf215/.installed` builds it (make test does)")


def test_estimator_sample_gives_a_job(tmp_path):
    r = run_py([str(EXAMPLES / "tf_estimator.py"), str(tmp_path), "6"], python=TF215_PYTHON,
               timeout=240)
    assert r.returncode == 0, r.stderr
    (job,) = jobs(tmp_path)
    log = (job / "host" / "collection.log").read_text()
    assert "enabled by NPUEstimator (train)" in log
    export(job)  # the job is framework neutral: exported by this (TF 2.21) venv's openmsprof
    s = job / "summary"
    steps = rows(s / "step_trace_host.csv")
    assert len(steps) == 6  # one per training step
    assert all(r["FP Start(us)"] and r["BP End(us)"] for r in steps)
    ops = rows(s / "op_summary_0.csv")
    assert any(r["Op Name"].startswith("gradients/") for r in ops)
    assert rows(s / "api_statistic_host.csv")[0]["API Name"] == "sess.run"


def test_estimator_env_route(tmp_path):
    r = run_py([str(Path(__file__).with_name("estimator_env.py")), "3", "2"], python=TF215_PYTHON,
               timeout=240, env={"PROFILING_MODE": "true",
                                 "PROFILING_OPTIONS": orjson.dumps({"output": str(tmp_path)}).decode()})
    assert r.returncode == 0, r.stderr
    assert "already enabled" not in r.stderr
    train, evaluate = jobs(tmp_path)  # one window per Estimator session: train, then evaluate
    export(train)
    assert len(rows(train / "summary" / "step_trace_host.csv")) == 3
    export(evaluate)
    steps = rows(evaluate / "summary" / "step_trace_host.csv")
    assert len(steps) >= 2  # each sess.run of the evaluation (initializers, steps, final metrics)
    assert not any(r["Op Name"].startswith("gradients/")
                   for r in rows(evaluate / "summary" / "op_summary_0.csv"))


def test_tf2_mode_on_tf215(tmp_path):
    """npu_device with tf-keras 2.15 (step function ``train_function``) in the same venv."""
    r = run_py([str(Path(__file__).with_name("programs.py")), "keras", str(tmp_path)],
               python=TF215_PYTHON, timeout=240)
    assert r.returncode == 0, r.stderr
    (job,) = jobs(tmp_path)
    export(job)
    steps = rows(job / "summary" / "step_trace_host.csv")
    assert len(steps) == 5  # 4 fit steps + 1 evaluate step
    assert all(r["BP End(us)"] for r in steps[:4])


def test_estimator_train_evaluate_predict(tmp_path):
    """Each Estimator call under ProfilingConfig is one job covering its ops, predict included,
    also a predict generator closed early (its session ends without the hooks' end)."""
    r = run_py([str(Path(__file__).with_name("estimator_modes.py")), str(tmp_path)],
               python=TF215_PYTHON, timeout=240)
    assert r.returncode == 0, r.stderr
    assert "already enabled" not in r.stderr
    found = jobs(tmp_path)
    modes = [next(line.split("enabled by ")[1] for line in (j / "host" / "collection.log").read_text().splitlines()
                  if "enabled by" in line) for j in found]
    assert modes == ["NPUEstimator (train)", "NPUEstimator (eval)", "NPUEstimator (infer)",
                     "NPUEstimator (infer)", "NPUEstimator (train)"]
    train, evaluate, predict, early, train2 = found
    steps = {}
    for job in found:
        export(job)
        ops = rows(job / "summary" / "op_summary_0.csv")
        assert len(ops) == tf_own_op_count(job) > 0  # the job covers what TF traced in the call
        steps[job] = len(rows(job / "summary" / "step_trace_host.csv"))
        grads = any(r["Op Name"].startswith("gradients/") for r in ops)
        assert grads == (job in (train, train2)), job
        # shapes from the optimized graph: the dense layer's fused kernel reads [batch, 4] x [4, 16]
        dense = [r for r in ops if r["Op Name"] == "dense/Relu"]
        assert dense and {r["Input Shapes"] for r in dense} == {"-1,4;4,16;16"}, dense[:1]
        assert {r["Output Shapes"] for r in dense} == {"-1,16"}
    assert [steps[j] for j in (train, evaluate, early, train2)] == [3, 2, 1, 2]
    assert steps[predict] >= 4  # 4 batches (+ the run that meets the end of the input)
    # grappler fused dense/MatMul + BiasAdd + Relu: fusion_op says so, from the optimized graph
    fusion = {r["Fusion Op"]: r for r in rows(train / "summary" / "fusion_op_0.csv")}
    relu = next(r for k, r in fusion.items() if k.startswith("dense/Relu("))
    assert relu["Original Ops"] == "dense/MatMul,dense/BiasAdd,dense/Relu"
    assert relu["Memory Workspace(KB)"] == "N/A"
    assert float(relu["Memory Weight(KB)"]) == pytest.approx((4 * 16 + 16) * 4 / 1024, abs=1e-3)
