"""Estimator train, evaluate and predict under seed 003's ProfilingConfig:
``python estimator_modes.py OUTPUT`` — train 3 steps, evaluate 2, predict a finite input to its
end, predict one batch of an endless input and stop early (the generator closed mid-way), then
train 2 more steps.  Prints one ``job`` line per window from collection order."""

from __future__ import annotations

import itertools
import json
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

import tensorflow as tf
from openmsprof.tensorflow.npu_bridge.estimator.npu.npu_config import NPURunConfig, ProfilingConfig
from openmsprof.tensorflow.npu_bridge.estimator.npu.npu_estimator import NPUEstimator

tf1 = tf.compat.v1


def model_fn(features, labels, mode):
    hidden = tf1.layers.dense(features["x"], 16, activation=tf.nn.relu)
    pred = tf1.layers.dense(hidden, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"y": pred})
    loss = tf1.losses.mean_squared_error(labels, pred)
    train_op = tf1.train.GradientDescentOptimizer(0.01).minimize(loss, tf1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn(repeat=True):
    rng = np.random.default_rng(0)
    data = ({"x": rng.random((32, 4), np.float32)}, rng.random((32, 1), np.float32))
    ds = tf.data.Dataset.from_tensor_slices(data)
    return (ds.repeat() if repeat else ds).batch(8)


options = json.dumps({"output": sys.argv[1], "training_trace": "on", "task_trace": "on"})
_MODEL_DIR = tempfile.TemporaryDirectory(prefix="omsp_est_")  # removed when the program ends
config = NPURunConfig(profiling_config=ProfilingConfig(enable_profiling=True, profiling_options=options),
                      model_dir=_MODEL_DIR.name, log_step_count_steps=None)
est = NPUEstimator(model_fn=model_fn, config=config)
est.train(input_fn, steps=3)
print("eval", est.evaluate(input_fn, steps=2)["loss"])
print("predicted", len(list(est.predict(lambda: input_fn(repeat=False)))))
gen = est.predict(input_fn)
print("first", len(list(itertools.islice(gen, 1))))
gen.close()
est.train(input_fn, steps=2)
print("done")
