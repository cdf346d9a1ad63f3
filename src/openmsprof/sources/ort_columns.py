"""A parsed ONNX Runtime profile: its columns (:class:`Profile`: runs, nodes, the run holding
each node) and what stays the same across executions of one node (:class:`NodeMeta`).

:mod:`ort_profile` fills them from ORT's JSON; the harvest records the nodes as tasks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from openmsprof.recorder.records import Executor

__all__ = ["NodeMeta", "Profile", "executor_of", "shapes_text"]

_DTYPES = {"float": "FLOAT", "float16": "FLOAT16", "double": "DOUBLE", "int64": "INT64",
           "int32": "INT32", "int8": "INT8", "uint8": "UINT8", "bool": "BOOL", "bfloat16": "BF16"}


class NodeMeta:
    """What stays the same across executions of one node (with one set of shapes)."""

    __slots__ = ("executor", "in_dtypes", "in_shapes", "name", "op_index", "op_type", "out_dtypes", "out_shapes")

    def __init__(self, name: str, args: dict[str, Any]) -> None:
        self.name = name
        self.op_type = str(args.get("op_name", ""))
        self.in_shapes, self.in_dtypes = shapes_text(args.get("input_type_shape"))
        self.out_shapes, self.out_dtypes = shapes_text(args.get("output_type_shape"))
        self.executor = int(executor_of(str(args.get("provider", ""))))
        self.op_index = -1  # subscription op-table index, set on first use

    def strings(self) -> tuple[str, str, str, str, str, str]:
        return self.name, self.op_type, self.in_shapes, self.in_dtypes, self.out_shapes, self.out_dtypes


def shapes_text(items: Any) -> tuple[str, str]:
    """ORT ``[{"float": [1, 3]}, ...]`` → ("1,3;...", "FLOAT;...")."""
    shapes, dtypes = [], []
    for item in items or ():
        for dtype, dims in item.items():
            dtypes.append(_DTYPES.get(dtype, dtype.upper()))
            shapes.append(",".join(str(d) for d in dims))
    return ";".join(shapes), ";".join(dtypes)


def executor_of(provider: str) -> Executor:
    """The real executor of an ORT execution provider (FORMATS decision 1)."""
    if provider.startswith("CPU") or not provider:
        return Executor.CPU
    if provider.startswith(("CUDA", "Tensorrt")):
        return Executor.CUDA
    return Executor.OTHER


class Profile:
    """Columns of one profile.  Times are epoch ns; ``node_meta`` indexes ``NodeTable.metas``
    and ``node_run`` the runs (-1: inside no ``model_run``).  Runs are in start order."""

    __slots__ = ("node_dur", "node_meta", "node_run", "node_tid", "node_ts", "run_dur", "run_tid", "run_ts")

    def __init__(self, run_ts: np.ndarray, run_dur: np.ndarray, run_tid: np.ndarray, node_ts: np.ndarray,
                 node_dur: np.ndarray, node_tid: np.ndarray, node_meta: np.ndarray) -> None:
        if len(run_ts) > 1:
            order = np.argsort(run_ts, kind="stable")
            run_ts, run_dur, run_tid = run_ts[order], run_dur[order], run_tid[order]
        self.run_ts, self.run_dur, self.run_tid = run_ts, run_dur, run_tid
        self.node_ts, self.node_dur, self.node_tid, self.node_meta = node_ts, node_dur, node_tid, node_meta
        self.node_run = _owners(self.run_ts, self.run_dur, self.run_tid, node_ts, node_tid)

    @property
    def runs(self) -> int:
        return len(self.run_ts)


def _owners(run_ts: np.ndarray, run_dur: np.ndarray, run_tid: np.ndarray, ts: np.ndarray,
            tid: np.ndarray) -> np.ndarray:
    """Run holding each node: the latest run of the node's thread that started before it and
    had not ended; nodes run by pool threads go to any run holding them."""
    i = np.searchsorted(run_ts, ts, side="right") - 1
    ok = (i >= 0) & (ts <= run_ts[i] + run_dur[i]) & (run_tid[i] == tid) if len(run_ts) else i >= 0
    owner = np.where(ok, i, -1)
    for k in np.flatnonzero(~ok) if len(run_ts) else ():  # concurrent executes: rare, per node
        t, best = ts[k], -1
        for j in range(int(i[k]), max(-1, int(i[k]) - 64), -1):
            if t <= run_ts[j] + run_dur[j]:
                if run_tid[j] == tid[k]:
                    best = j
                    break
                best = j if best < 0 else best
        owner[k] = best
    return owner
