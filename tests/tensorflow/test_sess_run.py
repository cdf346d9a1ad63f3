"""sess.run mode (npu_bridge.npu_init) on real TensorFlow: seed 003's sample, only imports changed."""

from __future__ import annotations

import sqlite3

import tensorflow as tf
from openmsprof.tensorflow._session_patch import take_npu_optimizer
from tests.tensorflow.helpers import EXAMPLES, export, jobs, rows, run_py, tf_own_op_count


def test_seed_sample_profiled_with_fp_point(tmp_path):
    r = run_py([str(EXAMPLES / "tf_sess_run.py"), str(tmp_path), "5", "dense/MatMul"])
    assert r.returncode == 0, r.stderr
    assert "NpuOptimizer" not in r.stderr and "not registered" not in r.stderr  # grappler never saw it
    (job,) = jobs(tmp_path)
    export(job)
    s = job / "summary"
    stat = rows(s / "op_statistic_0.csv")
    assert sum(int(r["Count"]) for r in stat) == tf_own_op_count(job) > 10
    names = {r["Op Name"] for r in rows(s / "op_summary_0.csv")}
    assert "dense/MatMul" in names and any(n.startswith("gradients/") for n in names)
    # shapes from the session's post-grappler partition graph (placeholder declared [32, 16])
    bias = {(r["Input Shapes"], r["Input Data Types"], r["Output Shapes"])
            for r in rows(s / "op_summary_0.csv") if r["Op Name"] == "dense/BiasAdd"}
    assert bias == {("32,64;64", "FLOAT;FLOAT", "32,64")}
    steps = rows(s / "step_trace_host.csv")
    # the five train runs: one iteration per sess.run (the initializer's run is not one)
    assert [r["Iteration ID"] for r in steps] == ["1", "2", "3", "4", "5"]
    assert {r["Device_id"] for r in steps} == {"host"}
    for r in steps:
        assert r["FP Start(us)"] and r["BP End(us)"] and r["FP to BP Time(us)"], r
        assert float(r["Iteration Refresh(us)"]) >= 0 and float(r["Data Aug Bound(us)"]) >= 0
    assert rows(s / "api_statistic_host.csv")[0]["API Name"] == "sess.run"
    with sqlite3.connect(job / "sqlite" / "msprof.db") as db:  # every op linked to its sess.run
        (linked,), = db.execute("SELECT COUNT(*) FROM TASK t JOIN CANN_API a ON a.connectionId ="
                                " t.connectionId JOIN STRING_IDS s ON s.id = a.name"
                                " WHERE s.value = 'sess.run'").fetchall()
    assert linked == len(rows(s / "op_summary_0.csv"))
    log = (job / "host" / "collection.log").read_text()
    streams = {r["Stream ID"] for r in rows(s / "op_summary_0.csv")}
    (line,) = [ln for ln in log.splitlines() if "TensorFlow threads by Stream ID" in ln]
    assert all(f"{sid} = " in line for sid in streams)


def test_fp_point_naming_no_op_leaves_columns_empty(tmp_path):
    r = run_py([str(EXAMPLES / "tf_sess_run.py"), str(tmp_path), "3", "no/such/op"])
    assert r.returncode == 0, r.stderr
    (job,) = jobs(tmp_path)
    assert "fp_point 'no/such/op' names no op" in (job / "host" / "collection.log").read_text()
    export(job)
    steps = rows(job / "summary" / "step_trace_host.csv")
    assert len(steps) == 3  # three train runs; the initializer's run is no iteration
    for r in steps:
        assert r["FP Start(us)"] == r["FP to BP Time(us)"] == r["Data Aug Bound(us)"] == ""
        assert r["Iteration End(us)"]
    assert all(r["BP End(us)"] for r in steps)  # bp_point "" still found automatically


def test_take_npu_optimizer_keeps_other_optimizers():
    cfg = tf.compat.v1.ConfigProto()
    other = cfg.graph_options.rewrite_options.custom_optimizers.add()
    other.name = "pruning"
    npu = cfg.graph_options.rewrite_options.custom_optimizers.add()
    npu.name = "NpuOptimizer"
    npu.parameter_map["profiling_mode"].b = True
    npu.parameter_map["profiling_options"].s = b'{"output":"/tmp/x"}'
    clean, params = take_npu_optimizer(cfg)
    assert [o.name for o in clean.graph_options.rewrite_options.custom_optimizers] == ["pruning"]
    assert len(cfg.graph_options.rewrite_options.custom_optimizers) == 2  # the caller's is untouched
    assert params is not None and params["profiling_mode"].b
    assert take_npu_optimizer(tf.compat.v1.ConfigProto())[1] is None


