"""``npu_bridge.estimator``."""
