"""Configuration layer: one validated :class:`ProfileConfig` and loaders from every entry point.

Loaders (each returns a validated config with ``unsupported`` filled for this machine):
``from_mask`` (pyACL bit mask), ``load_acl_json`` / ``parse_profiler_section`` (acl.json),
``from_env`` / ``parse_profiling_options`` (PROFILING_OPTIONS, TF), ``add_arguments`` /
``from_args`` (msprof CLI flags), ``from_experimental`` / ``load_profiler_config`` (torch, never
raising: returns warnings), ``from_kwargs`` (Python); ``merge`` applies CLI > acl.json > API.
The loader modules are imported on first use to keep ``import openmsprof`` light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from openmsprof.config.errors import (
    ConfigError,
    ConfigPathError,
    PathError,
    ProfilingError,
    SessionError,
    StorageError,
)
from openmsprof.config.model import ProfileConfig
from openmsprof.config.validate import from_kwargs, validate

if TYPE_CHECKING:
    from openmsprof.config.acl_json import load_acl_json, parse_profiler_section, to_acl_json
    from openmsprof.config.acl_mask import from_mask, to_mask
    from openmsprof.config.capabilities import Machine, check, machine
    from openmsprof.config.cli_flags import add_arguments, from_args, merge
    from openmsprof.config.tf_options import (
        from_env,
        from_tf_config,
        parse_profiling_options,
        to_profiling_options,
    )
    from openmsprof.config.torch_config import (
        DynamicProfilerConfig,
        from_experimental,
        load_profiler_config,
        parse_profiler_config,
    )

_LAZY = {
    "load_acl_json": "acl_json", "parse_profiler_section": "acl_json", "to_acl_json": "acl_json",
    "from_mask": "acl_mask", "to_mask": "acl_mask",
    "Machine": "capabilities", "check": "capabilities", "machine": "capabilities",
    "add_arguments": "cli_flags", "from_args": "cli_flags", "merge": "cli_flags",
    "from_env": "tf_options", "from_tf_config": "tf_options",
    "parse_profiling_options": "tf_options", "to_profiling_options": "tf_options",
    "DynamicProfilerConfig": "torch_config", "from_experimental": "torch_config",
    "load_profiler_config": "torch_config", "parse_profiler_config": "torch_config",
}

__all__ = [
    "ConfigError", "ConfigPathError", "DynamicProfilerConfig", "Machine", "PathError",
    "ProfileConfig", "ProfilingError", "SessionError", "StorageError", "add_arguments", "check",
    "from_args", "from_env", "from_experimental", "from_kwargs", "from_mask", "from_tf_config",
    "load_acl_json", "load_profiler_config", "machine", "merge", "parse_profiler_config",
    "parse_profiler_section", "parse_profiling_options", "to_acl_json", "to_mask",
    "to_profiling_options", "validate",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'openmsprof.config' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"openmsprof.config.{module}"), name)
    globals()[name] = value
    return value
