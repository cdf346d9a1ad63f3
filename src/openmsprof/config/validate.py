"""Validation of :class:`ProfileConfig` values; builds configs from keyword switches."""

from __future__ import annotations

import dataclasses
from typing import Any

from openmsprof.config.errors import ConfigError
from openmsprof.config.model import ProfileConfig

_FIELDS = {f.name for f in dataclasses.fields(ProfileConfig)}


def from_kwargs(**switches: Any) -> ProfileConfig:
    """Build a config from Python keyword switches (field names of ProfileConfig)."""
    unknown = sorted(set(switches) - _FIELDS)
    if unknown:
        raise ConfigError(
            f"unknown profiling switch {unknown[0]!r}; allowed: {', '.join(sorted(_FIELDS))}"
        )
    cfg = ProfileConfig(**switches)
    cfg.source = "python"
    return cfg
