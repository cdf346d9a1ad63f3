"""PROFILING_OPTIONS / TensorFlow ``profiling_options`` JSON → :class:`ProfileConfig` (docs/formats.md §7.3).

Enabled through env ``PROFILING_MODE=true|dynamic`` + ``PROFILING_OPTIONS='<json>'``, TF1
``ProfilingConfig(enable_profiling, profiling_options)``, session ``parameter_map`` or TF2
``profiling_config``.  Keys: those of acl.json plus training_trace, task_trace (= task_time),
fp_point, bp_point; Custom registers in [0x1, 0x6E]; runtime_api off unless asked.  Enabled with no
options ⇒ training_trace, task_trace, hccl, aicpu on and aic_metrics PipeUtilization (S3).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import orjson

from openmsprof.config.capabilities import check
from openmsprof.config.errors import ConfigError
from openmsprof.config.model import ProfileConfig
from openmsprof.config.profiler_options import parse_options, to_options
from openmsprof.config.validate import bad, validate

ENV_MODE = "PROFILING_MODE"
ENV_OPTIONS = "PROFILING_OPTIONS"
MODES = ("true", "false", "dynamic")
MAX_OPTIONS_BYTES = 1024 * 1024


def default_enabled(where: str = ENV_OPTIONS) -> ProfileConfig:
    """The S3 defaults: profiling enabled without options."""
    cfg = ProfileConfig(switch=True, training_trace=True, task_time="on", hccl=True, aicpu=True,
                        aic_metrics="PipeUtilization", msproftx=False, output=os.getcwd(),
                        source="profiling_options")
    cfg.notes.append(f"{where}: enabled without options; training_trace, task_trace, hccl, aicpu on, "
                     f"aic_metrics PipeUtilization, output the current directory {cfg.output!r}")
    return check(validate(cfg, where))


def parse_profiling_options(options: str | bytes | Mapping[str, Any] | None,
                            where: str = ENV_OPTIONS) -> ProfileConfig:
    """The config for a profiling_options value (JSON text or an already decoded object)."""
    if options is None:
        return default_enabled(where)
    if isinstance(options, Mapping):
        doc: Any = options
    elif isinstance(options, (str, bytes)):
        if not options.strip():
            return default_enabled(where)
        if len(options) > MAX_OPTIONS_BYTES:
            raise ConfigError(f"{where}: {len(options)} bytes is larger than the {MAX_OPTIONS_BYTES} byte limit")
        try:
            doc = orjson.loads(options)
        except orjson.JSONDecodeError as exc:
            raise ConfigError(
                f"{where}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
            ) from None
    else:
        raise bad(where, "profiling_options", options, "a JSON object text")
    if not isinstance(doc, Mapping):
        raise bad(where, "profiling_options", doc, "a JSON object")
    if not doc:
        return default_enabled(where)
    return parse_options(doc, where, "tf")


def from_tf_config(enable_profiling: bool, profiling_options: str | None = None) -> ProfileConfig | None:
    """TF1 ``ProfilingConfig`` / TF2 ``profiling_config`` fields; None when not enabled."""
    if not isinstance(enable_profiling, bool):
        raise bad("ProfilingConfig", "enable_profiling", enable_profiling, "True or False")
    if not enable_profiling:
        return None
    return parse_profiling_options(profiling_options, "ProfilingConfig.profiling_options")


def from_env(environ: Mapping[str, str] | None = None) -> ProfileConfig | None:
    """The config enabled by ``PROFILING_MODE`` / ``PROFILING_OPTIONS``; None when not enabled."""
    env = os.environ if environ is None else environ
    mode = env.get(ENV_MODE)
    if mode is None or mode.strip() == "":
        return None
    mode_l = mode.strip().lower()
    if mode_l not in MODES:
        raise bad("environment", ENV_MODE, mode, ", ".join(MODES))
    if mode_l == "false":
        return None
    cfg = parse_profiling_options(env.get(ENV_OPTIONS), f"environment {ENV_OPTIONS}")
    cfg.source = f"env:{ENV_MODE}={mode_l}"
    if mode_l == "dynamic":
        cfg.notes.append(f"{ENV_MODE}=dynamic: collection is started and stopped by the application")
    return cfg


def to_profiling_options(cfg: ProfileConfig) -> str:
    """JSON text for ``PROFILING_OPTIONS`` that :func:`parse_profiling_options` maps back to ``cfg``."""
    return orjson.dumps(to_options(cfg, "tf")).decode()
