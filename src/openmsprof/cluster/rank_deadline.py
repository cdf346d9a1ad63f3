"""How long a local worker may take over one rank before the pool kills it (:mod:`.rank_pool`).

``--rank-timeout`` (``cluster``), else ``OPENMSPROF_CLUSTER_RANK_TIMEOUT``: a number of seconds
for every rank, or ``off``.  Without either, a rank gets ``FLOOR_S`` plus ``S_PER_MB`` per MB of
its input files: 300 s (a worker's start, its imports and a small rank on a machine at load 20
with cold caches, with a wide margin) plus one second per MB, a parse rate of 1 MB/s where a
rank parses at ~100 MB per second of CPU (55 MB of 300 k kernels in 0.56 s): a tenth of a core
still parses ten times faster.  A worker past its rank's deadline is
hung (a stalled network file system, a parse that loops): it is killed, and its rank retried or
reported like a rank whose worker died.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from openmsprof.cluster.discover import RankSource
from openmsprof.cluster.store import source_bytes
from openmsprof.config.errors import ConfigError

__all__ = ["ENV", "FLOOR_S", "S_PER_MB", "RankDeadline", "parse", "seconds_text", "setting"]

ENV = "OPENMSPROF_CLUSTER_RANK_TIMEOUT"
FLOOR_S = 300.0
S_PER_MB = 1.0


def parse(text: str, where: str = "--rank-timeout") -> float | None:
    """Seconds (more than 0, finite), or None for ``off``; ConfigError (one line) for anything else."""
    word = text.strip().lower()
    if word == "off":
        return None
    try:
        seconds = float(word)
    except ValueError:
        raise ConfigError(f"{where} {text!r}: not a number of seconds (say 600, 90.5 or off)") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(f"{where} {text!r}: must be more than 0 seconds and finite (or off)")
    return seconds


@dataclass(frozen=True)
class RankDeadline:
    """``fixed`` seconds for every rank, or by input size (``by_size``), or none (neither)."""

    fixed: float | None = None
    by_size: bool = True

    @property
    def chosen(self) -> bool:
        """The user asked for a deadline (so ranks parse in workers, where one can be kept)."""
        return self.fixed is not None

    def seconds(self, src: RankSource) -> float | None:
        """The deadline of ``src``'s parse in seconds (None: no deadline)."""
        if self.fixed is not None:
            return self.fixed
        if not self.by_size:
            return None
        return FLOOR_S + S_PER_MB * source_bytes(src) / 1e6


def setting(flag: str | None = None) -> RankDeadline:
    """The deadline asked for: ``flag`` (the command line), else the environment, else by size."""
    if flag is not None:
        text, where = flag, "--rank-timeout"
    else:
        text, where = os.environ.get(ENV, ""), ENV
        if not text:
            return RankDeadline()
    return RankDeadline(fixed=parse(text, where), by_size=False)


def seconds_text(seconds: float) -> str:
    """``4 s``, ``1.5 s``, ``312 s``: as a person reads it in a problem line."""
    return f"{seconds:.0f} s" if seconds >= 10 or seconds == int(seconds) else f"{seconds:.3g} s"
