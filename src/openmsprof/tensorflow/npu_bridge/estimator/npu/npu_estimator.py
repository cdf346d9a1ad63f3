"""``npu_bridge.estimator.npu.npu_estimator.NPUEstimator`` (Estimator mode).

``train``, ``evaluate`` and ``predict`` run inside the profiled window when the run config's
``profiling_config.enable_profiling`` is True (or ``PROFILING_MODE`` is set); each ``sess.run``
of the Estimator's MonitoredSession is one iteration.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from openmsprof.config.model import ProfileConfig
from openmsprof.tensorflow import _control
from openmsprof.tensorflow._estimator import estimator_module
from openmsprof.tensorflow._session_patch import install
from openmsprof.tensorflow.npu_bridge.estimator.npu.npu_config import NPURunConfig

__all__ = ["NPUEstimator"]

_est = estimator_module()
install()


class NPUEstimator(_est.Estimator):  # type: ignore[misc, name-defined]
    """``tf.estimator.Estimator`` profiled as its ``NPURunConfig`` says."""

    def _profile_config(self) -> ProfileConfig | None:
        pc = getattr(self.config, "profiling_config", None) if isinstance(self.config, NPURunConfig) else None
        if pc is not None and pc.enable_profiling:
            return _control.config_from(pc.profiling_options, "NPURunConfig profiling_config")
        return _control.env_config("environment PROFILING_OPTIONS")

    def _begin(self, what: str) -> bool:
        cfg = self._profile_config()
        return cfg is not None and _control.begin(cfg, self, f"NPUEstimator.{what}")

    def train(self, *args: Any, **kwargs: Any) -> Any:
        started = self._begin("train")
        try:
            return super().train(*args, **kwargs)
        finally:
            if started:
                _control.end(self)

    def evaluate(self, *args: Any, **kwargs: Any) -> Any:
        started = self._begin("evaluate")
        try:
            return super().evaluate(*args, **kwargs)
        finally:
            if started:
                _control.end(self)

    def predict(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        started = self._begin("predict")
        try:
            yield from super().predict(*args, **kwargs)
        finally:
            if started:
                _control.end(self)
