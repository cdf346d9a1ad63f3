"""The price of a matched pattern: the matched ops' measured time, the replacement's modelled
time (nothing when it fuses into the op before the match, and then the layout reorders right
around it go too), and the bytes the replacement saves at the measured bandwidth."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from openmsprof.analysis.patterns import I64, Match, TaskColumns, _mask, unique_rows
from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof.roofline import Ceilings
from openmsprof.parse.costmodel import op_cost

__all__ = ["price"]


def _median_per_iteration(it: I64, values: npt.NDArray[np.float64], n_it: int) -> float:
    """The median over iterations of the per-iteration sums of ``values``."""
    if n_it == 0:
        return 0.0
    return float(np.median(np.bincount(it, weights=values, minlength=n_it)))


def price(db: JobDB, cols: TaskColumns, match: Match, ceil: Ceilings,
          floor_ns: float) -> dict[str, Any]:
    """Measured time of the matched ops, modelled time of the replacement, bytes saved."""
    p = match.pattern
    occ_dur = match.durations(cols.dur)
    measured = float(occ_dur.sum())
    first, last = match.first, match.last
    # the median iteration's time in the pattern (robust to a few slow iterations, like
    # compare's per-iteration medians)
    it_idx = cols.it_index
    n_it = cols.iterations
    per_it = np.bincount(it_idx[first], weights=occ_dur.astype(float), minlength=n_it)
    median_it = float(np.median(per_it)) if per_it.size else 0.0
    occ_abs = np.zeros(len(first))
    before = first - 1
    fused = np.zeros(len(first), dtype=bool)
    if p.fuses_after:
        prev = before.copy()
        hop = (prev >= 0) & _mask(db, cols, tuple(p.absorbs))[np.maximum(prev, 0)]
        prev = np.where(hop, prev - 1, prev)
        ok = prev >= 0
        same = cols.it[np.maximum(prev, 0)] == cols.it[first]
        fused = ok & same & _mask(db, cols, tuple(p.fuses_after))[np.maximum(prev, 0)]
        nxt = last + 1
        has_next = nxt < cols.typ.size
        nxt_abs = has_next & _mask(db, cols, tuple(p.absorbs))[np.minimum(nxt, cols.typ.size - 1)]
        occ_abs = (np.where(fused & hop, cols.dur[np.maximum(before, 0)], 0)
                   + np.where(fused & nxt_abs, cols.dur[np.minimum(nxt, cols.typ.size - 1)], 0)
                   ).astype(float)
    absorbed = float(occ_abs.sum())
    occ_rep = np.zeros(len(first))
    occ_bytes = np.zeros(len(first))
    occ_after = np.zeros(len(first))
    text = db.text
    start = 0
    for g in match.groups:  # one signature per distinct (fused, types, shapes, dtypes)
        sl = slice(start, start + len(g))
        start += len(g)
        sig = np.concatenate([fused[sl, None].astype(np.int64), cols.typ[g], cols.ish[g],
                              cols.idt[g], cols.osh[g], cols.odt[g]], axis=1)
        uniq, inv = unique_rows(sig)
        vals = np.zeros((len(uniq), 3))
        k = g.shape[1]
        for u, row in enumerate(uniq.tolist()):
            fz, typ, ish, idt = row[0], row[1:1 + k], row[1 + k:1 + 2 * k], row[1 + 2 * k:1 + 3 * k]
            osh, odt = row[1 + 3 * k:1 + 4 * k], row[1 + 4 * k:]
            b = sum(op_cost(text(typ[i]), text(ish[i]), text(idt[i]), text(osh[i]),
                            text(odt[i])).bytes for i in range(k))
            if fz or not p.replacement_op:
                vals[u] = (0.0, b, 0.0)
                continue
            c = op_cost(p.replacement_op, text(ish[0]).split(";")[0],
                        text(idt[0]).split(";")[0], text(osh[-1]), text(odt[-1]))
            att = ceil.roof(c).attainable_ns
            vals[u] = (max(att, floor_ns), b, c.bytes)
        per = vals[inv]
        occ_rep[sl], occ_bytes[sl], occ_after[sl] = per[:, 0], per[:, 1], per[:, 2]
    rep_ns = float(occ_rep.sum())
    bytes_before, bytes_after = float(occ_bytes.sum()), float(occ_after.sum())
    saved_bytes = max(0.0, bytes_before - bytes_after)
    return {"measured_ns": measured, "median_iteration_ns": median_it, "absorbed_ns": absorbed,
            "replacement_ns": rep_ns, "gain_ns": max(0.0, measured + absorbed - rep_ns),
            "gain_iteration_ns": max(0.0, _median_per_iteration(
                it_idx[first], occ_dur + occ_abs - occ_rep, per_it.size)),
            "fused": int(fused.sum()),
            "saved_bytes": saved_bytes,
            "memory_gain_ns": saved_bytes / ceil.bandwidth * 1e9 if ceil.bandwidth else 0.0}