MALFORMED = r'''
import sys
import tensorflow.compat.v1 as tf
from openmsprof.tensorflow.npu_bridge.npu_init import *  # noqa: F403
tf.disable_eager_execution()
a = tf.placeholder(tf.float32, [4, 4])
out = tf.reduce_sum(tf.matmul(a, a))
config = tf.ConfigProto()
custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
custom_op.name = "NpuOptimizer"
custom_op.parameter_map["profiling_mode"].b = True
custom_op.parameter_map["profiling_options"].s = b'{"training_trace": 1}'
with tf.Session(config=config) as sess:
    for _ in range(3):
        v = sess.run(out, {a: [[1.0] * 4] * 4})
print("result", v)
'''


def test_malformed_parameter_map_options_warn_once_and_run(tmp_path):
    r = run_py(["-c", MALFORMED], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "result 64.0" in r.stdout
    (line,) = [ln for ln in r.stderr.splitlines() if "training_trace" in ln]
    assert "default options" in line and "1" in line
    (job,) = jobs(tmp_path)  # the defaults: output is the current directory
    export(job)
    assert len(rows(job / "summary" / "step_trace_host.csv")) == 3


_GRAPH_FAULTS = """
import runpy, sys
from openmsprof.tensorflow import tf_graph_collect
class Tick(Exception):
    pass
mode = sys.argv.pop(1)
def add(self, run_metadata, pre_graph):  # the train op's graphs fail to read, or meet a user's signal
    raise ValueError("unreadable partition graph") if mode == "value" else Tick()
tf_graph_collect.SessionGraphs.add = add
sys.argv = sys.argv[1:]  # (the example's own argv)
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except Tick:
    print("tick reached the caller")
"""


def test_partition_graph_faults_are_reported_and_a_users_exception_passes(tmp_path):
    """A partition graph that cannot be read is one warning (was dropped silently); an exception a
    user's signal handler raised meanwhile reaches the user's code (was swallowed)."""
    r = run_py(["-c", _GRAPH_FAULTS, "value", str(EXAMPLES / "tf_sess_run.py"), str(tmp_path / "a"), "3"])
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("partition graphs could not be read (ValueError: unreadable partition graph)") == 1
    assert "done" in r.stdout
    (job,) = jobs(tmp_path / "a")  # and in the job's collection.log, counted
    assert "partition graphs could not be read (ValueError: unreadable partition graph); their ops' shapes are " \
           "missing (1 so far)" in (job / "host" / "collection.log").read_text()
    r = run_py(["-c", _GRAPH_FAULTS, "tick", str(EXAMPLES / "tf_sess_run.py"), str(tmp_path / "b"), "3"])
    assert r.returncode == 0, r.stderr
    assert "tick reached the caller" in r.stdout and "done" not in r.stdout


_CLOSE_UNDER_TICKS = """
import os, signal, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow.compat.v1 as tf
from openmsprof.tensorflow.npu_bridge.npu_init import *  # noqa: F403
class Tick(Exception):
    pass
armed = [False]
def on_alarm(signum, frame):
    if armed[0]:
        armed[0] = False
        raise Tick()
tf.disable_eager_execution()
x = tf.placeholder(tf.float32, [32, 16], name="x")
w = tf.get_variable("w", [16, 1])
loss = tf.reduce_mean(tf.square(tf.matmul(x, w)), name="loss")
train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
config = tf.ConfigProto()
custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
custom_op.name = "NpuOptimizer"
custom_op.parameter_map["profiling_mode"].b = True
custom_op.parameter_map["profiling_options"].s = tf.compat.as_bytes(
    '{"output":"%s","training_trace":"on","task_trace":"on"}' % sys.argv[1])
sess = tf.Session(config=config)
sess.run(tf.global_variables_initializer())
feeds = {x: np.random.default_rng(0).random((32, 16), np.float32)}
for _ in range(5):
    sess.run(train_op, feeds)
signal.signal(signal.SIGALRM, on_alarm)
signal.setitimer(signal.ITIMER_REAL, 0.0002, 0.0002)  # the window ends with a timer raising every 0.2 ms
ticks = 0
while True:
    try:
        armed[0] = True
        sess.close()
        armed[0] = False
        break
    except Tick:
        ticks += 1
signal.setitimer(signal.ITIMER_REAL, 0)
signal.signal(signal.SIGALRM, signal.SIG_IGN)
print("done ticks", ticks)
"""


def test_a_raising_timer_while_the_session_closes_leaves_the_job_whole(tmp_path):
    """The window's end (TensorFlow's trace read, the job stopped) holds a raising signal handler:
    the job has its end_info and every iteration (a tick in the middle left the job unended)."""
    r = run_py(["-c", _CLOSE_UNDER_TICKS, str(tmp_path)])
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split("done ticks")[1]) >= 1
    (job,) = jobs(tmp_path)
    export(job)
    assert [x["Iteration ID"] for x in rows(job / "summary" / "step_trace_host.csv")] == ["1", "2", "3", "4", "5"]
    assert "no end_info" not in (job / "host" / "collection.log").read_text()
    assert len(rows(job / "summary" / "op_summary_0.csv")) >= 5  # TensorFlow's trace was read: its ops are there
