"""Pythonic facade: ``profile()`` context manager and ``start()``/``stop()``."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from openmsprof.config.errors import ConfigError
from openmsprof.config.model import ProfileConfig
from openmsprof.config.validate import from_kwargs
from openmsprof.recorder import session
from openmsprof.sources import emit, gc_watch, host_sampler, markers  # noqa: F401  (register listeners)

log = logging.getLogger("openmsprof")


def start(output: str | os.PathLike[str] | None = None, config: ProfileConfig | None = None,
          **switches: Any) -> session.Session:
    """Start process-wide profiling.  ``switches`` are :class:`ProfileConfig` fields, validated
    (unknown key or bad value → :class:`~openmsprof.config.errors.ConfigError`)."""
    cfg = _config(output, config, switches)
    if not cfg.switch:
        raise ConfigError("switch=False turns profiling off: there is nothing to start "
                          "(profile(switch=False) runs its block without profiling)")
    return session.start(cfg)


def _config(output: str | os.PathLike[str] | None, config: ProfileConfig | None,
            switches: dict[str, Any]) -> ProfileConfig:
    cfg = config if config is not None else from_kwargs(**switches)
    return cfg.replace(output=os.fspath(output)) if output is not None else cfg


def stop() -> Path:
    """Stop profiling; returns the job directory."""
    return session.stop().root


class profile:
    """``with openmsprof.profile(output="out") as prof: ...``; ``prof.job`` is the job dir."""

    def __init__(self, output: str | os.PathLike[str] | None = None, **switches: Any) -> None:
        self.output = output
        self.switches = switches
        self.session: session.Session | None = None
        self.job: Path | None = None

    def __enter__(self) -> profile:
        if not _config(self.output, None, self.switches).switch:  # the block runs unprofiled
            log.warning("openmsprof: switch=off: profiling is off for this block; nothing is collected")
            return self
        self.session = start(self.output, **self.switches)
        self.job = self.session.root
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.session is not None and session.current() is self.session:
            session.stop()
