"""``npu_bridge.estimator.npu.npu_estimator.NPUEstimator`` (Estimator mode).

tf.estimator forbids overriding ``train``/``evaluate``/``predict``, so the profiled window rides on
the one extension point it offers: the ``model_fn`` is wrapped so that its ``EstimatorSpec``
carries a :class:`ProfilingHook` (training, evaluation and prediction hooks).  The window opens
when the Estimator's session is created and closes when that session ends, when
``profiling_config.enable_profiling`` is True (or ``PROFILING_MODE`` is set); each ``sess.run``
of the Estimator's MonitoredSession is one iteration.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from openmsprof.config.model import ProfileConfig
from openmsprof.tensorflow import _tf_window as _control
from openmsprof.tensorflow._estimator import estimator_module
from openmsprof.tensorflow._session_patch import install
from openmsprof.tensorflow.npu_bridge.estimator.npu.npu_config import NPURunConfig

__all__ = ["NPUEstimator", "ProfilingHook"]

_est = estimator_module()
install()
_MODES = {"train": "training_hooks", "eval": "evaluation_hooks", "infer": "prediction_hooks"}


class ProfilingHook(_est.SessionRunHook):  # type: ignore[misc, name-defined]
    """Opens the profiled window after the session is created and closes it at its end."""

    def __init__(self, cfg: ProfileConfig, what: str) -> None:
        self.cfg, self.what, self.started = cfg, what, False

    def after_create_session(self, session: Any, coord: Any) -> None:
        self.started = _control.begin(self.cfg, self, f"NPUEstimator ({self.what})", adopt=True)
        if self.started:
            _control.tie(self, session)

    def end(self, session: Any) -> None:
        if self.started:
            _control.end(self)


def _wrap(model_fn: Callable[..., Any], estimator: NPUEstimator) -> Callable[..., Any]:
    accepted = set(inspect.signature(model_fn).parameters)

    def model_fn_with_profiling(features: Any, labels: Any, mode: Any, params: Any,
                                config: Any) -> Any:
        given = {"labels": labels, "mode": mode, "params": params, "config": config}
        spec = model_fn(features, **{k: v for k, v in given.items() if k in accepted})
        cfg = estimator.profile_config()
        field = _MODES.get(str(mode))
        if cfg is None or field is None:
            return spec
        hooks = [*getattr(spec, field), ProfilingHook(cfg, str(mode))]
        return spec._replace(**{field: hooks})

    return model_fn_with_profiling


class NPUEstimator(_est.Estimator):  # type: ignore[misc, name-defined]
    """``tf.estimator.Estimator`` profiled as its ``NPURunConfig`` says."""

    def __init__(self, model_fn: Callable[..., Any], model_dir: str | None = None,
                 config: Any = None, params: dict[str, Any] | None = None,
                 warm_start_from: Any = None, **kwargs: Any) -> None:
        self._npu_config = config
        super().__init__(model_fn=_wrap(model_fn, self), model_dir=model_dir, config=config,
                         params=params, warm_start_from=warm_start_from)

    def profile_config(self) -> ProfileConfig | None:
        """The config of this Estimator's profiling switch (or the environment), else None."""
        conf = self._npu_config
        pc = conf.profiling_config if isinstance(conf, NPURunConfig) else None
        if pc is not None and pc.enable_profiling:
            return _control.config_from(pc.profiling_options, "NPURunConfig profiling_config")
        return _control.env_config("environment PROFILING_OPTIONS")
