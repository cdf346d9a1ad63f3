"""mstx markers: ``mark``, ``range_push``/``range_pop`` (one thread), ``range_start`` →
id / ``range_end(id)`` (any thread), and :class:`mstx_range` as decorator or context manager.

With profiling off each call is a single flag test.
"""

from __future__ import annotations

from openmsprof.sources.markers import Range as mstx_range
from openmsprof.sources.markers import mark, pop, push, range_end, range_start

__all__ = ["mark", "mstx_range", "range_end", "range_pop", "range_push", "range_start"]

range_push = push
range_pop = pop
