"""The framework→runtime layer of a torch run (what CANN_API, the trace_view ``CANN`` process, the
``HostToDevice`` flows and api_statistic.csv show on Ascend), taken from the operators we have.

On the CPU a computing "kernel" is the leaf operator itself, so the call that dispatched it is that
operator's dispatcher call: one ``Node`` level API with the operator's name and times.  A
collective is launched by its ``c10d::`` operator on the calling thread and worked by the backend
(``gloo:all_reduce`` on a gloo thread): the launch is a ``Communication`` level API, matched to the
work as the latest unused ``c10d::`` operator that started before it.  CUDA kernels use their
source operator (the first ``cpu_op`` with the same External id).

Every kernel gets one connection id (the operator event index of its API) shared by TASK,
COMMUNICATION_OP, CANN_API, CONNECTION_IDS and the HostToDevice flow.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from openmsprof.export.ascend_pt.framework import LAUNCH_PREFIXES, Framework

__all__ = ["LEVELS", "Apis", "build", "statistic_rows"]

#: (trace_view / api_statistic Level, ENUM_API_TYPE id)
LEVELS = [("Node", 10000), ("Communication", 5500)]


@dataclass
class Apis:
    """The APIs (operator event, level code into ``LEVELS``; one per distinct caller) and per
    kernel its connection id = the caller's operator event index (-1: none)."""

    event: np.ndarray
    level: np.ndarray
    conn: np.ndarray

    def __len__(self) -> int:
        return len(self.event)


def _launches(fw: Framework, comm_kernels: np.ndarray) -> np.ndarray:
    """For each communication kernel, the ``c10d::`` operator that launched it (-1: none found)."""
    names = fw.names
    is_launch = np.asarray([n.startswith(LAUNCH_PREFIXES) for n in names] or [False], bool)
    cand = np.flatnonzero(is_launch[fw.cols.op_name] & ~fw.op_annotation) if fw.n_ops else np.zeros(0, np.int64)
    cand = cand[np.argsort(fw.op_ts[cand], kind="stable")]
    starts = fw.op_ts[cand]
    used: set[int] = set()
    out = np.full(len(comm_kernels), -1, np.int64)
    k = fw.kernels
    for n, j in enumerate(comm_kernels.tolist()):
        pos = int(np.searchsorted(starts, k.ts[j], side="right")) - 1
        while pos >= 0 and int(cand[pos]) in used:
            pos -= 1
        if pos >= 0:
            used.add(int(cand[pos]))
            out[n] = cand[pos]
    return out


def build(fw: Framework) -> Apis:
    k = fw.kernels
    n = len(k)
    src = k.op.copy() if n else np.zeros(0, np.int64)
    level = np.zeros(n, np.int64)
    comm = np.flatnonzero(k.comm) if n else np.zeros(0, np.int64)
    if len(comm) and len(k.event) and int(k.event.min()) >= 0:
        launch = _launches(fw, comm)
        src[comm] = np.where(launch >= 0, launch, k.event[comm])
        level[comm] = 1
    has = np.flatnonzero(src >= 0)
    sel = src[has]
    if not len(sel) or bool((sel[1:] > sel[:-1]).all()):  # already unique and sorted (the usual window)
        event, first = sel, np.arange(len(sel))
    else:
        event, first = np.unique(sel, return_index=True)
    return Apis(event=event.astype(np.int64), level=level[has][first], conn=src)


def statistic_rows(fw: Framework, apis: Apis) -> list[list[object]]:
    """api_statistic.csv rows: per (Level, API name) total/count/avg/min/max (µs) and variance."""
    if not len(apis):
        return []
    dur = fw.op_dur[apis.event].astype(np.float64) / 1000.0
    key = apis.level * (len(fw.names) + 1) + fw.cols.op_name[apis.event].astype(np.int64)
    uniq, inv = np.unique(key, return_inverse=True)
    inv = inv.reshape(-1)
    rows: list[list[object]] = []
    for g, kv in enumerate(uniq.tolist()):
        d = dur[inv == g]
        level, name = LEVELS[kv // (len(fw.names) + 1)][0], fw.names[kv % (len(fw.names) + 1)]
        rows.append(["host", level, name, f"{d.sum():.3f}", len(d), f"{d.mean():.3f}", f"{d.min():.3f}",
                     f"{d.max():.3f}", f"{d.var():.3f}"])
    rows.sort(key=lambda r: -float(str(r[3])))
    return rows
