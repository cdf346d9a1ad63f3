"""Configuration layer: one validated :class:`ProfileConfig` and loaders from every entry point."""

from openmsprof.config.errors import ConfigError, PathError, ProfilingError, SessionError, StorageError
from openmsprof.config.model import ProfileConfig

__all__ = ["ConfigError", "PathError", "ProfileConfig", "ProfilingError", "SessionError", "StorageError"]
