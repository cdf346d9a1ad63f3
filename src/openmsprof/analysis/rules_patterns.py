"""The ``patterns`` advisor rule: decomposed activations/norms, unfused Conv activations and
layout ping-pong found in the executed graph, each with a fix and a modelled gain.

Rules come from :mod:`openmsprof.analysis.patterns` (a data file).  The machine's ceilings come
from the job (``host/peaks.json``), or the ``--peaks`` override set with :func:`use_peaks`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from openmsprof.analysis import patterns as PT
from openmsprof.analysis.findings import CRITICAL, INFO, WARNING, EventRef, Finding, pct
from openmsprof.analysis.pattern_gain import price
from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof.roofline import Ceilings, ceilings, job_peaks

__all__ = ["CRITICAL_SHARE", "WARNING_SHARE", "job_ceilings", "patterns", "use_peaks"]

CRITICAL_SHARE, WARNING_SHARE = 30.0, 5.0
#: A pattern below this share of device time is not worth a finding.
MIN_SHARE = 1.0
MAX_SITES = 8


def use_peaks(db: JobDB, doc: dict[str, Any]) -> None:
    """Use ``doc`` (an override peaks file) for this database's rules and report."""
    db._omsp_peaks = doc  # type: ignore[attr-defined]


def job_ceilings(db: JobDB) -> tuple[Ceilings, dict[str, Any]]:
    doc = getattr(db, "_omsp_peaks", None)
    if doc is None:
        doc = job_peaks(db)
        db._omsp_peaks = doc  # type: ignore[attr-defined]
    return ceilings(doc), doc


def _columns(db: JobDB) -> PT.TaskColumns | None:
    """The task columns, read once per open database (the HTML report reuses them)."""
    if not hasattr(db, "_omsp_cols"):
        db._omsp_cols = PT.task_columns(db)  # type: ignore[attr-defined]
    return db._omsp_cols  # type: ignore[attr-defined,no-any-return]


def _has_shapes(db: JobDB) -> bool:
    if "COMPUTE_TASK_INFO" not in db.tables:
        return False
    na = [i for i, v in db.strings.items() if v in ("N/A", "")]
    q = "SELECT 1 FROM COMPUTE_TASK_INFO WHERE inputShapes IS NOT NULL"
    if na:
        q += f" AND inputShapes NOT IN ({','.join(map(str, na))})"
    return bool(db.query(q + " LIMIT 1"))


def patterns(db: JobDB) -> list[Finding]:
    """One finding per pattern that occurs, largest predicted gain first."""
    cols = _columns(db)
    if cols is None:
        return []
    if not _has_shapes(db):
        return [Finding("patterns", INFO,
                        "pattern rules skipped: the job has no tensor shapes (they need task "
                        "time with shapes: ONNX Runtime nodes, torch record_shapes=True, TF ops)",
                        {"skipped": [p.name for p in PT.load_patterns()],
                         "needs": "COMPUTE_TASK_INFO inputShapes/outputShapes"})]
    ceil, doc = job_ceilings(db)
    total = float(cols.dur.sum())
    # shares against the median iteration (a few slow executes must not hide a pattern)
    per_iter = float(np.median(np.bincount(cols.it_index, weights=cols.dur.astype(float))))
    iters = cols.iterations
    floor_ns = float(np.percentile(cols.dur, 10)) if cols.dur.size else 0.0
    out: list[tuple[float, Finding]] = []
    for p in PT.load_patterns():
        m = PT.find_matches(db, cols, p)
        if m.count == 0:
            continue
        cost = price(db, cols, m, ceil, floor_ns)
        if pct(cost["median_iteration_ns"], per_iter) < MIN_SHARE:
            continue
        out.append((cost["gain_iteration_ns"], _finding(db, cols, m, cost, total, per_iter, iters, ceil, doc)))
    out.sort(key=lambda x: -x[0])
    return [f for _, f in out]


def _row(m: PT.Match, k: int) -> list[int]:
    """Task indexes of occurrence ``k`` (counting through the variant groups)."""
    for g in m.groups:
        if k < len(g):
            return [int(i) for i in g[k]]
        k -= len(g)
    return []


def _finding(db: JobDB, cols: PT.TaskColumns, m: PT.Match, cost: dict[str, Any], total: float,
             per_iter: float,
             iters: int, ceil: Ceilings, doc: dict[str, Any]) -> Finding:
    p = m.pattern
    text = db.text
    share = pct(cost["median_iteration_ns"], per_iter)
    severity = CRITICAL if share >= CRITICAL_SHARE else WARNING if share >= WARNING_SHARE else INFO
    sites: dict[tuple[int, ...], int] = {}
    for g in m.groups:  # distinct node-name sequences and how often each ran
        uniq, inv = PT.unique_rows(cols.name[g])
        counts = np.bincount(inv, minlength=len(uniq))
        for k, cnt in zip(uniq.tolist(), counts.tolist(), strict=True):
            sites[tuple(k)] = sites.get(tuple(k), 0) + int(cnt)
    named = [" → ".join(text(n) for n in k) for k in sites]
    gain_it = cost["gain_iteration_ns"]
    worst = int(np.argmax(m.durations(cols.dur)))
    row = _row(m, worst)
    seq = " → ".join(("… → " if k and i > row[k - 1] + 1 else "") + text(cols.typ[i])
                     for k, i in enumerate(row))  # the op types as this job spells them
    summary = (f"{p.title} ({seq}) at {len(sites)} site{'s' if len(sites) != 1 else ''} "
               f"takes {share:.1f}% of device time; fix: {p.replacement.split(':')[-1].strip()}"
               f"; predicted gain {gain_it / 1e3:.1f} us per iteration "
               f"({pct(gain_it, per_iter):.1f}%)")
    events = [EventRef("TASK", int(cols.gid[i]), text(cols.name[i]), int(cols.start[i]),
                       int(cols.dur[i])) for i in row]
    evidence: dict[str, Any] = {
        "pattern": p.name, "title": p.title, "nodes": named[:MAX_SITES],
        "sites": len(sites), "occurrences": m.count, "iterations": iters,
        "share_pct": share, "share_of_total_pct": pct(cost["measured_ns"], total), "measured_us_per_iteration": round(cost["median_iteration_ns"] / 1e3, 3),
        "replacement": p.replacement, "replacement_op": p.replacement_op or "(none)",
        "fused_into_previous": cost["fused"],
        "replacement_us_per_iteration": round(cost["replacement_ns"] / iters / 1e3, 3),
        "absorbed_us_per_iteration": round(cost["absorbed_ns"] / iters / 1e3, 3),
        "predicted_gain_us_per_iteration": round(gain_it / 1e3, 3),
        "predicted_gain_pct": pct(gain_it, per_iter),
        "bytes_saved_per_iteration": round(cost["saved_bytes"] / iters),
        "memory_gain_us_per_iteration": round(cost["memory_gain_ns"] / iters / 1e3, 3),
        "bandwidth_gbs": round(ceil.bandwidth / 1e9, 3), "peaks": str(doc.get("source", "")),
    }
    if len(named) > MAX_SITES:
        evidence["nodes"].append(f"… {len(named) - MAX_SITES} more")
    return Finding("patterns", severity, summary, evidence, events)
