"""``npu_bridge.estimator.npu.npu_config``: ``NPURunConfig`` and ``ProfilingConfig`` (Estimator mode).

Importing this module on a TensorFlow without ``tf.estimator`` (2.16 and later) raises an
ImportError that says so and names the other two modes.
"""

from __future__ import annotations

import logging
from typing import Any

from openmsprof.tensorflow._estimator import estimator_module
from openmsprof.tensorflow._profiling_config import ProfilingConfig
from openmsprof.tensorflow._session_patch import take_npu_optimizer

__all__ = ["NPURunConfig", "ProfilingConfig"]

_est = estimator_module()
log = logging.getLogger("openmsprof")
#: RunConfig arguments of tf.estimator that NPURunConfig passes on.
_RUN_CONFIG_ARGS = ("model_dir", "tf_random_seed", "save_summary_steps", "save_checkpoints_steps",
                    "save_checkpoints_secs", "keep_checkpoint_max", "keep_checkpoint_every_n_hours",
                    "log_step_count_steps", "train_distribute", "device_fn", "protocol",
                    "eval_distribute", "experimental_distribute", "experimental_max_worker_delay_secs",
                    "session_creation_timeout_secs", "checkpoint_save_graph_def")


class NPURunConfig(_est.RunConfig):  # type: ignore[misc, name-defined]
    """``tf.estimator.RunConfig`` with the Ascend ``profiling_config`` argument.  Ascend-only
    arguments (``iterations_per_loop``, ``precision_mode``, ...) are accepted and noted once."""

    def __init__(self, profiling_config: ProfilingConfig | None = None, session_config: Any = None,
                 **kwargs: Any) -> None:
        if profiling_config is not None and not isinstance(profiling_config, ProfilingConfig):
            raise TypeError(f"NPURunConfig: profiling_config must be a ProfilingConfig, not "
                            f"{type(profiling_config).__name__}")
        passed = {k: v for k, v in kwargs.items() if k in _RUN_CONFIG_ARGS}
        ignored = sorted(set(kwargs) - set(passed))
        if ignored:
            log.info("openmsprof: NPURunConfig: Ascend-only arguments %s have no effect here",
                     ", ".join(ignored))
        session_config, _params = take_npu_optimizer(session_config)
        super().__init__(session_config=session_config, **passed)
        self._profiling_config = profiling_config

    @property
    def profiling_config(self) -> ProfilingConfig | None:
        return self._profiling_config
