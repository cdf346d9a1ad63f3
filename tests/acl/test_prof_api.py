"""acl.prof API path: API spans, per-operator tasks vs ONNX Runtime's own profile, flow links."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnxruntime as ort
import orjson
import pytest

from openmsprof import acl
from openmsprof.sources.ort_trash import KEEP_ENV
from tests.acl.helpers import jobs_under, read_job

ALL = (acl.ACL_PROF_ACL_API | acl.ACL_PROF_TASK_TIME | acl.ACL_PROF_AICPU_TRACE
       | acl.ACL_PROF_AICORE_METRICS | acl.ACL_PROF_L2CACHE | acl.ACL_PROF_HCCL)


def _profile(out: Path, model: Path, loaded, n: int, mask: int = ALL) -> tuple[np.ndarray, np.ndarray]:
    assert acl.init() == 0
    m = loaded(model)
    x = np.random.default_rng(0).random(m.in_shape, dtype=np.float32)
    m.feed(x)
    assert acl.prof.init(str(out)) == 0
    cfg = acl.prof.create_config([0], acl.ACL_AICORE_NONE, 0, mask)
    assert cfg != 0, acl.get_recent_err_msg()
    assert acl.prof.start(cfg) == 0
    for _ in range(n):
        assert m.execute() == 0
    y = m.result()
    assert acl.prof.stop(cfg) == 0
    assert acl.prof.destroy_config(cfg) == 0
    assert acl.prof.finalize() == 0
    assert acl.mdl.unload(m.model_id) == 0
    assert acl.finalize() == 0
    return x, y


def test_outputs_match_onnxruntime(models, loaded, out_dir):
    x, y = _profile(out_dir, models["resnet_mish"], loaded, 2)
    ref = ort.InferenceSession(str(models["resnet_mish"])).run(None, {"input": x})[0]
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


def test_api_spans_counts_and_levels(models, loaded, out_dir):
    _profile(out_dir, models["tiny_mlp"], loaded, 7)
    (job,) = jobs_under(out_dir)
    j = read_job(job)
    names = Counter(j.api_names())
    assert names["aclmdlExecute"] == 7
    assert names["aclprofStart"] == 1
    assert names["aclprofStop"] == 1
    levels = {a[0]: a[1] for a in j.apis}
    assert levels["aclmdlExecute"] == int(acl.prof.emit.ApiLevel.MODEL)
    assert levels["aclprofStop"] == int(acl.prof.emit.ApiLevel.ACL)
    assert all(a[2] <= a[3] for a in j.apis)


def test_tasks_match_ort_profile_and_link_to_executes(models, loaded, out_dir, tmp_path, monkeypatch):
    keep = tmp_path / "ortprof"
    keep.mkdir()
    monkeypatch.setenv(KEEP_ENV, str(keep))
    n = 5
    _profile(out_dir, models["resnet_leakyrelu"], loaded, n)
    j = read_job(jobs_under(out_dir)[0])
    # ONNX Runtime's own profile files of the same runs
    ort_nodes = []
    runs = 0
    for f in keep.glob("*.json"):
        for ev in orjson.loads(f.read_bytes()):
            if ev.get("cat") == "Node" and ev["name"].endswith("_kernel_time"):
                ort_nodes.append(ev)
            runs += ev.get("name") == "model_run"
    assert runs == n
    assert len(j.tasks) == len(ort_nodes) > 0
    ours = Counter()
    theirs = Counter()
    for t in j.tasks:
        ours[t.op_type] += t.t1 - t.t0
    for ev in ort_nodes:
        theirs[ev["args"]["op_name"]] += ev["dur"] * 1000
    assert set(ours) == set(theirs)
    for op_type, total in theirs.items():
        assert abs(ours[op_type] - total) <= 0.05 * total + 1000, op_type
    # every task links to the execute span that launched it and lies inside it (clock alignment)
    execs = {a[4]: a for a in j.apis if a[0] == "aclmdlExecute"}
    assert len(execs) == n and 0 not in execs
    per_exec = Counter(t.conn for t in j.tasks)
    assert set(per_exec) == set(execs)
    assert len(set(per_exec.values())) == 1  # same op count per execute
    slack = 300_000  # ns: ORT's clock is µs epoch, ours monotonic
    for t in j.tasks:
        _, _, t0, t1, _ = execs[t.conn]
        assert t0 - slack <= t.t0 and t.t1 <= t1 + slack
    assert len({t.task_id for t in j.tasks}) == len(j.tasks)
    conv = [t for t in j.tasks if t.op_type == "Conv"]
    assert conv and conv[0].in_shapes.startswith("1,3,32,32") and conv[0].in_dtypes.startswith("FLOAT")


def test_profiling_off_is_plain_session(models, loaded, out_dir):
    """Without profiling no ORT profiling session exists and no job is written."""
    assert acl.init() == 0
    m = loaded(models["tiny_mlp"])
    m.feed(np.ones(m.in_shape, np.float32))
    assert m.execute() == 0
    model = acl.mdl.models()[m.model_id]
    assert model.runner is None and model.mode == 0
    assert not model.plain.get_session_options().enable_profiling
    assert jobs_under(out_dir) == []


def test_api_only_config_records_no_tasks(models, loaded, out_dir):
    _profile(out_dir, models["tiny_mlp"], loaded, 3, mask=acl.ACL_PROF_ACL_API)
    j = read_job(jobs_under(out_dir)[0])
    assert Counter(j.api_names())["aclmdlExecute"] == 3
    assert j.tasks == []


def test_unoptimised_level_keeps_onnx_node_names(models, loaded, out_dir):
    assert acl.mdl.set_graph_optimization_level("disable") == 0
    try:
        _profile(out_dir, models["resnet_leakyrelu"], loaded, 1)
    finally:
        acl.mdl.set_graph_optimization_level("all")
    j = read_job(jobs_under(out_dir)[0])
    assert "LeakyRelu" in {t.op_type for t in j.tasks}
    log = (jobs_under(out_dir)[0] / "host" / "collection.log").read_text()
    assert "graph optimisation level 'disable'" in log


@pytest.mark.parametrize("mask", [ALL])
def test_stamps_and_steps(models, loaded, out_dir, mask):
    assert acl.init() == 0
    m = loaded(models["tiny_mlp"])
    assert acl.prof.init(str(out_dir)) == 0
    cfg = acl.prof.create_config([0], acl.ACL_AICORE_NONE, 0, mask | acl.ACL_PROF_MSPROFTX)
    assert acl.prof.start(cfg) == 0
    stamp = acl.prof.create_stamp()
    assert acl.prof.set_stamp_trace_message(stamp, "infer", 5) == 0
    for _ in range(3):
        info = acl.prof.create_step_info()
        assert acl.prof.get_step_timestamp(info, acl.ACL_STEP_START, 0) == 0
        assert acl.prof.push(stamp) == 0
        assert m.execute() == 0
        assert acl.prof.pop() == 0
        assert acl.prof.get_step_timestamp(info, acl.ACL_STEP_END, 0) == 0
        assert acl.prof.get_step_timestamp(info, acl.ACL_STEP_END, 0) == acl.ACL_ERROR_INVALID_PARAM
        acl.prof.Destroy_Step_Info(info)
    assert acl.prof.mark(stamp) == 0
    rid, ret = acl.prof.range_start(stamp)
    assert ret == 0 and rid > 0
    assert acl.prof.range_stop(rid) == 0
    acl.prof.destroy_stamp(stamp)
    assert acl.prof.stop(cfg) == 0
    assert acl.prof.finalize() == 0
    j = read_job(jobs_under(out_dir)[0])
    assert sorted((idx, tag) for _, idx, tag in j.steps) == [(i, t) for i in sorted({s[1] for s in j.steps}) for t in (0, 1)]
    assert len(j.steps) == 6
    assert Counter(k for k, _ in j.marks) == {2: 3, 1: 1, 4: 1}
    assert all(msg == "infer" for _, msg in j.marks)


def test_task_ids_stay_unique_across_harvests(models, loaded, out_dir):
    """Three harvests of one model (two in the run, one at stop) number their tasks from one
    process-wide counter: no task id repeats across them, and every execute keeps its two tasks."""
    assert acl.init() == 0
    m = loaded(models["tiny_mlp"])
    m.feed(np.ones(m.in_shape, np.float32))
    assert acl.prof.init(str(out_dir)) == 0
    cfg = acl.prof.create_config([0], acl.ACL_AICORE_NONE, 0, acl.ACL_PROF_ACL_API | acl.ACL_PROF_TASK_TIME)
    assert acl.prof.start(cfg) == 0
    model = acl.mdl.models()[m.model_id]
    runner = model.runner
    for _ in range(2):
        for _ in range(6):
            assert m.execute() == 0
        model.harvest(keep_running=True)
    for _ in range(6):
        assert m.execute() == 0
    assert acl.prof.stop(cfg) == 0
    assert runner.harvests >= 3
    assert acl.prof.destroy_config(cfg) == 0
    assert acl.prof.finalize() == 0
    assert acl.mdl.unload(m.model_id) == 0
    assert acl.finalize() == 0
    j = read_job(jobs_under(out_dir)[0])
    assert len(j.tasks) == 18 * 2  # tiny_mlp optimised: two kernels an execute
    assert len({t.task_id for t in j.tasks}) == len(j.tasks)
    assert Counter(Counter(t.conn for t in j.tasks).values()) == {2: 18}
