"""TF2 mode (seed 003): ``npu_device.global_options().profiling_config`` and
``npu_device.open().as_default()``.

``as_default()`` opens the profiled window when ``profiling_config.enable_profiling`` is True (or
``PROFILING_MODE`` is set); it covers eager ops, ``tf.function`` calls and Keras ``fit`` until
:func:`close` or the end of the program.  The ops still run on TensorFlow's own CPU device.
"""

from __future__ import annotations

from typing import Any

from openmsprof.config.model import ProfileConfig
from openmsprof.tensorflow import _tf_window as _control
from openmsprof.tensorflow._profiling_config import ProfilingConfig
from openmsprof.tensorflow.tf_graph_collect import graph_collection

__all__ = ["NpuDevice", "ProfilingConfig", "close", "global_options", "open"]


class _DeviceProfilingConfig(ProfilingConfig):
    """``global_options().profiling_config``: switching it on also starts TensorFlow's collection
    of function graphs, so functions instantiated before ``as_default()`` (a warm-up, a model
    built first) still give op shapes and fusion_op."""

    def _set_enable(self, value: bool) -> None:
        ProfilingConfig.enable_profiling.fset(self, value)  # type: ignore[attr-defined]
        if value:
            graph_collection(True)

    enable_profiling = ProfilingConfig.enable_profiling.setter(_set_enable)  # type: ignore[attr-defined]


class _GlobalOptions:
    """The process-wide options object of ``npu_device.global_options()``."""

    def __init__(self) -> None:
        self.profiling_config: ProfilingConfig = _DeviceProfilingConfig()

    def __repr__(self) -> str:
        return f"GlobalOptions(profiling_config={self.profiling_config!r})"


_options = _GlobalOptions()
_MODE = "npu_device.open().as_default()"


def global_options() -> _GlobalOptions:
    return _options


class NpuDevice:
    """What ``open()`` returns; ``as_default()`` starts profiling as configured."""

    def __init__(self, device_id: int = 0) -> None:
        self.device_id = device_id
        self.name = "/job:localhost/replica:0/task:0/device:CPU:0"

    def as_default(self) -> NpuDevice:
        pc = _options.profiling_config
        cfg: ProfileConfig | None
        if pc.enable_profiling:
            cfg = _control.config_from(pc.profiling_options, "npu_device profiling_config.profiling_options")
        else:
            cfg = _control.env_config("environment PROFILING_OPTIONS")
        if cfg is not None:
            _control.begin(cfg, self, _MODE)
        return self

    def __enter__(self) -> NpuDevice:
        return self.as_default()

    def __exit__(self, *exc: Any) -> None:
        _control.end(self)

    def __repr__(self) -> str:
        return f"NpuDevice({self.device_id})"


def open(device_id: int = 0, *args: Any, **kwargs: Any) -> NpuDevice:
    """The device object (extra arguments of the Ascend call are accepted and unused)."""
    return NpuDevice(device_id)


def close() -> str | None:
    """Stop profiling now (it also stops at exit).  Returns the job dir, or None."""
    return _control.end()
