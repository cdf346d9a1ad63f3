"""Small TensorFlow programs the tests run in a subprocess: ``python programs.py MODE OUT [ARG]``.

Modes: ``keras`` (TF2 mode, Keras fit of 4 steps + a custom tf.function step, stopped with
``npu_device.close()``), ``keras-noclose`` (the same without close: stopped at exit),
``twice`` (as_default() twice), ``env`` (PROFILING_MODE from the environment, no options in code),
``sleep`` (profiling on, then a step loop that never ends: for SIGKILL; prints "stepping"),
``warm`` (profiling switched on, a warm-up fit, then ``as_default()``, the same fit and close).
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import orjson

import tensorflow as tf
from openmsprof.tensorflow import npu_device


def model() -> tf.keras.Model:
    m = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(16, activation="relu"),
                             tf.keras.layers.Dense(1)])
    m.compile(optimizer="sgd", loss="mse")
    return m


def main() -> None:
    mode, out = sys.argv[1], sys.argv[2]
    arg = sys.argv[3] if len(sys.argv) > 3 else ""
    pc = npu_device.global_options().profiling_config
    if mode != "env":
        pc.enable_profiling = True
        pc.profiling_options = arg or orjson.dumps({"output": out, "training_trace": "on",
                                                     "task_trace": "on", "fp_point": "",
                                                     "bp_point": ""}).decode()
    if mode == "warm":
        m = model()
        x, y = np.ones((64, 8), np.float32), np.ones((64, 1), np.float32)
        m.fit(x, y, batch_size=16, epochs=1, verbose=0)  # the train function is instantiated here
        npu_device.open().as_default()
        m.fit(x, y, batch_size=16, epochs=1, verbose=0)
        print("job", npu_device.close())
        return
    npu_device.open().as_default()
    if mode == "twice":
        npu_device.open().as_default()
    rng = np.random.default_rng(0)
    x, y = rng.random((64, 8), np.float32), rng.random((64, 1), np.float32)
    m = model()
    if mode == "sleep":
        step = tf.function(lambda a: tf.reduce_sum(tf.matmul(a, tf.transpose(a))))
        print("stepping", flush=True)
        while True:
            step(tf.constant(x))
            time.sleep(0.01)
    m.fit(x, y, batch_size=16, epochs=1, verbose=0)  # 4 steps
    print("loss", float(m.evaluate(x, y, batch_size=64, verbose=0)))
    if mode in ("keras", "twice", "env"):
        print("job", npu_device.close())


if __name__ == "__main__":
    main()
