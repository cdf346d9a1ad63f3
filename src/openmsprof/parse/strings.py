"""Merging the per-directory string tables into one ``STRING_IDS`` table.

Each raw data directory numbers its strings from 1; the database has one id space.  For every
directory a numpy lookup array maps local ids to global ids in one vectorised step; an id the
table does not hold (a corrupt record) maps to ``N/A``.
"""

from __future__ import annotations

import numpy as np

NA = "N/A"
DEFAULT_DOMAIN = "default"


class StringIds:
    """Global string ids, assigned in first-seen order (deterministic for a given job)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.na = self.intern(NA)
        self.empty = self.intern("")
        self.default_domain = self.intern(DEFAULT_DOMAIN)

    def intern(self, text: str) -> int:
        sid = self.ids.get(text)
        if sid is None:
            sid = self.ids[text] = len(self.ids) + 1
        return sid

    def rows(self) -> list[tuple[int, str]]:
        return [(i, s) for s, i in self.ids.items()]


class LocalMap:
    """Local -> global id arrays for one data directory."""

    def __init__(self, table: dict[int, str], ids: StringIds) -> None:
        top = max(table, default=0)
        if top > 50_000_000:  # corrupt table: keep memory bounded
            table = {k: v for k, v in table.items() if k <= 50_000_000}
            top = max(table, default=0)
        plain = np.full(top + 2, ids.na, dtype=np.int64)
        plain[0] = ids.empty
        for local in sorted(table):
            plain[local] = ids.intern(table[local])
        self.plain = plain
        #: for fields with no CPU analogue or an empty value: 0 and "" become N/A
        na = plain.copy()
        na[na == ids.empty] = ids.na
        self.na = na
        dom = plain.copy()
        dom[dom == ids.empty] = ids.default_domain
        self.domain = dom
        self.limit = top + 1
        self.bad = 0

    def map(self, local: np.ndarray, table: np.ndarray | None = None) -> np.ndarray:
        """Global ids for local ``local`` (u32 array) through ``table`` (default: plain)."""
        arr = self.plain if table is None else table
        idx = local.astype(np.int64)
        over = idx > self.limit
        if over.any():
            self.bad += int(np.count_nonzero(over))
            idx = np.where(over, self.limit, idx)
        return arr[idx]
