"""acl_statistic's groups gathered by the import from its decoded arrays (no GROUP BY afterwards).

The importer adds every CANN_API chunk it writes to an :class:`ApiGroups`: per (globalTid, type,
name) the count, sum, max and min of ``MAX(endNs - startNs, 0)`` — integers, so their order of
addition does not matter.  Once the database is in place, :func:`remember` keeps the groups for
this process (a forked export child inherits them), those of the latest import only, keyed by
the file's identity; :func:`lookup` hands them out only while the file is that one.  Nothing is kept when a value could make SQL
compute differently (a time past 2^62, a chunk sum past 64 bits), past :data:`MAX_GROUPS`
groups (memory stays bounded), or when the writer dropped a duplicate API row.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

__all__ = ["MAX_GROUPS", "ApiGroups", "forget", "lookup", "remember"]

#: Groups gathered at most; past it the export takes the SQL route.
MAX_GROUPS = 65_536
_LIMIT = 1 << 62
Key = tuple[int, int, int]

_KEPT: dict[str, tuple[tuple[int, int, int], dict[Key, list[int]]]] = {}


class ApiGroups:
    """(globalTid, type, name) → [count, sum, max, min] of the API rows' clamped durations."""

    def __init__(self) -> None:
        self.groups: dict[Key, list[int]] = {}
        self.ok = True

    def add(self, gtid: np.ndarray, typ: np.ndarray, name: np.ndarray, start: np.ndarray,
            end: np.ndarray) -> None:
        """One batch of CANN_API rows (the columns as written)."""
        if not self.ok or not len(start):
            return
        lo = min(int(start.min()), int(end.min()))
        hi = max(int(start.max()), int(end.max()))
        if lo <= -_LIMIT or hi >= _LIMIT:
            self._give_up()
            return
        dur = np.maximum(end - start, 0)
        if int(dur.max()) * len(dur) >= _LIMIT:  # a group's sum could pass 64 bits
            self._give_up()
            return
        order = np.lexsort((name, typ, gtid))
        g, t, n, d = gtid[order], typ[order], name[order], dur[order]
        new = np.ones(len(d), dtype=bool)
        new[1:] = (g[1:] != g[:-1]) | (t[1:] != t[:-1]) | (n[1:] != n[:-1])
        first = np.flatnonzero(new)
        counts = np.diff(np.append(first, len(d))).tolist()
        sums = np.add.reduceat(d, first).tolist()
        maxs = np.maximum.reduceat(d, first).tolist()
        mins = np.minimum.reduceat(d, first).tolist()
        groups = self.groups
        for k, key in enumerate(zip(g[first].tolist(), t[first].tolist(), n[first].tolist(), strict=True)):
            cur = groups.get(key)
            if cur is None:
                if len(groups) >= MAX_GROUPS:
                    self._give_up()
                    return
                groups[key] = [counts[k], sums[k], maxs[k], mins[k]]
            else:
                cur[0] += counts[k]
                cur[1] += sums[k]
                if maxs[k] > cur[2]:
                    cur[2] = maxs[k]
                if mins[k] < cur[3]:
                    cur[3] = mins[k]

    def _give_up(self) -> None:
        self.ok = False
        self.groups = {}


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def remember(db: Path, groups: ApiGroups) -> None:
    """Keep ``groups`` for the database file ``db`` just written (nothing when they gave up)."""
    key = _identity(db)
    _KEPT.clear()  # only the latest import's: a process importing many jobs keeps one set
    if groups.ok and key is not None:
        _KEPT[str(db)] = (key, groups.groups)


def lookup(db: Path) -> dict[Key, list[int]] | None:
    """The groups kept for ``db`` while it is still the file they were gathered for."""
    kept = _KEPT.get(str(db))
    if kept is None or _identity(db) != kept[0]:
        return None
    return kept[1]


def forget(db: Path) -> None:
    _KEPT.pop(str(db), None)
