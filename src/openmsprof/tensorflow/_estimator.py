"""Find ``tf.estimator`` (TensorFlow ≤ 2.15 with tensorflow-estimator) or say why it is missing."""

from __future__ import annotations

from typing import Any

__all__ = ["NO_ESTIMATOR", "estimator_module"]

NO_ESTIMATOR = ("the Estimator mode of seed 003 needs tf.estimator, which TensorFlow {version} does "
                "not have (it was removed in TensorFlow 2.16): install tensorflow<=2.15 with "
                "tensorflow-estimator 2.15, or use the sess.run mode (npu_bridge.npu_init) or the "
                "TF2 mode (openmsprof.tensorflow.npu_device)")


def estimator_module() -> Any:
    """``tf.estimator``; ImportError with :data:`NO_ESTIMATOR` when this TensorFlow lacks it."""
    import tensorflow as tf

    try:
        est = tf.estimator
        est.Estimator  # noqa: B018 - the lazy loader imports tensorflow_estimator here
        est.RunConfig  # noqa: B018
    except (AttributeError, ImportError):
        raise ImportError(NO_ESTIMATOR.format(version=tf.__version__)) from None
    return est
