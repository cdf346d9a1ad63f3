"""Advisor rules on statistics: top operator types, long API calls, unsupported switches.

Each rule takes an open :class:`JobDB` and returns its findings (none when it does not apply).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson

from openmsprof.analysis import job_views
from openmsprof.analysis.findings import INFO, WARNING, EventRef, Finding, ms, pct
from openmsprof.analysis.patterns import NULL_INT, int64_rows
from openmsprof.export.fmt import us, us_avg
from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof import summary_host as host

#: An op type above this share of device time is reported; above HOT_SHARE it is a warning.
TOP_SHARE, HOT_SHARE = 10.0, 30.0
TOP_TYPES, EXAMPLES = 5, 3
#: An API call this long is long whatever its peers; otherwise LONG_FACTOR × its name's median
#: (with ≥ MIN_CALLS calls) and at least MIN_EXCESS_NS above it; a call of a rarely called name
#: (model load, unload) is long at JOB_FACTOR × the median of all the job's calls and ≥ RARE_NS.
ABS_LONG_NS, LONG_FACTOR, MIN_CALLS, MIN_EXCESS_NS = 10_000_000, 5.0, 3, 100_000
JOB_FACTOR, RARE_NS = 20.0, 1_000_000
#: The first call of an API is a warm-up when WARMUP_FACTOR × slower than the rest's median.
WARMUP_FACTOR = 2.0
#: A long API call above this is a warning rather than information.
SEVERE_API_NS = 100_000_000


def top_ops(db: JobDB) -> list[Finding]:
    """The op types with the most device time (share, count, avg), longest instances linked."""
    if not db.has("TASK"):
        return []
    rows = _type_totals(db)
    total = sum(r[2] for r in rows)
    out: list[Finding] = []
    for rank, (type_id, n, tot, mx) in enumerate(rows[:TOP_TYPES], 1):
        share = pct(tot, total)
        if share < TOP_SHARE and (out or rank > 1):
            break
        name = db.text(type_id)
        severity = WARNING if share >= HOT_SHARE else INFO
        out.append(Finding(
            "top_ops", severity,
            f"op type {name!r} takes {share:.1f}% of device time ({n} tasks, avg "
            f"{us_avg(tot, n)} us)" + (" — the first place to optimise" if rank == 1 else ""),
            {"op_type": name, "rank": rank, "share_pct": share, "count": n,
             "total_us": us(tot), "avg_us": us_avg(tot, n), "max_us": us(max(mx, 0)),
             "device_total_us": us(total)},
            _longest_tasks(db, type_id)))
    return out


def _type_totals(db: JobDB) -> list[tuple[int | None, int, int, int]]:
    """(op type id, count, total ns, max ns) per op type, total descending — from the task
    columns the pattern rules already read (one pass over the tasks for the whole advisor)."""
    cols = job_views.columns(db)
    if cols is None:
        return []
    uniq, inv = np.unique(cols.typ, return_inverse=True)
    inv = inv.ravel()
    count = np.bincount(inv, minlength=len(uniq))
    total = np.zeros(len(uniq), dtype=np.int64)
    np.add.at(total, inv, cols.dur)
    mx = np.zeros(len(uniq), dtype=np.int64)
    np.maximum.at(mx, inv, cols.dur)
    order = np.lexsort((uniq, -total))
    return [(None if uniq[k] < 0 else int(uniq[k]), int(count[k]), int(total[k]), int(mx[k]))
            for k in order.tolist()]


def _longest_tasks(db: JobDB, type_id: int | None) -> list[EventRef]:
    """The longest tasks of one op type (ties: earliest first), from the task columns."""
    cols = job_views.columns(db)
    if "COMPUTE_TASK_INFO" not in db.tables or cols is None:
        return []
    at = np.flatnonzero(cols.typ < 0 if type_id is None else cols.typ == type_id)
    at = at[np.lexsort((cols.start[at], -cols.dur[at]))[:EXAMPLES]]
    return [EventRef("TASK", int(cols.gid[i]), db.text(int(cols.name[i])), int(cols.start[i]),
                     int(cols.dur[i])) for i in at.tolist()]


def long_api(db: JobDB) -> list[Finding]:
    """API calls far above their name's median or long in absolute terms; first-call warm-up."""
    if not db.has("CANN_API"):
        return []
    rows = _api_rows(db)
    if not len(rows):
        return []
    typs, names, durs = rows[:, 0], rows[:, 1], rows[:, 4]
    api_total = int(durs.sum())
    job_median = float(np.median(durs))
    out: list[Finding] = []
    for sel in _api_groups(typs, names):
        typ, name_id = int(typs[sel[0]]), int(names[sel[0]])  # (NULL_INT reads as NULL did: "Api", "N/A")
        name = db.text(name_id)
        label = f"{host.level_name(typ)} {name}"
        dur = durs[sel]
        median = float(np.median(dur))
        warm = _warmup(dur)
        if warm is not None:
            cid, s, d = _call(rows, int(sel[0]))
            out.append(Finding(
                "long_api", INFO,
                f"first {name} call took {ms(d)}, {d / warm:.1f}x the steady-state median "
                f"{ms(warm)} (warm-up)",
                {"api": name, "level": host.level_name(typ), "first_us": us(d),
                 "steady_median_us": us(int(warm)), "ratio": round(d / warm, 2),
                 "calls": len(sel)},
                [EventRef("CANN_API", cid, name, s, d)]))
        long = (dur >= ABS_LONG_NS)
        if len(sel) >= MIN_CALLS:
            long |= (dur >= LONG_FACTOR * median) & (dur - median >= MIN_EXCESS_NS)
        else:
            long |= (dur >= JOB_FACTOR * job_median) & (dur >= RARE_NS)
        if warm is not None:
            long[0] = False
        idx = np.flatnonzero(long)
        if idx.size == 0:
            continue
        idx = idx[np.argsort(-dur[idx], kind="stable")]
        worst = int(dur[idx[0]])
        flagged = int(dur[idx].sum())
        severity = WARNING if worst >= SEVERE_API_NS or pct(flagged, api_total) >= 20 else INFO
        what = f"{idx.size} {name} calls" if idx.size > 1 else f"{name} call"
        out.append(Finding(
            "long_api", severity,
            f"{what} took {ms(flagged)} (longest {ms(worst)}"
            + (f", median {ms(median)})" if len(sel) > 1 else ")")
            + f", {pct(flagged, api_total):.1f}% of API time",
            {"api": name, "level": host.level_name(typ), "calls": len(sel),
             "long_calls": int(idx.size), "longest_us": us(worst), "median_us": us(int(median)),
             "long_total_us": us(flagged), "share_of_api_pct": pct(flagged, api_total),
             "label": label},
            [_api_ref(rows, int(sel[i]), name) for i in idx[:EXAMPLES]]))
    return out


