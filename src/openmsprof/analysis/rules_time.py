"""Advisor rules on the timeline: host-bound gaps on the device and the interval between steps.

Idle time is measured on the merged busy intervals of each device (overlapping tasks count
once); a gap *within* an execute lies between two tasks launched by the same API call (or in
the same step), a gap *between* executes separates two of them — host-side time of the
application (pre/post-processing, sleeps, data loading).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from openmsprof.analysis import job_views
from openmsprof.analysis.findings import INFO, WARNING, EventRef, Finding, ms, pct
from openmsprof.analysis.patterns import TaskColumns
from openmsprof.analysis.samples import _iteration_keys
from openmsprof.export.fmt import us
from openmsprof.export.jobdb import JobDB

#: Idle time above this share of the device span is a warning.
GAP_WARN_PCT = 20.0
EXAMPLES = 3
#: A step is an outlier when OUTLIER_FACTOR × slower than the median (and MIN_EXCESS_NS more).
OUTLIER_FACTOR, MIN_EXCESS_NS = 1.5, 100_000
#: Coefficient of variation of step time above which the steps are called jittery.
JITTER_CV = 0.2

Arr = np.ndarray[Any, Any]


def host_gaps(db: JobDB) -> list[Finding]:
    """Idle device time between tasks of one execute and between executes, per device."""
    cols = job_views.columns(db)  # the advisor's one read of the tasks
    if cols is None:
        return []
    out: list[Finding] = []
    for dev in np.unique(cols.dev).tolist():
        out.extend(_device_gaps(db, cols, int(dev)))
    return out


def _device_gaps(db: JobDB, cols: TaskColumns, dev: int) -> list[Finding]:
    on = np.flatnonzero(cols.dev == dev)
    if on.size < 2:
        return []
    on = on[np.lexsort((cols.tid[on], cols.start[on]))]  # by start, then task id
    gid, conn, start, name = cols.gid[on], cols.it[on], cols.start[on], cols.name[on]
    end = start + cols.dur[on]
    keys = _iteration_keys(db, conn, start)
    prev_end = np.maximum.accumulate(end)[:-1]
    gap = np.maximum(start[1:] - prev_end, 0)
    between = keys[1:] != keys[:-1]
    span = int(end.max() - start.min())
    n_iter = int(np.unique(keys).size)
    out: list[Finding] = []
    for kind, mask in (("between", between), ("within", ~between)):
        g = np.where(mask, gap, 0)
        total = int(g.sum())
        if total <= 0:
            continue
        share = pct(total, span)
        order = np.argsort(-g, kind="stable")[:EXAMPLES]
        events = [EventRef("GAP", int(gid[i + 1]), f"idle before {db.text(int(name[i + 1]))!r}"
                           f" (after {db.text(int(name[i]))!r})", int(prev_end[i]), int(g[i]))
                  for i in order if g[i] > 0]
        largest = int(g[order[0]])
        evidence = {"device": dev, "idle_us": us(total), "idle_pct_of_span": share,
                    "gaps": int((g > 0).sum()), "largest_gap_us": us(largest),
                    "span_us": us(span), "executes": n_iter}
        if kind == "between":
            nz = gap[between]
            evidence["median_gap_us"] = us(int(np.median(nz)))
            summary = (f"device {dev} idle {ms(total)} between {n_iter} executes ({share:.1f}% "
                       f"of the {ms(span)} span); largest host-side gap {ms(largest)}")
        else:
            summary = (f"device {dev} idle {ms(total)} between tasks inside executes "
                       f"({share:.1f}% of the span); largest gap {ms(largest)}")
        out.append(Finding("host_gaps", WARNING if share >= GAP_WARN_PCT else INFO, summary,
                           evidence, events))
    return out


def step_interval(db: JobDB) -> list[Finding]:
    """Step (iteration) time variance, outlier steps and the host time between steps."""
    if not db.has("STEP_TIME"):
        return []
    rows = db.query("SELECT id, startNs, MAX(endNs, startNs), modelId, deviceId FROM STEP_TIME"
                    " ORDER BY modelId, deviceId, startNs")
    groups: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for sid, s, e, model, dev in rows:
        groups.setdefault((model, dev), []).append((sid, s, e))
    out: list[Finding] = []
    for (model, dev), steps in groups.items():
        if len(steps) >= 2:
            out.append(_steps(model, dev, np.array(steps, dtype=np.int64)))
    return out


def _steps(model: int, dev: int, steps: Arr) -> Finding:
    sid, start, end = steps.T
    dur = end - start
    med = float(np.median(dur))
    mean = float(dur.mean())
    cv = float(dur.std() / mean) if mean > 0 else 0.0
    interval = np.diff(start)
    between = np.maximum(start[1:] - end[:-1], 0)
    slow = np.flatnonzero((dur >= OUTLIER_FACTOR * med) & (dur - med >= MIN_EXCESS_NS))
    slow = slow[np.argsort(-dur[slow], kind="stable")]
    jitter = cv > JITTER_CV
    who = "framework steps" if model == 4294967295 else f"model {model} steps on device {dev}"
    summary = (f"{len(dur)} {who}: median {ms(med)}, cv {cv:.2f}"
               + (f", {slow.size} outlier step{'s' if slow.size > 1 else ''} up to "
                  f"{ms(float(dur[slow[0]]))}" if slow.size else "")
               + f"; {ms(float(between.sum()))} between steps")
    events = [EventRef("STEP_TIME", int(sid[i]), f"step {int(sid[i])}", int(start[i]),
                       int(dur[i])) for i in slow[:EXAMPLES]]
    if between.size and between.max() > 0:
        i = int(np.argmax(between))
        events.append(EventRef("STEP_TIME", int(sid[i + 1]), f"gap before step {int(sid[i + 1])}",
                               int(end[i]), int(between[i])))
    evidence = {"steps": int(dur.size), "median_us": us(int(med)), "mean_us": us(int(mean)),
                "std_us": us(int(dur.std())), "cv": round(cv, 4), "min_us": us(int(dur.min())),
                "max_us": us(int(dur.max())), "outliers": int(slow.size),
                "median_interval_us": us(int(np.median(interval))),
                "max_interval_us": us(int(interval.max())),
                "between_total_us": us(int(between.sum())),
                "max_between_us": us(int(between.max()))}
    return Finding("step_interval", WARNING if jitter or slow.size else INFO, summary, evidence,
                   events)
