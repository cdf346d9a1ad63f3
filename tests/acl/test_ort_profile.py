"""The fast ONNX Runtime profile parser against a full orjson parse of real ORT profiles, its
fallbacks (other layouts, escaped names, dynamic shapes), and the column-wise record paths."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import orjson
import pytest
from onnx import TensorProto, helper

from openmsprof.recorder import session
from openmsprof.sources import emit, ort_profile, ort_task_records, subscription
from openmsprof.sources.ort_columns import Profile
from openmsprof.sources.ort_profile import NodeTable
from tests.acl.helpers import read_job


def _profile(model: Path | str, tmp: Path, feeds_list: list[dict[str, np.ndarray]]) -> tuple[bytes, int]:
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp / "p")
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    for feeds in feeds_list:
        sess.run(None, feeds)
    start = sess.get_profiling_start_time_ns()
    path = sess.end_profiling()
    data = Path(path).read_bytes()
    os.unlink(path)
    return data, start


def _rows(p: Profile, table: NodeTable) -> list[tuple]:
    m = table.metas
    return sorted((int(ts), int(d), int(t), m[k].name, m[k].op_type, m[k].in_shapes, m[k].in_dtypes,
                   m[k].out_shapes, m[k].out_dtypes, m[k].executor, int(r))
                  for ts, d, t, k, r in zip(p.node_ts, p.node_dur, p.node_tid, p.node_meta, p.node_run, strict=True))


def _runs(p: Profile) -> list[tuple[int, int, int]]:
    return [(int(a), int(b), int(c)) for a, b, c in zip(p.run_ts, p.run_dur, p.run_tid, strict=True)]


def _expected(data: bytes, start: int) -> tuple[list[tuple[int, int, int]], int]:
    events = orjson.loads(data)
    runs = sorted((start + e["ts"] * 1000, e["dur"] * 1000, e["tid"]) for e in events if e["name"] == "model_run")
    kernels = sum(e["cat"] == "Node" and e["name"].endswith("_kernel_time") for e in events)
    return runs, kernels


@pytest.fixture(params=["native", "regex"])
def scan(request, monkeypatch) -> str:
    """Each test below runs on the native scan (``_ort_scan.c``) and on the regex pass."""
    if request.param == "native":
        if ort_profile._native is None:
            pytest.skip("the native scan is not built here (no C compiler at install)")
        monkeypatch.delenv(ort_profile.PY_SCAN_ENV, raising=False)
    else:
        monkeypatch.setenv(ort_profile.PY_SCAN_ENV, "1")
    return str(request.param)


@pytest.mark.parametrize("name", ["resnet_leakyrelu", "tiny_mlp"])
def test_fast_parse_equals_full_json_parse(models, tmp_path, name, scan):
    x = np.random.default_rng(0).random((1, 3, 32, 32) if name != "tiny_mlp" else (1, 16), dtype=np.float32)
    data, start = _profile(models[name], tmp_path, [{"input": x}] * 3)
    runs, kernels = _expected(data, start)
    fast_table, slow_table, pause_table = NodeTable(), NodeTable(), NodeTable()
    fast = fast_table.parse(data, start)
    slow = slow_table.parse_slow(data, start)
    paused = []
    chunked = pause_table.parse(data, start, lambda: paused.append(1))
    assert _runs(fast) == _runs(slow) == _runs(chunked) == runs and len(runs) == 3
    assert len(fast.node_ts) == kernels > 0
    assert _rows(fast, fast_table) == _rows(slow, slow_table) == _rows(chunked, pause_table)
    assert bool(paused) == (scan == "regex")  # the regex pass yields between chunks; the native scan releases the GIL
    assert set(fast.node_run.tolist()) == {0, 1, 2}  # every node inside its own run
    per_run = np.bincount(fast.node_run)
    assert len(set(per_run.tolist())) == 1
    if name == "resnet_leakyrelu":
        conv = next(m for m in fast_table.metas if m.op_type == "Conv")
        assert conv.in_shapes.startswith("1,3,32,32;") and conv.in_dtypes.startswith("FLOAT;")


def test_other_json_layout_falls_back_to_full_parse(models, tmp_path, scan):
    x = np.ones((1, 16), np.float32)
    data, start = _profile(models["tiny_mlp"], tmp_path, [{"input": x}] * 2)
    compact = orjson.dumps(orjson.loads(data))  # same events, no spaces: the fast regex sees nothing
    t1, t2 = NodeTable(), NodeTable()
    a, b = t1.parse(compact, start), t2.parse(data, start)
    assert _rows(a, t1) == _rows(b, t2) and len(a.node_ts) == 4
    empty = NodeTable().parse(b"[\n]\n", start)
    assert empty.runs == 0 and len(empty.node_ts) == 0


def _escaped_model(path: Path) -> Path:
    odd = 'relu "odd" \\name'
    g = helper.make_graph([helper.make_node("Relu", ["input"], ["mid"], name=odd),
                           helper.make_node("Neg", ["mid"], ["output"], name="neg")], "g",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=9), str(path))
    return path


def test_node_names_with_quotes_and_backslashes(tmp_path, scan):
    model = _escaped_model(tmp_path / "odd.onnx")
    data, start = _profile(model, tmp_path, [{"input": np.ones((1, 4), np.float32)}] * 2)
    t = NodeTable()
    p = t.parse(data, start)
    assert sorted({t.metas[k].name for k in p.node_meta}) == ['neg', 'relu "odd" \\name']
    assert {t.metas[k].op_type for k in p.node_meta} == {"Relu", "Neg"}
    assert len(p.node_ts) == 4 and p.runs == 2


def _dynamic_model(path: Path) -> Path:
    g = helper.make_graph([helper.make_node("Relu", ["input"], ["output"], name="relu")], "g",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 4])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 4])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=9), str(path))
    return path


def test_dynamic_shapes_keep_each_events_shapes(tmp_path):
    model = _dynamic_model(tmp_path / "dyn.onnx")
    feeds = [{"input": np.ones((b, 4), np.float32)} for b in (1, 3, 1)]
    data, start = _profile(model, tmp_path, feeds)
    t = NodeTable(dynamic=True)
    p = t.parse(data, start)
    order = np.argsort(p.node_ts)
    assert [t.metas[k].in_shapes for k in p.node_meta[order]] == ["1,4", "3,4", "1,4"]
    assert len(t.metas) == 2  # one meta per (node, shapes)
    static = NodeTable()  # a static table would report the first shapes only: the reason for the flag
    assert {static.metas[k].in_shapes for k in static.parse(data, start).node_meta} == {"1,4"}


def test_task_batch_records_read_back(out_dir, models, tmp_path):
    """emit_tasks → flusher column-wise encoding → raw files: names, shapes, links, ids."""
    x = np.random.default_rng(1).random((1, 3, 32, 32), dtype=np.float32)
    data, start = _profile(models["resnet_leakyrelu"], tmp_path, [{"input": x}] * 2)
    t = NodeTable()
    p = t.parse(data, start)
    from openmsprof.config.model import ProfileConfig

    s = session.start(ProfileConfig(task_time="l1"), output=out_dir)
    launches = [(int(p.run_ts[i] - s.start_pair.offset_ns), 0, 700 + i) for i in range(p.runs)]
    n = ort_task_records.emit_tasks(p, launches, t.metas, 7, 0)
    session.stop()
    assert n == len(p.node_ts) > 0
    job = read_job(s.root)
    assert len(job.tasks) == n
    assert {task.conn for task in job.tasks} == {700, 701}
    assert len({task.task_id for task in job.tasks}) == n
    assert all(task.model_id == 7 for task in job.tasks)
    first = min(p.node_ts) - s.start_pair.offset_ns
    assert job.tasks[0].t0 == first
    by_name = {t.metas[k].name: t.metas[k] for k in p.node_meta}
    for task in job.tasks:
        meta = by_name[task.name]
        assert (task.op_type, task.in_shapes, task.in_dtypes) == (meta.op_type, meta.in_shapes, meta.in_dtypes)
    assert not emit.task_on() and ort_task_records.emit_tasks(p, launches, t.metas, 7, 0) == 0  # no session: nothing


def test_subscription_column_encoding_matches_struct_encoding():
    ops = [("conv_1", "Conv", 0, 100, 150), ("relu_2", "Relu", 1, 150, 149), ("fc_3", "Gemm", 0, 160, 400)]
    ref = subscription.encode(9, 2, ops)
    idx = np.array([subscription.OP_TABLE.intern(n, t) for n, t, *_ in ops], np.int64)
    cols = subscription.encode_columns(9, 2, idx, np.array([o[2] for o in ops]), np.array([o[3] for o in ops]),
                                       np.array([o[4] for o in ops]))
    assert cols == ref and len(cols) == 3 * subscription.OP_DESC_SIZE
    assert subscription.decode(cols[80:160])[5] == 0  # negative duration clamps to 0


def test_an_event_in_another_layout_switches_to_full_parses(models, tmp_path, scan):
    x = np.ones((1, 16), np.float32)
    data, start = _profile(models["tiny_mlp"], tmp_path, [{"input": x}] * 3)
    i = data.index(b'"cat" : "Node"')
    j = data.index(b'"ph" : "X"', i)
    odd = data[:j] + b'"ph":"X"' + data[j + len(b'"ph" : "X"'):]  # one event the regex cannot read
    t = NodeTable()
    p = t.parse(odd, start)
    assert t.slow and len(p.node_ts) == 6 and p.runs == 3  # none lost
    again = t.parse(data, start)
    assert len(again.node_ts) == 6
    ok = NodeTable()
    ok.parse(data, start)
    assert not ok.slow
