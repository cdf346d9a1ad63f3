"""Seed 003's Estimator sample (TensorFlow ≤ 2.15 with tensorflow-estimator), unchanged but for the
import lines: a small linear model_fn on random data trained for a few steps.

    python examples/tf_estimator.py OUTPUT_DIR [STEPS]

On TensorFlow 2.16 and later the npu_config import says that tf.estimator is gone.
"""

import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

import tensorflow as tf
from openmsprof.tensorflow.npu_bridge.estimator.npu.npu_config import NPURunConfig, ProfilingConfig
from openmsprof.tensorflow.npu_bridge.estimator.npu.npu_estimator import NPUEstimator

output = sys.argv[1] if len(sys.argv) > 1 else "/tmp/profiling"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
tf1 = tf.compat.v1


def model_fn(features, labels, mode):
    hidden = tf1.layers.dense(features["x"], 32, activation=tf.nn.relu)
    pred = tf1.layers.dense(hidden, 1)
    loss = tf1.losses.mean_squared_error(labels, pred)
    train_op = tf1.train.GradientDescentOptimizer(0.01).minimize(loss, tf1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():
    rng = np.random.default_rng(0)
    data = ({"x": rng.random((64, 8), np.float32)}, rng.random((64, 1), np.float32))
    return tf.data.Dataset.from_tensor_slices(data).repeat().batch(16)


profiling_options = '{"output":"/tmp/profiling","training_trace":"on","task_trace":"on","fp_point":"","bp_point":"","aic_metrics":"PipeUtilization"}'
profiling_options = profiling_options.replace("/tmp/profiling", output)
profiling_config = ProfilingConfig(enable_profiling=True, profiling_options = profiling_options)
session_config=tf1.ConfigProto()
_MODEL_DIR = tempfile.TemporaryDirectory(prefix="omsp_est_")  # removed when the program ends
config = NPURunConfig(profiling_config=profiling_config, session_config=session_config,
                      model_dir=_MODEL_DIR.name, log_step_count_steps=None)
estimator = NPUEstimator(model_fn=model_fn, config=config)
estimator.train(input_fn, steps=steps)
print("done")
