"""Seed 003's switches as objects: clear errors at configuration time, the Estimator message."""

from __future__ import annotations

import pytest

from openmsprof.config.errors import ConfigError
from openmsprof.tensorflow import npu_device
from openmsprof.tensorflow._profiling_config import ProfilingConfig


def test_malformed_options_name_key_and_value():
    with pytest.raises(ConfigError, match=r"task_trace.*'maybe'"):
        ProfilingConfig(enable_profiling=True, profiling_options='{"task_trace":"maybe"}')
    with pytest.raises(ConfigError, match="invalid JSON at line 1"):
        ProfilingConfig(True, '{"output": ')
    with pytest.raises(ConfigError, match="enable_profiling"):
        ProfilingConfig(enable_profiling="yes")  # type: ignore[arg-type]
    pc = npu_device.global_options().profiling_config
    with pytest.raises(ConfigError, match="unknown key 'fp_pont'"):
        pc.profiling_options = '{"fp_pont": ""}'


def test_valid_options_map_to_config():
    pc = ProfilingConfig(True, '{"output":"/tmp/p","training_trace":"on","fp_point":"a/b","bp_point":""}')
    cfg = pc.to_config()
    assert cfg is not None and cfg.training_trace and cfg.fp_point == "a/b" and cfg.output == "/tmp/p"
    assert ProfilingConfig(False).to_config() is None


def test_no_estimator_is_said_at_import():
    import tensorflow as tf

    if hasattr(tf, "estimator"):
        pytest.skip(f"TensorFlow {tf.__version__} has tf.estimator (tested in .venv-tf215)")
    with pytest.raises(ImportError, match=r"needs tf.estimator.*removed in TensorFlow 2.16.*npu_device"):
        import openmsprof.tensorflow.npu_bridge.estimator.npu.npu_config  # noqa: F401
