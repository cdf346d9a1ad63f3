"""``npu_bridge.estimator.npu``: ``npu_config`` and ``npu_estimator`` (TensorFlow ≤ 2.15)."""
