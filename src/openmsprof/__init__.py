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

from openmsprof import mstx
from openmsprof._version import __version__
from openmsprof.config import (
    ConfigError,
    PathError,
    ProfileConfig,
    ProfilingError,
    SessionError,
    StorageError,
)
from openmsprof.flight import flight_recorder
from openmsprof.load import load
from openmsprof.profile_api import profile, start, stop
from openmsprof.recorder.session import Session

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
