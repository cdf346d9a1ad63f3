"""Record producers for sources other than markers: API spans, tasks, steps, counters.

API spans and step ranges (host records) go through the native core's rings when it runs, like
the markers.  Tasks, step timestamps and counters stay on the bounded Python path: they go to
``device_{id}/data`` directories with their own string tables (the native flusher writes the
host's only), tasks come in column-wise batches already (``record_tasks``: no per-record work),
and step timestamps and counters come at a few per step or per sampling interval.

Every function is safe to call at any time: it records only while a session collects the kind
in question (``api_on()``, ``task_on()``) and never raises into the caller.  Timestamps are
monotonic ns from :data:`now_ns` (``time.perf_counter_ns``); convert framework epoch times
with :func:`epoch_to_mono`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from openmsprof.recorder import buffers, core, session
from openmsprof.recorder.clock import now_ns
from openmsprof.recorder.records import (
    API_LEVEL_CODES,
    NO_MODEL,
    ApiLevel,
    Executor,
    Series,
    StepTag,
)

__all__ = [
    "ApiLevel", "Executor", "Series", "StepTag", "api_on", "epoch_to_mono", "new_connection_id",
    "now_ns", "record_api", "record_counter", "record_step", "record_step_range", "record_task",
    "record_tasks", "task_on",
]

_api_on = False
_task_on = False
_any_on = False
_API_CODE = {lvl: i for i, lvl in enumerate(API_LEVEL_CODES)}
#: The native core's producers while a native session runs (API spans and step ranges go to the
#: host's rings as 32-byte records); None on the Python path.
_native: Any = None


def _on_start(s: session.Session) -> None:
    global _api_on, _task_on, _any_on, _native
    _api_on = bool(s.config.acl_api or s.config.runtime_api)
    _task_on = s.config.task_time_on
    _any_on = True
    _native = core.ring if s.backend == "native" and core.ring is not None else None


def _on_stop(s: session.Session) -> None:
    global _api_on, _task_on, _any_on, _native
    _api_on = _task_on = _any_on = False
    _native = None


session.add_listener(_on_start, _on_stop)


def api_on() -> bool:
    return _api_on


def task_on() -> bool:
    return _task_on


def collecting() -> bool:
    return _any_on


def new_connection_id() -> int:
    return buffers.next_connection_id()


def epoch_to_mono(epoch_ns: int) -> int:
    """Map an epoch ns time (ONNX Runtime, torch) to the session's monotonic axis."""
    s = session.current()
    if s is None:
        return epoch_ns
    return epoch_ns - s.start_pair.offset_ns


def record_api(name: str, level: ApiLevel, t0: int, t1: int, connection_id: int = 0) -> None:
    """An API span on the calling thread."""
    if _api_on:
        if _native is not None:
            _native.api(name, _API_CODE.get(level, 0), t0, t1, connection_id)
        else:
            buffers.append((6, t0, t1, name, level, connection_id))


def record_task(device_id: int, stream: int, name: str, t0: int, t1: int, task_id: int, *,
                op_type: str = "", model_id: int = NO_MODEL, input_shapes: str = "",
                input_dtypes: str = "", output_shapes: str = "", output_dtypes: str = "",
                connection_id: int = 0, executor: Executor = Executor.CPU) -> None:
    """One executed operator/kernel on ``stream`` of ``device_id``."""
    if _task_on:
        buffers.append((7, device_id, stream, t0, t1, name, task_id, model_id, op_type,
                        input_shapes, input_dtypes, output_shapes, output_dtypes,
                        connection_id, executor))


def record_tasks(device_id: int, model_id: int, strings: Sequence[tuple[str, str, str, str, str, str]],
                 executors: Sequence[int], meta: np.ndarray, stream: np.ndarray, t0: np.ndarray,
                 t1: np.ndarray, task_id: np.ndarray, connection_id: np.ndarray) -> None:
    """Many tasks of one model at once (encoded column-wise by the flusher).  ``strings[i]`` =
    (name, op type, input shapes, input dtypes, output shapes, output dtypes) and
    ``executors[i]`` of node ``i``; ``meta`` (node index per task) and the other arrays hold one
    value per task."""
    if _task_on and len(t0):
        buffers.append((buffers.TASK_BATCH, device_id, model_id, list(strings), list(executors),
                        np.stack([meta, stream, t0, t1, task_id, connection_id]).astype(np.int64)))


def record_step(ts: int, step_index: int, tag: StepTag, model_id: int = NO_MODEL,
                device_id: int | None = 0) -> None:
    """A step timestamp (pyACL get_step_timestamp)."""
    if _any_on:
        buffers.append((9, ts, step_index, model_id, tag, device_id))


def record_step_range(t0: int, t1: int, step_number: int) -> None:
    """A whole framework step (e.g. ``ProfilerStep#N``)."""
    if _any_on:
        if _native is not None:
            _native.step_range(t0, t1, step_number)
        else:
            buffers.append((12, t0, t1, step_number))


def record_counter(ts: int, series: Series, sub_index: int, value: float, device_id: int | None = None) -> None:
    """An in-process counter sample (device counters; host usage comes from the sampler)."""
    if _any_on:
        buffers.append((10, ts, series, sub_index, value, device_id))
