"""Estimator mode enabled only by PROFILING_MODE/PROFILING_OPTIONS:
``python estimator_env.py STEPS [EVAL_STEPS]`` (train, then evaluate when EVAL_STEPS is given)."""

from __future__ import annotations

import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

import tensorflow as tf
from openmsprof.tensorflow.npu_bridge.estimator.npu.npu_config import NPURunConfig
from openmsprof.tensorflow.npu_bridge.estimator.npu.npu_estimator import NPUEstimator

tf1 = tf.compat.v1


def model_fn(features, labels, mode):
    pred = tf1.layers.dense(features["x"], 1)
    loss = tf1.losses.mean_squared_error(labels, pred)
    train_op = tf1.train.GradientDescentOptimizer(0.01).minimize(loss, tf1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():
    rng = np.random.default_rng(0)
    data = ({"x": rng.random((32, 4), np.float32)}, rng.random((32, 1), np.float32))
    return tf.data.Dataset.from_tensor_slices(data).repeat().batch(8)


_MODEL_DIR = tempfile.TemporaryDirectory(prefix="omsp_est_")  # removed when the program ends
config = NPURunConfig(model_dir=_MODEL_DIR.name, log_step_count_steps=None)
est = NPUEstimator(model_fn=model_fn, config=config)
est.train(input_fn, steps=int(sys.argv[1]))
if len(sys.argv) > 2:
    print("eval", est.evaluate(input_fn, steps=int(sys.argv[2])))
print("done")
