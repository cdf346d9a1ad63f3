"""``from npu_bridge.npu_init import *`` for ported TF1 scripts (sess.run mode).

Importing it wraps ``tf.compat.v1.Session`` (see :mod:`openmsprof.tensorflow._session_patch`) and
exports the names the seed's samples use: ``RewriterConfig``, ``ProfilingConfig`` and, on a
TensorFlow with ``tf.estimator``, ``NPURunConfig`` and ``NPUEstimator``.
"""

from __future__ import annotations

from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig

from openmsprof.tensorflow._profiling_config import ProfilingConfig
from openmsprof.tensorflow._session_patch import install
from openmsprof.tensorflow.npu_bridge.profiler import profiler

__all__ = ["ProfilingConfig", "RewriterConfig", "profiler"]

install()

try:
    from openmsprof.tensorflow.npu_bridge.estimator.npu.npu_config import NPURunConfig
    from openmsprof.tensorflow.npu_bridge.estimator.npu.npu_estimator import NPUEstimator
except ImportError:  # TensorFlow >= 2.16: no Estimator; said when npu_config is imported
    pass
else:
    __all__ += ["NPUEstimator", "NPURunConfig"]
