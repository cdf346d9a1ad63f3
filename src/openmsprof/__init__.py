"""openmsprof: profiling for AI inference and training with the Ascend msprof interfaces and
formats, on any machine.

Pythonic entry points::

    with openmsprof.profile(output="out"):
        ...

    openmsprof.start(output="out", host_sys_usage=["cpu", "mem"])
    ...
    job = openmsprof.stop()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from openmsprof._version import __version__
from openmsprof.config import (
    ConfigError,
    PathError,
    ProfileConfig,
    ProfilingError,
    SessionError,
    StorageError,
)

if TYPE_CHECKING:
    from openmsprof import mstx
    from openmsprof.flight import flight_recorder
    from openmsprof.load import load
    from openmsprof.profile_api import profile, start, stop
    from openmsprof.recorder.session import Session

# Imported on first use (PEP 562), so that the command line and the analysis layers, which import
# ``openmsprof`` as their package, do not pay for the recorder, the flight recorder and the loader.
_LAZY = {
    "mstx": ("openmsprof.mstx", None),
    "flight_recorder": ("openmsprof.flight", "flight_recorder"),
    "load": ("openmsprof.load", "load"),
    "profile": ("openmsprof.profile_api", "profile"),
    "start": ("openmsprof.profile_api", "start"),
    "stop": ("openmsprof.profile_api", "stop"),
    "Session": ("openmsprof.recorder.session", "Session"),
}


def __getattr__(name: str) -> Any:
    spec = _LAZY.get(name)
    if spec is None:
        raise AttributeError(f"module 'openmsprof' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(spec[0])
    value = module if spec[1] is None else getattr(module, spec[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "ConfigError",
    "PathError",
    "ProfileConfig",
    "ProfilingError",
    "Session",
    "SessionError",
    "StorageError",
    "__version__",
    "flight_recorder",
    "load",
    "mstx",
    "profile",
    "start",
    "stop",
]
