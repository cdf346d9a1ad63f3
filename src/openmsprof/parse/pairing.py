"""Vectorised pairing of open/close records across streamed chunks.

* PUSH/POP pair per thread like a stack: a record's *level* is the thread's nesting depth
  (after a PUSH, before a POP); within one (thread, level) the matching POP is the very next
  record, so a stable sort by (tid, level) puts every pair side by side.
* RANGE_START/RANGE_END pair by range id (``t1``) in any order across threads.

Unmatched opens are carried into the next chunk; :meth:`finish` returns what stayed open.
"""

from __future__ import annotations

import numpy as np

from openmsprof.recorder.rawfile import GENERIC_DTYPE

_EMPTY = np.zeros(0, dtype=GENERIC_DTYPE)


class PushPopPairer:
    """Same-thread ranges (Kind.PUSH = 2, Kind.POP = 3)."""

    def __init__(self) -> None:
        self.carry = _EMPTY
        self.orphan_pops = 0

    def feed(self, recs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``recs``: PUSH/POP records in file order.  Returns matched (pushes, pops)."""
        if len(self.carry):
            recs = np.concatenate([self.carry, recs])
        n = len(recs)
        if n == 0:
            return _EMPTY, _EMPTY
        order = np.argsort(recs["tid"], kind="stable")
        r = recs[order]
        tid = r["tid"]
        is_push = r["kind"] == 2
        delta = np.where(is_push, 1, -1).astype(np.int64)
        cs = np.cumsum(delta)
        first = np.empty(n, dtype=bool)
        first[0] = True
        np.not_equal(tid[1:], tid[:-1], out=first[1:])
        group = np.cumsum(first) - 1
        depth = cs - (cs - delta)[first][group]
        level = np.where(is_push, depth, depth + 1)
        o2 = np.lexsort((level, tid))  # stable: ties keep file order
        kind2, lv2, tid2 = r["kind"][o2], level[o2], tid[o2]
        pair = (tid2[1:] == tid2[:-1]) & (lv2[1:] == lv2[:-1]) & (kind2[:-1] == 2) & (kind2[1:] == 3)
        i = np.flatnonzero(pair)
        used = np.zeros(n, dtype=bool)
        used[i] = used[i + 1] = True
        left = o2[~used]  # positions in r, unmatched
        left.sort()
        left_recs = r[left]
        open_mask = left_recs["kind"] == 2
        self.orphan_pops += int(np.count_nonzero(~open_mask))
        self.carry = left_recs[open_mask]
        return r[o2[i]], r[o2[i + 1]]

    def finish(self) -> np.ndarray:
        """PUSH records that never got their POP."""
        out, self.carry = self.carry, _EMPTY
        return out


class RangePairer:
    """Cross-thread ranges (Kind.RANGE_START = 4, Kind.RANGE_END = 5), id in ``t1``."""

    def __init__(self) -> None:
        self.starts = _EMPTY
        self.ends = _EMPTY

    def feed(self, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        starts = np.concatenate([self.starts, starts]) if len(self.starts) else starts
        ends = np.concatenate([self.ends, ends]) if len(self.ends) else ends
        if not len(starts) or not len(ends):
            self.starts, self.ends = starts, ends
            return _EMPTY, _EMPTY
        order = np.argsort(starts["t1"], kind="stable")
        sid = starts["t1"][order]
        pos = np.searchsorted(sid, ends["t1"])
        pos_c = np.minimum(pos, len(sid) - 1)
        hit = sid[pos_c] == ends["t1"]
        # one end per start: keep the first end of each id
        s_idx = order[pos_c[hit]]
        e_idx = np.flatnonzero(hit)
        s_idx, first = np.unique(s_idx, return_index=True)
        e_idx = e_idx[first]
        keep_s = np.ones(len(starts), dtype=bool)
        keep_s[s_idx] = False
        keep_e = np.ones(len(ends), dtype=bool)
        keep_e[e_idx] = False
        self.starts, self.ends = starts[keep_s], ends[keep_e]
        return starts[s_idx], ends[e_idx]

    def finish(self) -> tuple[np.ndarray, int]:
        """(starts never ended, number of ends never started)."""
        out, orphans = self.starts, len(self.ends)
        self.starts = self.ends = _EMPTY
        return out, orphans
