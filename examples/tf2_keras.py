"""Seed 003's TensorFlow 2.x sample, unchanged but for the import line: Keras ``fit`` of a small
model built in code on random data, plus an eager op and a custom ``tf.function`` step.

    python examples/tf2_keras.py OUTPUT_DIR [EPOCHS]

Then: ``openmsprof export summary -dir OUTPUT_DIR/PROF_*`` (and ``export timeline``).
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

import tensorflow as tf
from openmsprof.tensorflow import npu_device

output = sys.argv[1] if len(sys.argv) > 1 else "/home/profiling"
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 1
# profiling
npu_device.global_options().profiling_config.enable_profiling = True
profiling_options = '{"output":"/home/profiling", \
                    "training_trace":"on", \
                    "task_trace":"on", \
                    "fp_point":"", \
                    "bp_point":""}'.replace("/home/profiling", output)
npu_device.global_options().profiling_config.profiling_options = profiling_options
npu_device.open().as_default()

rng = np.random.default_rng(0)
x = rng.random((128, 16), np.float32)
y = rng.random((128, 1), np.float32)
model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(64, activation="relu"),
                             tf.keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
model.fit(x, y, batch_size=32, epochs=epochs, verbose=0)
print("done", float(tf.reduce_sum(tf.constant(x[:2]) * 2.0)))
