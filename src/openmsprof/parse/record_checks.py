"""Raw records with impossible values, and why: the checks the importer drops records by.

Times outside 0..2^61, spans reversed or over 10 days, enum-like ``aux`` out of range, counters
not finite or of an unknown series or sub-index, negative range ids: a flipped bit in a raw file
never becomes a row; :class:`convert.JobCounters` counts the drops by file and reason.
"""

from __future__ import annotations

import numpy as np

from openmsprof.recorder.rawfile import COUNTER_DTYPE
from openmsprof.recorder.records import EXECUTOR_NAMES, Series

__all__ = ["MAX_MONO", "MAX_SPAN", "MAX_SUB_INDEX", "impossible", "valid_records"]

#: Largest plausible monotonic time (ns, ~73 years of uptime) and span (10 days).
MAX_MONO = 1 << 61
MAX_SPAN = 10 * 86400 * 10**9
_SPAN_KINDS = np.zeros(256, dtype=bool)
_SPAN_KINDS[[6, 7, 12]] = True
_UNTIMED = np.zeros(256, dtype=bool)
_UNTIMED[[8, 11]] = True
#: Largest valid ``aux`` per kind (MARK: MstxEvent, STEP: StepTag, TASK_INFO: Executor).
_AUX_MAX = np.full(256, 0xFFFF, dtype=np.int64)
_AUX_MAX[[1, 9, 8]] = [3, 1, len(EXECUTOR_NAMES) - 1]
_SERIES_MAX = max(Series)


#: Largest counter sub-index: a CPU id + 1 or a PID (Linux's PID_MAX_LIMIT is 2^22).
MAX_SUB_INDEX = 1 << 22


def impossible(chunk: np.ndarray) -> dict[str, np.ndarray]:
    """What makes records impossible, per check: reason → mask of the records failing it
    (times outside 0..2^61, spans reversed or over 10 days, counters not finite or with an
    unknown series or sub-index, enum-like ``aux`` out of range, negative range ids)."""
    kind = chunk["kind"]
    t0, t1 = chunk["t0"], chunk["t1"]
    out: dict[str, np.ndarray] = {"time out of range": ~_UNTIMED[kind] & ((t0 < 0) | (t0 >= MAX_MONO))}
    span = _SPAN_KINDS[kind]
    if span.any():
        out["end before start"] = span & (t1 < t0)
        out["span over 10 days"] = span & (t1 >= t0) & (t1 - t0 > MAX_SPAN)
    out["enum value out of range"] = chunk["aux"].astype(np.int64) > _AUX_MAX[kind]
    ctr = kind == 10
    if ctr.any():
        c = chunk.view(COUNTER_DTYPE)
        out["counter value not finite or over 1e18"] = ctr & ~(np.isfinite(c["value"]) & (np.abs(c["value"]) < 1e18))
        out["unknown counter series"] = ctr & ((c["a"] < 1) | (c["a"] > _SERIES_MAX))
        out["counter sub-index over 2^22"] = ctr & (c["b"] > MAX_SUB_INDEX)
    ranged = (kind == 4) | (kind == 5)
    if ranged.any():
        out["negative range id"] = ranged & (t1 < 0)
    return out


def valid_records(chunk: np.ndarray) -> np.ndarray:
    """Mask of the records whose values are possible (see :func:`impossible`).  A flipped bit
    that makes a value impossible drops the record (counted by the caller)."""
    ok = np.ones(len(chunk), dtype=bool)
    for bad in impossible(chunk).values():
        ok &= ~bad
    return ok
