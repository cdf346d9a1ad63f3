"""The nodes of an ONNX Runtime profile as task records, each linked to the execute that ran it.

Task ids are process-unique and streams are per-thread indexes (FORMATS decision 9); the
TensorFlow task source takes its ids and streams here too.
"""

from __future__ import annotations

import threading

import numpy as np

from openmsprof.sources import emit
from openmsprof.sources.ort_columns import NodeMeta, Profile

__all__ = ["emit_tasks", "reserve_task_ids", "run_connections", "stream_index", "stream_indexes"]

_streams: dict[int, int] = {}
_stream_lock = threading.Lock()
_task_lock = threading.Lock()
_next_task = 1


def stream_index(tid: int) -> int:
    """Index of an executing thread within this process (FORMATS decision 9)."""
    idx = _streams.get(tid)
    if idx is None:
        with _stream_lock:
            idx = _streams.setdefault(tid, len(_streams))
    return idx


def stream_indexes(tids: np.ndarray) -> np.ndarray:
    """:func:`stream_index` of every thread id (vectorised over the few distinct ones)."""
    if not len(tids) or (tids == tids[0]).all():
        return np.full(len(tids), stream_index(int(tids[0])) if len(tids) else 0, np.int64)
    uniq, inv = np.unique(tids, return_inverse=True)
    return np.array([stream_index(int(t)) for t in uniq], np.int64)[inv]


def reserve_task_ids(n: int) -> int:
    """First of ``n`` consecutive process-unique task ids."""
    global _next_task
    with _task_lock:
        first, _next_task = _next_task, _next_task + n
    return first


def run_connections(profile: Profile, launches: list[tuple[int, int, int]]) -> np.ndarray:
    """Connection id of each node: its run's execute, runs and executes paired in start order."""
    conns = np.zeros(profile.runs + 1, np.int64)  # last slot: nodes in no run
    k = min(profile.runs, len(launches))
    if k:
        conns[:k] = [c for _, _, c in sorted(launches)[:k]]
    return conns[profile.node_run]


def emit_tasks(profile: Profile, launches: list[tuple[int, int, int]], metas: list[NodeMeta],
               model_id: int, device_id: int) -> int:
    """Record every node of ``profile`` as a task, linked to the execute that ran it
    (``launches`` = (t0, t1, connection id) of the executes).  Returns the number of tasks."""
    n = len(profile.node_ts)
    if not n or not emit.task_on():
        return 0
    t0 = emit.epoch_to_mono(0) + profile.node_ts
    first = reserve_task_ids(n)
    emit.record_tasks(device_id, model_id, [m.strings() for m in metas], [m.executor for m in metas],
                      profile.node_meta, stream_indexes(profile.node_tid), t0, t0 + profile.node_dur,
                      np.arange(first, first + n, dtype=np.int64), run_connections(profile, launches))
    return n
