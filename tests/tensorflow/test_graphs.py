"""openmsprof.tensorflow.tf_graphs on real TensorFlow graphs: a session's post-grappler partition
graph gives op shapes and the ops grappler fused."""

from __future__ import annotations

import numpy as np

import tensorflow as tf
from openmsprof.tensorflow.tf_graph_collect import SessionGraphs
from openmsprof.tensorflow.tf_graphs import analyse

tf1 = tf.compat.v1


def _session_graphs(batch: int | None, feed: int) -> SessionGraphs:
    """One train-free dense layer (MatMul + BiasAdd + Relu) run once through SessionGraphs."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [batch, 16], name="x")
        w = tf1.Variable(tf.ones((16, 8)), name="w")
        b = tf1.Variable(tf.zeros((8,)), name="b")
        y = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w), b), name="act")
        out = tf.reduce_sum(y, name="total")
        graphs = SessionGraphs()
        with tf1.Session(graph=g) as sess:
            sess.run(tf1.global_variables_initializer())
            opts = tf1.RunOptions(output_partition_graphs=True)
            meta = tf1.RunMetadata()
            assert graphs.want(out, {x: None}) and not graphs.want(out, {x: None})
            sess.run(out, {x: np.ones((feed, 16), np.float32)}, options=opts, run_metadata=meta)
            graphs.add(meta, sess.graph_def)
    return graphs


def test_shapes_and_fusion_of_a_session_graph():
    info = analyse(_session_graphs(4, 4).graphs)
    act = [k for k in info.shapes if k[0] == "act"]
    assert act, info.shapes.keys()
    fused_type = act[0][1]
    assert "Fused" in fused_type  # grappler's remapper made one kernel of MatMul+BiasAdd+Relu
    assert info.shapes[act[0]] == ("4,16;16,8;8", "FLOAT;FLOAT;FLOAT", "4,8", "FLOAT")
    (f,) = [f for f in info.fusions if f.name == "act"]
    assert f.original == ["MatMul", "BiasAdd", "act"] and f.model == "sess.run"
    assert (f.input_bytes, f.output_bytes, f.weight_bytes) == (4 * 16 * 4, 4 * 8 * 4, (16 * 8 + 8) * 4)
    assert info.shapes[("total", "Sum")][0] == "4,8;2"  # the reduction axes: a [2] constant


def test_two_graphs_disagreeing_on_a_dim_merge_to_unknown():
    a, b = _session_graphs(4, 4), _session_graphs(6, 6)
    info = analyse(a.graphs + b.graphs)
    act = next(k for k in info.shapes if k[0] == "act")
    assert info.shapes[act][0] == "-1,16;16,8;8" and info.shapes[act][2] == "-1,8"
    (f,) = [f for f in info.fusions if f.name == "act"]  # one row per (model, fused node)
    assert f.input_bytes == 4 * 16 * 4  # the first graph's, whose shapes were known


def test_unknown_batch_leaves_memory_unknown():
    info = analyse(_session_graphs(None, 3).graphs)
    (f,) = [f for f in info.fusions if f.name == "act"]
    assert f.input_bytes is None and f.output_bytes is None and f.weight_bytes == (16 * 8 + 8) * 4
    act = next(k for k in info.shapes if k[0] == "act")
    assert info.shapes[act][0] == "-1,16;16,8;8"
