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


#: Ids from this value up come from the native recorder's own string table (recorder/_ring.c).
HIGH_BASE = 0x80000000
#: Most ids kept per id range: a corrupt table cannot make the lookup arrays huge.
MAX_IDS = 50_000_000


class LocalMap:
    """Local -> global id arrays for one data directory.  Two dense id ranges share one array:
    ``0..low_top`` (Python recorder) then ``HIGH_BASE..`` (native recorder), each followed by an
    ``N/A`` slot that ids the table does not hold map to (counted in ``bad``)."""

    def __init__(self, table: dict[int, str], ids: StringIds) -> None:
        # writers number densely from 1 (from HIGH_BASE): an id far beyond the count is corrupt,
        # and must not make the lookup arrays huge
        cap = min(MAX_IDS, 2 * len(table) + 65536)
        low = {k: v for k, v in table.items() if 0 <= k < cap}
        high = {k - HIGH_BASE: v for k, v in table.items() if HIGH_BASE <= k < HIGH_BASE + cap}
        low_top = max(low, default=0)
        self.off = low_top + 2  # first slot of the high range
        size = self.off + max(high, default=-1) + 2
        plain = np.full(size, ids.na, dtype=np.int64)
        plain[0] = ids.empty
        for local in sorted(low):
            plain[local] = ids.intern(low[local])
        for local in sorted(high):
            plain[self.off + local] = ids.intern(high[local])
        self.plain = plain
        #: for fields with no CPU analogue or an empty value: 0 and "" become N/A
        na = plain.copy()
        na[na == ids.empty] = ids.na
        self.na = na
        dom = plain.copy()
        dom[dom == ids.empty] = ids.default_domain
        self.domain = dom
        self.limit = low_top + 1
        self.size = size
        self.bad = 0

    def map(self, local: np.ndarray, table: np.ndarray | None = None) -> np.ndarray:
        """Global ids for local ``local`` (u32 array) through ``table`` (default: plain)."""
        arr = self.plain if table is None else table
        idx = local.astype(np.int64)
        hi = idx >= HIGH_BASE
        if hi.any():
            idx = np.where(hi, idx - HIGH_BASE + self.off, idx)
            over = (hi & (idx >= self.size)) | (~hi & (idx > self.limit))
            if over.any():
                self.bad += int(np.count_nonzero(over))
                idx = np.where(over, np.where(hi, self.size - 1, self.limit), idx)
            return arr[idx]
        over = idx > self.limit
        if over.any():
            self.bad += int(np.count_nonzero(over))
            idx = np.where(over, self.limit, idx)
        return arr[idx]
