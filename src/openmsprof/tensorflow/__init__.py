"""TensorFlow profiling with seed 003's interfaces: only the import lines of a script change.

* Estimator mode: ``openmsprof.tensorflow.npu_bridge.estimator.npu.npu_config`` (``NPURunConfig``,
  ``ProfilingConfig``) and ``...npu_estimator.NPUEstimator`` (TensorFlow ≤ 2.15 with
  tensorflow-estimator);
* sess.run mode: ``from openmsprof.tensorflow.npu_bridge.npu_init import *`` — a
  ``tf.compat.v1.Session`` whose config carries the ``NpuOptimizer`` custom optimizer with
  ``profiling_mode`` is profiled;
* TF2 mode: ``openmsprof.tensorflow.npu_device`` (``global_options().profiling_config``,
  ``open().as_default()``);
* every mode also follows ``PROFILING_MODE=true`` + ``PROFILING_OPTIONS``.

The data is TensorFlow's own trace (:mod:`openmsprof.tensorflow.tf_trace`).
"""
