"""``ProfilingConfig(enable_profiling, profiling_options)`` shared by the Estimator and TF2 modes."""

from __future__ import annotations

from openmsprof.config.model import ProfileConfig
from openmsprof.config.tf_options import from_tf_config
from openmsprof.config.validate import bad

__all__ = ["ProfilingConfig"]


class ProfilingConfig:
    """Seed 003's profiling switch.  Values are checked when set: a malformed
    ``profiling_options`` raises a one-line :class:`openmsprof.config.errors.ConfigError` naming
    the key and the value."""

    def __init__(self, enable_profiling: bool = False, profiling_options: str | None = None) -> None:
        self._enable = False
        self._options: str | None = None
        self.enable_profiling = enable_profiling
        self.profiling_options = profiling_options

    @property
    def enable_profiling(self) -> bool:
        return self._enable

    @enable_profiling.setter
    def enable_profiling(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise bad("ProfilingConfig", "enable_profiling", value, "True or False")
        self._enable = value
        self._check()

    @property
    def profiling_options(self) -> str | None:
        return self._options

    @profiling_options.setter
    def profiling_options(self, value: str | bytes | None) -> None:
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        self._options = value
        self._check()

    def _check(self) -> None:
        if self._options:
            from_tf_config(True, self._options)

    def to_config(self) -> ProfileConfig | None:
        """The openmsprof config, or None when profiling is not enabled."""
        return from_tf_config(self._enable, self._options)

    def __repr__(self) -> str:
        return (f"ProfilingConfig(enable_profiling={self._enable!r}, "
                f"profiling_options={self._options!r})")
