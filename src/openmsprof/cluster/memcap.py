"""The cluster analysis's DuckDB memory cap and its spill directory.

The cap comes from ``--memory-limit`` (``cluster``), else ``OPENMSPROF_CLUSTER_MEMORY_LIMIT``,
else the machine: a quarter of the memory available now, between 256 MB and 16 GB.  Sizes are
DuckDB's (``64MB``, ``2GB``, ``512MiB``; a bare number is bytes).  Operators that outgrow the cap
spill to ``.openmsprof_spill/`` under the output (removed at the end); the exact all-kernel
quantiles (``opstats``) run only when their values fit a quarter of the cap.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from openmsprof.config.errors import ConfigError
from openmsprof.fileio import fs

__all__ = ["ENV", "SPILL_DIR", "cap_bytes", "default_bytes", "exact_kernel_limit", "parse", "remove_spill", "spill_dir"]

ENV = "OPENMSPROF_CLUSTER_MEMORY_LIMIT"
SPILL_DIR = ".openmsprof_spill"
MIN_BYTES = 16 << 20
#: DuckDB's quantile state per value (a double in a growing vector, measured ~2x its 8 bytes).
QUANTILE_BYTES = 32
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse(text: str, where: str = "--memory-limit") -> int:
    """Bytes of a size such as ``64MB``; ConfigError (one line) for anything else or under 16 MB."""
    m = _SIZE_RE.match(text)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNITS:
        raise ConfigError(f"{where} {text!r}: not a size (say 64MB, 2GB or 512MiB)")
    n = int(float(m.group(1)) * _UNITS[unit])
    if n < MIN_BYTES:
        raise ConfigError(f"{where} {text!r}: below the 16MB DuckDB needs to run")
    return n


def default_bytes() -> int:
    """A quarter of the memory available now, between 256 MB and 16 GB."""
    import psutil

    return int(min(max(psutil.virtual_memory().available // 4, 256 << 20), 16 << 30))


def cap_bytes(limit: str | None = None) -> int:
    """The cap: ``limit`` (the command line), else the environment variable, else the default."""
    if limit is not None:
        return parse(limit)
    env = os.environ.get(ENV)
    return parse(env, ENV) if env else default_bytes()


def spill_dir(out: Path) -> Path:
    """The spill directory under the output ``out`` (made if missing)."""
    return fs.make_dir(out / SPILL_DIR)


def remove_spill(out: Path) -> None:
    """Remove the spill directory (DuckDB removes its files as it frees them)."""
    path = out / SPILL_DIR
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)


def exact_kernel_limit(cap: int) -> int:
    """The most kernels whose exact quantiles fit a quarter of ``cap`` (``QUANTILE_BYTES`` each)."""
    return max(cap // 4 // QUANTILE_BYTES, 0)