_API_SQL = ("SELECT COALESCE(type, ?), COALESCE(name, ?), connectionId, startNs, MAX(endNs - startNs, 0)"
            " FROM CANN_API WHERE startNs IS NOT NULL AND endNs IS NOT NULL")


def _api_rows(db: JobDB) -> np.ndarray[Any, Any]:
    """(type, name, connectionId, start, duration) of every API call in start order, one int64
    row each (a Python tuple a call held 2 M calls in ~0.7 GB)."""
    (n,) = db.query(f"SELECT COUNT(*) FROM ({_API_SQL})", (NULL_INT, NULL_INT))[0]
    return int64_rows(db, _API_SQL + " ORDER BY startNs", 5, n, (NULL_INT, NULL_INT))


def _call(rows: np.ndarray[Any, Any], i: int) -> tuple[int, int, int]:
    """(connectionId, start, duration) of row ``i`` of ``_api_rows``, as Python ints."""
    return int(rows[i, 2]), int(rows[i, 3]), int(rows[i, 4])


def _api_ref(rows: np.ndarray[Any, Any], i: int, name: str) -> EventRef:
    """The EventRef of row ``i`` of ``_api_rows``."""
    cid, s, d = _call(rows, i)
    return EventRef("CANN_API", cid, name, s, d)


def _api_groups(typs: np.ndarray[Any, Any], names: np.ndarray[Any, Any]) -> list[np.ndarray[Any, Any]]:
    """The rows of each (type, name), each group in start order, the groups in the order their
    first calls come."""
    order = np.lexsort((names, typs))  # (stable: a group's rows keep their start order)
    t, n = typs[order], names[order]
    cut = np.flatnonzero((t[1:] != t[:-1]) | (n[1:] != n[:-1])) + 1
    first = np.concatenate(([0], cut))
    last = np.concatenate((cut, [len(order)]))
    return [order[first[g]:last[g]] for g in np.argsort(order[first], kind="stable").tolist()]


def _warmup(dur: np.ndarray[Any, Any]) -> float | None:
    """The steady-state median when the first call is a warm-up outlier, else None."""
    if dur.size < MIN_CALLS:
        return None
    rest = float(np.median(dur[1:]))
    first = float(dur[0])
    if rest > 0 and first >= WARMUP_FACTOR * rest and first - rest >= MIN_EXCESS_NS:
        return rest
    return None


def unsupported(db: JobDB) -> list[Finding]:
    """Switches that were requested but not collected on this machine (META_DATA UNSUPPORTED)."""
    try:
        items = orjson.loads(db.meta.get("UNSUPPORTED") or "[]")
    except orjson.JSONDecodeError:
        items = [str(db.meta.get("UNSUPPORTED"))]
    if not isinstance(items, list) or not items:
        return []
    names = [str(x).split(":", 1)[0] for x in items]
    return [Finding("unsupported", INFO,
                    f"{len(items)} requested switch{'es' if len(items) > 1 else ''} not collected "
                    f"on this machine: {', '.join(names)}",
                    {"count": len(items), "switches": [str(x) for x in items]})]
