"""Seed 003's sess.run sample (TensorFlow 1.x style), unchanged but for the import lines.

    python examples/tf_sess_run.py OUTPUT_DIR [STEPS]

A small two-layer regression graph built in code, random data; every ``sess.run`` of the train
op is one iteration.  Then: ``openmsprof export summary -dir OUTPUT_DIR/PROF_*``.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow.compat.v1 as tf

from openmsprof.tensorflow.npu_bridge.npu_init import *  # noqa: F403 - the seed's import line
from openmsprof.tensorflow.npu_bridge.npu_init import RewriterConfig

tf.disable_eager_execution()
output = sys.argv[1] if len(sys.argv) > 1 else "/tmp/profiling"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
fp_point = sys.argv[3] if len(sys.argv) > 3 else ""

x = tf.placeholder(tf.float32, [32, 16], name="x")
y = tf.placeholder(tf.float32, [32, 1], name="y")


def dense(inputs, units, name):
    with tf.variable_scope(name):
        w = tf.get_variable("kernel", [inputs.shape[-1], units])
        b = tf.get_variable("bias", [units], initializer=tf.zeros_initializer())
        return tf.nn.bias_add(tf.matmul(inputs, w), b)


hidden = tf.nn.relu(dense(x, 64, "dense"))
pred = dense(hidden, 1, "head")
loss = tf.reduce_mean(tf.square(pred - y), name="loss")
train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss)

config = tf.ConfigProto()
# --- seed 003, sess.run mode ---
custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
custom_op.name = "NpuOptimizer"
custom_op.parameter_map["use_off_line"].b = True
custom_op.parameter_map["profiling_mode"].b = True
custom_op.parameter_map["profiling_options"].s = tf.compat.as_bytes('{"output":"/tmp/profiling","training_trace":"on","task_trace":"on","fp_point":"","bp_point":"","aic_metrics":"PipeUtilization"}'.replace("/tmp/profiling", output).replace('"fp_point":""', f'"fp_point":"{fp_point}"'))
config.graph_options.rewrite_options.remapping = RewriterConfig.OFF  # Disable remapping.
rng = np.random.default_rng(0)
feeds = {x: rng.random((32, 16), np.float32), y: rng.random((32, 1), np.float32)}
with tf.Session(config=config) as sess:
    sess.run(tf.global_variables_initializer())
    for _ in range(steps):
        sess.run(train_op, feeds)
print("done")
