"""Per-thread record buffers: the hot path appends a tuple to its own thread's list, no lock.

Producers do::

    try:
        TLS.append(record)          # TLS.append is the bound append of the thread's list
    except AttributeError:
        append_slow(record)

and the flusher drains each list with ``chunk = items[:n]; del items[:n]`` — two single
bytecode operations that are atomic under the GIL, so a concurrent append is never lost.

Hot-path tuples (first item = :class:`~openmsprof.recorder.records.Kind` value)::

    (MARK, ts, message, domain)
    (PUSH, ts, message, domain)
    (POP, ts, None, None)
    (RANGE_START, ts, message, domain, range_id)
    (RANGE_END, ts, range_id)
    (API, t0, t1, name, ApiLevel, connection_id)
    (TASK, device_id, stream, t0, t1, name, task_id, model_id, op_type, in_shapes,
           in_dtypes, out_shapes, out_dtypes, connection_id, Executor)
    (STEP, ts, step_index, model_id, StepTag, device_id)
    (STEP_RANGE, t0, t1, step_number)
    (COUNTER, ts, Series, sub_index, value, device_id)
    (TASK_BATCH, device_id, model_id, node strings, node executors, int64 array (6, n))

Marker tuples (kinds 1-3) all have four items so the flusher can encode them column-wise.
Strings are interned by the flusher, off the hot path.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

TLS = threading.local()
#: Set by a producer whose list is full: the flusher wakes now instead of at its interval.
WAKE = threading.Event()
#: Tag of a batch of tasks (``emit.record_tasks``); an in-memory tag, not a record kind.
TASK_BATCH = 100


class ThreadBuffer:
    __slots__ = ("drops", "items", "name", "thread", "tid")

    def __init__(self) -> None:
        t = threading.current_thread()
        self.items: list[tuple[Any, ...]] = []
        #: records dropped by this thread (list full), by record kind (index = kind)
        self.drops = [0] * 16
        self.thread = t
        self.tid = threading.get_native_id()
        self.name = t.name


_registry: list[ThreadBuffer] = []
_registry_lock = threading.Lock()
_connection_ids = itertools.count(1)
_range_ids = itertools.count(1)


def register_current_thread() -> list[tuple[Any, ...]]:
    """Create and register the calling thread's buffer; return its list."""
    buf = ThreadBuffer()
    with _registry_lock:
        _registry.append(buf)
    TLS.items = buf.items
    TLS.drops = buf.drops
    TLS.append = buf.items.append  # one attribute lookup less on the hot path
    return buf.items


def append_slow(record: tuple[Any, ...]) -> None:
    """First append of a thread (its buffer does not exist yet)."""
    register_current_thread().append(record)


#: Most records one thread's list holds before the flusher takes them (the session's memory
#: ceiling); set from ``core.PY_LIST_RECORDS`` by the markers module.
LIST_CAP = 1 << 14


def append(record: tuple[Any, ...]) -> None:
    """Append for callers that are not on the hottest path (API spans, tasks, steps, counters):
    a full list drops the record, counts it for the thread and kind and wakes the flusher."""
    try:
        items = TLS.items
    except AttributeError:
        append_slow(record)
        return
    if len(items) < LIST_CAP:
        items.append(record)
    else:
        TLS.drops[min(record[0], len(TLS.drops) - 1)] += 1
        WAKE.set()


def length() -> int:
    """Records the calling thread has buffered and the flusher not yet taken."""
    try:
        return len(TLS.items)
    except AttributeError:
        return 0


def snapshot() -> list[ThreadBuffer]:
    with _registry_lock:
        return list(_registry)


_dead_drops: dict[tuple[int, int], int] = {}


def drop_dead_empty() -> None:
    """Forget buffers of finished threads once drained (bounded registry); their drop counts
    are kept."""
    with _registry_lock:
        keep = []
        for b in _registry:
            if b.items or b.thread.is_alive():
                keep.append(b)
                continue
            for kind, n in enumerate(b.drops):
                if n:
                    _dead_drops[(b.tid, kind)] = _dead_drops.get((b.tid, kind), 0) + n
        _registry[:] = keep


def drop_rows() -> list[tuple[int, int, int]]:
    """(tid, kind, records dropped) of every thread since the session began."""
    with _registry_lock:
        counts = dict(_dead_drops)
        for b in _registry:
            for kind, n in enumerate(b.drops):
                if n:
                    counts[(b.tid, kind)] = counts.get((b.tid, kind), 0) + n
    return [(tid, kind, n) for (tid, kind), n in sorted(counts.items())]


def clear_all() -> None:
    """Discard anything left from a previous session (records that raced its stop)."""
    for b in snapshot():
        del b.items[:]
        b.drops[:] = [0] * len(b.drops)
    with _registry_lock:
        _dead_drops.clear()


def next_connection_id() -> int:
    """A process-unique id linking an API call to the tasks it launched (< 2^32)."""
    return next(_connection_ids) & 0xFFFFFFFF or next(_connection_ids)


def next_range_id() -> int:
    return next(_range_ids)
