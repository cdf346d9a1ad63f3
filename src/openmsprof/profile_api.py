"""Pythonic facade: ``profile()`` context manager and ``start()``/``stop()``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from openmsprof.config.model import ProfileConfig
from openmsprof.config.validate import from_kwargs
from openmsprof.recorder import session
from openmsprof.sources import emit, host_sampler, markers  # noqa: F401  (register listeners)


def start(output: str | os.PathLike[str] | None = None, config: ProfileConfig | None = None,
          **switches: Any) -> session.Session:
    """Start process-wide profiling.  ``switches`` are :class:`ProfileConfig` fields, validated
    (unknown key or bad value → :class:`~openmsprof.config.errors.ConfigError`)."""
    cfg = config if config is not None else from_kwargs(**switches)
    if output is not None:
        cfg = cfg.replace(output=os.fspath(output))
    return session.start(cfg)


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
        self.session = start(self.output, **self.switches)
        self.job = self.session.root
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.session is not None and session.current() is self.session:
            session.stop()
